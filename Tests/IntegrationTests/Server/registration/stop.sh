#!/usr/bin/env bash
# Stops the server start.sh started on $OAUTHFLOW_REG_PORT (by the pid it wrote) and removes its log.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$HERE/../lib.sh"
REG_HOME="${OAUTHFLOW_REG_HOME:-/tmp/oauthflow-reg}"
PORT="${OAUTHFLOW_REG_PORT:-8950}"
loopback_stop "$REG_HOME" "$PORT"
