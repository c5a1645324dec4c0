#!/usr/bin/env bash
# Stops the server start.sh started on $OAUTHFLOW_AUTHGENT_PORT (by the pid it wrote) and removes its
# log and database.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$HERE/../lib.sh"
AUTHGENT_HOME="${OAUTHFLOW_AUTHGENT_HOME:-/tmp/oauthflow-authgent}"
PORT="${OAUTHFLOW_AUTHGENT_PORT:-8940}"
loopback_stop "$AUTHGENT_HOME" "$PORT" "$AUTHGENT_HOME/authgent-$PORT.db"
