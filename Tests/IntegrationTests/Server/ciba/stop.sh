#!/usr/bin/env bash
# Stops the glewlwyd start.sh started on $OAUTHFLOW_CIBA_PORT (par/stop.sh with this server's home).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export OAUTHFLOW_PAR_HOME="${OAUTHFLOW_CIBA_HOME:-/tmp/oauthflow-ciba}"
export OAUTHFLOW_PAR_PORT="${OAUTHFLOW_CIBA_PORT:-8940}"
exec bash "$HERE/../par/stop.sh"
