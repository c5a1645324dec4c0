# Shared by the scripts of the per-feature loopback servers (credentials/, exchange/, dpop/, and the
# pid handling of par/): sourced, never run. The caller sets `set -euo pipefail` and HERE (its own
# directory), then calls the functions below with its own tag (the log prefix after "oauthflow-"),
# state directory and port. Functions that end the script do so with `exit`, as the scripts did.

LOOPBACK_LIB="${BASH_SOURCE[0]}"

# loopback_setup TAG HOME
# A venv at HOME/venv (made with $OAUTHFLOW_IT_PYTHON, default python3) with HERE/requirements.txt
# installed. Idempotent: a stamp (the hash of setup.sh, this file and requirements.txt) makes a
# second run with unchanged requirements return at once.
loopback_setup() {
    local tag="$1" home="$2"
    local python="${OAUTHFLOW_IT_PYTHON:-python3}" venv="$2/venv" stamp="$2/.setup-stamp" hash
    export PYTHONDONTWRITEBYTECODE=1
    log() { echo "[oauthflow-$tag setup] $*" >&2; }

    hash="$(cat "$HERE/setup.sh" "$LOOPBACK_LIB" "$HERE/requirements.txt" | sha256sum | cut -d' ' -f1)"
    if [[ -f "$stamp" && "$(cat "$stamp")" == "$hash" && -x "$venv/bin/python" ]]; then
        log "up to date ($home)"
        exit 0
    fi
    mkdir -p "$home"
    chmod 700 "$home"
    if [[ ! -x "$venv/bin/python" ]]; then
        log "creating venv at $venv"
        "$python" -m venv "$venv" || { log "ERROR: '$python -m venv' failed; on Debian: apt-get install -y python3-venv"; exit 1; }
    fi
    log "installing pinned packages"
    "$venv/bin/python" -m pip install --disable-pip-version-check --quiet -r "$HERE/requirements.txt"
    echo "$hash" > "$stamp"
    log "done ($home)"
}

# loopback_begin TAG HOME PORT
# Sets LOOPBACK_TAG, LOOPBACK_HOME, LOOPBACK_PORT, LOOPBACK_PIDFILE (HOME/server-PORT.pid) and
# LOOPBACK_LOG (HOME/server-PORT.log) for the functions below.
loopback_begin() {
    LOOPBACK_TAG="$1" LOOPBACK_HOME="$2" LOOPBACK_PORT="$3"
    LOOPBACK_PIDFILE="$2/server-$3.pid"
    LOOPBACK_LOG="$2/server-$3.log"
}

# loopback_exit_if_running: ends the script (status 0) when the pid in the pid file is alive.
loopback_exit_if_running() {
    if [[ -f "$LOOPBACK_PIDFILE" ]] && kill -0 "$(cat "$LOOPBACK_PIDFILE")" 2>/dev/null; then
        echo "[oauthflow-$LOOPBACK_TAG start] already running (pid $(cat "$LOOPBACK_PIDFILE"))" >&2
        exit 0
    fi
}

# loopback_launch COMMAND...: runs COMMAND in its own session (so stop can signal its process group),
# output to the log, and writes its pid to the pid file.
loopback_launch() {
    setsid "$@" >"$LOOPBACK_LOG" 2>&1 < /dev/null &
    echo $! > "$LOOPBACK_PIDFILE"
}

# loopback_ready URL: says the server is ready at URL and ends the script (status 0).
loopback_ready() {
    echo "[oauthflow-$LOOPBACK_TAG start] ready at $1 (pid $(cat "$LOOPBACK_PIDFILE"))" >&2
    exit 0
}

# loopback_fail WHAT: says what failed, prints the last 30 lines of the log and ends the script (status 1).
loopback_fail() {
    echo "[oauthflow-$LOOPBACK_TAG start] ERROR: $1; log:" >&2
    tail -n 30 "$LOOPBACK_LOG" >&2 || true
    exit 1
}

# loopback_start_python TAG HOME PORT READY_PATH SCRIPT [ARG...]
# Runs HERE/setup.sh, then (unless already running) `venv/bin/python HERE/SCRIPT PORT ARG...` on
# 127.0.0.1:PORT, and waits at most 30 s (120 polls, 0.25 s apart) until http://127.0.0.1:PORT/READY_PATH answers.
loopback_start_python() {
    local tag="$1" home="$2" port="$3" ready="$4" script="$5"
    shift 5
    export PYTHONDONTWRITEBYTECODE=1
    "$HERE/setup.sh"
    local py="$home/venv/bin/python"
    loopback_begin "$tag" "$home" "$port"
    loopback_exit_if_running
    loopback_launch "$py" "$HERE/$script" "$port" "$@"
    for _ in $(seq 1 120); do
        if "$py" -c "import urllib.request,sys; urllib.request.urlopen(sys.argv[1], timeout=1)" \
            "http://127.0.0.1:$port/$ready" 2>/dev/null; then
            loopback_ready "http://127.0.0.1:$port"
        fi
        sleep 0.25
    done
    loopback_fail "not ready after 30 s"
}

# loopback_kill HOME PORT
# Signals the process group of the pid in HOME/server-PORT.pid (or that pid alone) if it is alive;
# ends the script (status 0) when there is no pid file. Sets LOOPBACK_PID.
loopback_kill() {
    local pidfile="$1/server-$2.pid"
    [[ -f "$pidfile" ]] || exit 0
    LOOPBACK_PID="$(cat "$pidfile")"
    if [[ "$LOOPBACK_PID" =~ ^[0-9]+$ ]] && kill -0 "$LOOPBACK_PID" 2>/dev/null; then
        kill -- "-$LOOPBACK_PID" 2>/dev/null || kill "$LOOPBACK_PID"
    fi
}

# loopback_stop HOME PORT [PATH...]
# loopback_kill, then removes the pid file, the log and each PATH (this run's state).
loopback_stop() {
    local home="$1" port="$2"
    shift 2
    loopback_kill "$home" "$port"
    rm -rf "$home/server-$port.pid" "$home/server-$port.log" "$@"
}
