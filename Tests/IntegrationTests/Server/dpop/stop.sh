#!/usr/bin/env bash
# Stops the server start.sh started on $OAUTHFLOW_DPOP_PORT (by the pid it wrote) and removes its log.
set -euo pipefail
DPOP_HOME="${OAUTHFLOW_DPOP_HOME:-/tmp/oauthflow-dpop}"
PORT="${OAUTHFLOW_DPOP_PORT:-8940}"
PIDFILE="$DPOP_HOME/server-$PORT.pid"
[[ -f "$PIDFILE" ]] || exit 0
PID="$(cat "$PIDFILE")"
if [[ "$PID" =~ ^[0-9]+$ ]] && kill -0 "$PID" 2>/dev/null; then kill -- "-$PID" 2>/dev/null || kill "$PID"; fi
rm -rf "$PIDFILE" "$DPOP_HOME/server-$PORT.log" "$DPOP_HOME/op-$PORT"
