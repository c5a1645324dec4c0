#!/usr/bin/env bash
# Starts the loopback OAuth 2.0 / OIDC test server on 127.0.0.1:$OAUTHFLOW_IT_PORT (default 8910)
# and waits (at most 60 s) until its OIDC discovery document answers.
#
#   OAUTHFLOW_IT_HOME  state directory; default /tmp/oauthflow-it
#   OAUTHFLOW_IT_PORT  port; default 8910
#
# Writes the server pid (also its process-group id) to $OAUTHFLOW_IT_HOME/server.pid and
# logs to $OAUTHFLOW_IT_HOME/server.log. Exits 0 if an already running instance answers.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
IT_HOME="${OAUTHFLOW_IT_HOME:-/tmp/oauthflow-it}"
PORT="${OAUTHFLOW_IT_PORT:-8910}"
PIDFILE="$IT_HOME/server.pid"
LOGFILE="$IT_HOME/server.log"
DISCOVERY="http://127.0.0.1:$PORT/o/.well-known/openid-configuration"
WAIT_SECONDS=60

export OAUTHFLOW_IT_HOME="$IT_HOME" OAUTHFLOW_IT_PORT="$PORT"
# Keep the repository free of __pycache__ folders.
export PYTHONDONTWRITEBYTECODE=1

log() { echo "[oauthflow-it start] $*" >&2; }

"$HERE/setup.sh"

PY="$IT_HOME/venv/bin/python"

# Succeeds if the discovery document is served with the expected issuer and, when an
# instance id is given, the answering server is the instance started with that id.
probe() {
    "$PY" - "$DISCOVERY" "http://127.0.0.1:$PORT/o" "http://127.0.0.1:$PORT/it/instance" "${1:-}" <<'PY' 2>/dev/null
import json, sys, urllib.request
discovery, issuer, instance_url, instance = sys.argv[1:5]
with urllib.request.urlopen(discovery, timeout=2) as r:
    if json.load(r)["issuer"] != issuer:
        sys.exit(1)
if instance:
    with urllib.request.urlopen(instance_url, timeout=2) as r:
        sys.exit(0 if r.read().decode().strip() == instance else 1)
PY
}

# Succeeds if nothing listens on 127.0.0.1:$PORT.
port_free() {
    "$PY" - "$PORT" <<'PY'
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
# Like the server itself: a port in TIME_WAIT is free, an active listener is not.
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
try:
    s.bind(("127.0.0.1", int(sys.argv[1])))
except OSError:
    sys.exit(1)
finally:
    s.close()
PY
}

if [[ -f "$PIDFILE" ]]; then
    OLD_PID="$(cat "$PIDFILE")"
    if [[ "$OLD_PID" =~ ^[0-9]+$ ]] && kill -0 "$OLD_PID" 2>/dev/null; then
        if probe; then
            log "already running (pid $OLD_PID) at http://127.0.0.1:$PORT"
            exit 0
        fi
        log "ERROR: pid $OLD_PID from $PIDFILE is alive but $DISCOVERY does not answer; run stop.sh first"
        exit 1
    fi
    rm -f "$PIDFILE"
fi

if ! port_free; then
    log "ERROR: 127.0.0.1:$PORT is already in use by another process (not the pid in $PIDFILE)"
    exit 1
fi

cd "$HERE"
: > "$LOGFILE"
INSTANCE="$("$PY" -c 'import secrets; print(secrets.token_hex(8))')"
export OAUTHFLOW_IT_INSTANCE="$INSTANCE"
# setsid: the server gets its own session/process group (pgid == pid), so stop.sh can
# signal the gunicorn master and its worker together. The background child of this
# non-interactive shell is not a group leader, so setsid execs in place and $! is the
# gunicorn master pid.
setsid "$IT_HOME/venv/bin/gunicorn" \
    --bind "127.0.0.1:$PORT" \
    --workers 1 --worker-class gthread --threads 8 \
    --timeout 60 --graceful-timeout 3 \
    --access-logfile - --error-logfile - \
    --chdir "$HERE" \
    itserver.wsgi:application \
    >>"$LOGFILE" 2>&1 < /dev/null &
PID=$!
echo "$PID" > "$PIDFILE"

deadline=$((SECONDS + WAIT_SECONDS))
while (( SECONDS < deadline )); do
    if ! kill -0 "$PID" 2>/dev/null; then
        log "ERROR: server exited during startup. Last log lines ($LOGFILE):"
        tail -n 40 "$LOGFILE" >&2 || true
        rm -f "$PIDFILE"
        exit 1
    fi
    if probe "$INSTANCE"; then
        log "ready at http://127.0.0.1:$PORT (pid $PID, issuer http://127.0.0.1:$PORT/o)"
        exit 0
    fi
    sleep 0.25
done

log "ERROR: server not ready after ${WAIT_SECONDS}s. Last log lines ($LOGFILE):"
tail -n 40 "$LOGFILE" >&2 || true
"$HERE/stop.sh" || true
exit 1
