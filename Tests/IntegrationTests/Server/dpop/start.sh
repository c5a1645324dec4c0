#!/usr/bin/env bash
# Starts dpopserver.py on 127.0.0.1:$OAUTHFLOW_DPOP_PORT (default 8940) and waits (at most 30 s)
# until its metadata answers. Writes the pid to $OAUTHFLOW_DPOP_HOME/server-PORT.pid, logs to server-PORT.log.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
DPOP_HOME="${OAUTHFLOW_DPOP_HOME:-/tmp/oauthflow-dpop}"
PORT="${OAUTHFLOW_DPOP_PORT:-8940}"
export PYTHONDONTWRITEBYTECODE=1
export OAUTHFLOW_DPOP_HOME="$DPOP_HOME"

"$HERE/setup.sh"
PY="$DPOP_HOME/venv/bin/python"
PIDFILE="$DPOP_HOME/server-$PORT.pid"
if [[ -f "$PIDFILE" ]] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null; then
    echo "[oauthflow-dpop start] already running (pid $(cat "$PIDFILE"))" >&2
    exit 0
fi
setsid "$PY" "$HERE/dpopserver.py" "$PORT" >"$DPOP_HOME/server-$PORT.log" 2>&1 < /dev/null &
echo $! > "$PIDFILE"
for _ in $(seq 1 120); do
    if "$PY" -c "import urllib.request,sys; urllib.request.urlopen(sys.argv[1], timeout=1)" \
        "http://127.0.0.1:$PORT/.well-known/openid-configuration" 2>/dev/null; then
        echo "[oauthflow-dpop start] ready at http://127.0.0.1:$PORT (pid $(cat "$PIDFILE"))" >&2
        exit 0
    fi
    sleep 0.25
done
echo "[oauthflow-dpop start] ERROR: not ready after 30 s; log:" >&2
tail -n 30 "$DPOP_HOME/server-$PORT.log" >&2 || true
exit 1
