#!/usr/bin/env bash
# Starts regserver.py on 127.0.0.1:$OAUTHFLOW_REG_PORT (default 8950) and waits (at most 30 s)
# until its metadata answers. Writes the pid to $OAUTHFLOW_REG_HOME/server-PORT.pid, logs to server-PORT.log.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$HERE/../lib.sh"
REG_HOME="${OAUTHFLOW_REG_HOME:-/tmp/oauthflow-reg}"
PORT="${OAUTHFLOW_REG_PORT:-8950}"
loopback_start_python reg "$REG_HOME" "$PORT" .well-known/oauth-authorization-server regserver.py
