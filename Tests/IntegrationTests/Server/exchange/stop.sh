#!/usr/bin/env bash
# Stops the server start.sh started on $OAUTHFLOW_EXCHANGE_PORT (by the pid it wrote) and removes its log.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$HERE/../lib.sh"
EXCHANGE_HOME="${OAUTHFLOW_EXCHANGE_HOME:-/tmp/oauthflow-exchange}"
PORT="${OAUTHFLOW_EXCHANGE_PORT:-8957}"
loopback_stop "$EXCHANGE_HOME" "$PORT" "$EXCHANGE_HOME/state-$PORT"
