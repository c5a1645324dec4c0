#!/usr/bin/env bash
# Starts exchserver.py on 127.0.0.1:$OAUTHFLOW_EXCHANGE_PORT (default 8957) and waits (at most 30 s)
# until its metadata answers. Writes the pid to $OAUTHFLOW_EXCHANGE_HOME/server-PORT.pid, logs to server-PORT.log.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
EXCHANGE_HOME="${OAUTHFLOW_EXCHANGE_HOME:-/tmp/oauthflow-exchange}"
PORT="${OAUTHFLOW_EXCHANGE_PORT:-8957}"
export PYTHONDONTWRITEBYTECODE=1

"$HERE/setup.sh"
PY="$EXCHANGE_HOME/venv/bin/python"
PIDFILE="$EXCHANGE_HOME/server-$PORT.pid"
if [[ -f "$PIDFILE" ]] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null; then
    echo "[oauthflow-exchange start] already running (pid $(cat "$PIDFILE"))" >&2
    exit 0
fi
setsid "$PY" "$HERE/exchserver.py" "$PORT" "$EXCHANGE_HOME/state-$PORT" >"$EXCHANGE_HOME/server-$PORT.log" 2>&1 < /dev/null &
echo $! > "$PIDFILE"
for _ in $(seq 1 120); do
    if "$PY" -c "import urllib.request,sys; urllib.request.urlopen(sys.argv[1], timeout=1)" \
        "http://127.0.0.1:$PORT/.well-known/oauth-authorization-server" 2>/dev/null; then
        echo "[oauthflow-exchange start] ready at http://127.0.0.1:$PORT (pid $(cat "$PIDFILE"))" >&2
        exit 0
    fi
    sleep 0.25
done
echo "[oauthflow-exchange start] ERROR: not ready after 30 s; log:" >&2
tail -n 30 "$EXCHANGE_HOME/server-$PORT.log" >&2 || true
exit 1
