#!/usr/bin/env bash
# Stops the glewlwyd start.sh started on $OAUTHFLOW_PAR_PORT (by the pid it wrote) and removes its
# database copy and log.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$HERE/../lib.sh"
PAR_HOME="${OAUTHFLOW_PAR_HOME:-/tmp/oauthflow-par}"
PORT="${OAUTHFLOW_PAR_PORT:-8930}"
loopback_kill "$PAR_HOME" "$PORT"
for _ in $(seq 1 40); do kill -0 "$LOOPBACK_PID" 2>/dev/null || break; sleep 0.25; done
# The log of the last run stays for diagnosis (last-server.log).
mv -f "$PAR_HOME/server-$PORT.log" "$PAR_HOME/last-server.log" 2>/dev/null || true
rm -rf "$PAR_HOME/server-$PORT.pid" "$PAR_HOME/run-$PORT"
