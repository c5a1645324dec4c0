#!/usr/bin/env bash
# Stops the server started by start.sh: signals only the pid in $OAUTHFLOW_IT_HOME/server.pid
# (and its process group, which start.sh created with setsid). Waits at most ~10 s.
set -euo pipefail

IT_HOME="${OAUTHFLOW_IT_HOME:-/tmp/oauthflow-it}"
PIDFILE="$IT_HOME/server.pid"

log() { echo "[oauthflow-it stop] $*" >&2; }

if [[ ! -f "$PIDFILE" ]]; then
    log "not running (no $PIDFILE)"
    exit 0
fi
PID="$(cat "$PIDFILE")"
if ! [[ "$PID" =~ ^[0-9]+$ ]] || ! kill -0 "$PID" 2>/dev/null; then
    log "not running (stale pid file)"
    rm -f "$PIDFILE"
    exit 0
fi

# Signal the whole group only if this pid leads its own process group (as start.sh arranges).
# (Read from /proc instead of ps: procps is not in every minimal image.)
PGID=""
if STAT="$(cat "/proc/$PID/stat" 2>/dev/null)"; then
    read -r _state _ppid PGID _rest <<< "${STAT##*) }"
fi
send() {
    if [[ "$PGID" == "$PID" ]]; then
        kill "-$1" -- "-$PID" 2>/dev/null || true
    else
        kill "-$1" "$PID" 2>/dev/null || true
    fi
}

group_alive() {
    if [[ "$PGID" == "$PID" ]]; then
        kill -0 -- "-$PID" 2>/dev/null
    else
        kill -0 "$PID" 2>/dev/null
    fi
}

send TERM
for _ in $(seq 1 40); do   # up to 8 s
    group_alive || break
    sleep 0.2
done
if group_alive; then
    log "still alive after SIGTERM; sending SIGKILL"
    send KILL
    for _ in $(seq 1 10); do
        group_alive || break
        sleep 0.2
    done
fi
rm -f "$PIDFILE"
log "stopped (pid $PID)"
