#!/usr/bin/env bash
# Starts exchserver.py on 127.0.0.1:$OAUTHFLOW_EXCHANGE_PORT (default 8957) and waits (at most 30 s)
# until its metadata answers. Writes the pid to $OAUTHFLOW_EXCHANGE_HOME/server-PORT.pid, logs to server-PORT.log.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$HERE/../lib.sh"
EXCHANGE_HOME="${OAUTHFLOW_EXCHANGE_HOME:-/tmp/oauthflow-exchange}"
PORT="${OAUTHFLOW_EXCHANGE_PORT:-8957}"
loopback_start_python exchange "$EXCHANGE_HOME" "$PORT" .well-known/oauth-authorization-server exchserver.py "$EXCHANGE_HOME/state-$PORT"
