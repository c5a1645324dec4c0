#!/usr/bin/env bash
# Stops the server start.sh started on $OAUTHFLOW_EXCHANGE_PORT (by the pid it wrote) and removes its log.
set -euo pipefail
EXCHANGE_HOME="${OAUTHFLOW_EXCHANGE_HOME:-/tmp/oauthflow-exchange}"
PORT="${OAUTHFLOW_EXCHANGE_PORT:-8957}"
PIDFILE="$EXCHANGE_HOME/server-$PORT.pid"
[[ -f "$PIDFILE" ]] || exit 0
PID="$(cat "$PIDFILE")"
if [[ "$PID" =~ ^[0-9]+$ ]] && kill -0 "$PID" 2>/dev/null; then kill -- "-$PID" 2>/dev/null || kill "$PID"; fi
rm -rf "$PIDFILE" "$EXCHANGE_HOME/server-$PORT.log" "$EXCHANGE_HOME/state-$PORT"
