#!/usr/bin/env bash
# Prepares the loopback token-exchange server (idpyoidc; exchserver.py). Idempotent.
#
#   OAUTHFLOW_EXCHANGE_HOME    state directory (venv, log, pid); default /tmp/oauthflow-exchange
#   OAUTHFLOW_IT_PYTHON     interpreter used to create the venv; default python3
#
# A second run with unchanged requirements returns at once (stamp file).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$HERE/../lib.sh"
loopback_setup exchange "${OAUTHFLOW_EXCHANGE_HOME:-/tmp/oauthflow-exchange}"
