#!/usr/bin/env bash
# Starts dpopserver.py on 127.0.0.1:$OAUTHFLOW_DPOP_PORT (default 8940) and waits (at most 30 s)
# until its metadata answers. Writes the pid to $OAUTHFLOW_DPOP_HOME/server-PORT.pid, logs to server-PORT.log.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$HERE/../lib.sh"
DPOP_HOME="${OAUTHFLOW_DPOP_HOME:-/tmp/oauthflow-dpop}"
PORT="${OAUTHFLOW_DPOP_PORT:-8940}"
export OAUTHFLOW_DPOP_HOME="$DPOP_HOME"
loopback_start_python dpop "$DPOP_HOME" "$PORT" .well-known/openid-configuration dpopserver.py
