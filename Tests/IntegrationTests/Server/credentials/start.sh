#!/usr/bin/env bash
# Starts credserver.py on 127.0.0.1:$OAUTHFLOW_CREDS_PORT (default 8920) and waits (at most 30 s)
# until its metadata answers. Writes the pid to $OAUTHFLOW_CREDS_HOME/server-PORT.pid, logs to server-PORT.log.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CREDS_HOME="${OAUTHFLOW_CREDS_HOME:-/tmp/oauthflow-creds}"
PORT="${OAUTHFLOW_CREDS_PORT:-8920}"
export PYTHONDONTWRITEBYTECODE=1

"$HERE/setup.sh"
PY="$CREDS_HOME/venv/bin/python"
PIDFILE="$CREDS_HOME/server-$PORT.pid"
if [[ -f "$PIDFILE" ]] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null; then
    echo "[oauthflow-creds start] already running (pid $(cat "$PIDFILE"))" >&2
    exit 0
fi
setsid "$PY" "$HERE/credserver.py" "$PORT" >"$CREDS_HOME/server-$PORT.log" 2>&1 < /dev/null &
echo $! > "$PIDFILE"
for _ in $(seq 1 120); do
    if "$PY" -c "import urllib.request,sys; urllib.request.urlopen(sys.argv[1], timeout=1)" \
        "http://127.0.0.1:$PORT/.well-known/oauth-authorization-server" 2>/dev/null; then
        echo "[oauthflow-creds start] ready at http://127.0.0.1:$PORT (pid $(cat "$PIDFILE"))" >&2
        exit 0
    fi
    sleep 0.25
done
echo "[oauthflow-creds start] ERROR: not ready after 30 s; log:" >&2
tail -n 30 "$CREDS_HOME/server-$PORT.log" >&2 || true
exit 1
