#!/usr/bin/env bash
# Stops the server start.sh started on $OAUTHFLOW_CREDS_PORT (by the pid it wrote) and removes its log.
set -euo pipefail
CREDS_HOME="${OAUTHFLOW_CREDS_HOME:-/tmp/oauthflow-creds}"
PORT="${OAUTHFLOW_CREDS_PORT:-8920}"
PIDFILE="$CREDS_HOME/server-$PORT.pid"
[[ -f "$PIDFILE" ]] || exit 0
PID="$(cat "$PIDFILE")"
if [[ "$PID" =~ ^[0-9]+$ ]] && kill -0 "$PID" 2>/dev/null; then kill -- "-$PID" 2>/dev/null || kill "$PID"; fi
rm -f "$PIDFILE" "$CREDS_HOME/server-$PORT.log"
