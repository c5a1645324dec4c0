#!/usr/bin/env bash
# Stops the server start.sh started on $OAUTHFLOW_CREDS_PORT (by the pid it wrote) and removes its log.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$HERE/../lib.sh"
CREDS_HOME="${OAUTHFLOW_CREDS_HOME:-/tmp/oauthflow-creds}"
PORT="${OAUTHFLOW_CREDS_PORT:-8920}"
loopback_stop "$CREDS_HOME" "$PORT"
