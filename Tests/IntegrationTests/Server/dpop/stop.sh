#!/usr/bin/env bash
# Stops the server start.sh started on $OAUTHFLOW_DPOP_PORT (by the pid it wrote) and removes its log.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$HERE/../lib.sh"
DPOP_HOME="${OAUTHFLOW_DPOP_HOME:-/tmp/oauthflow-dpop}"
PORT="${OAUTHFLOW_DPOP_PORT:-8940}"
loopback_stop "$DPOP_HOME" "$PORT" "$DPOP_HOME/op-$PORT"
