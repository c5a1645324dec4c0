#!/usr/bin/env bash
# Prepares the loopback DPoP server (idpyoidc; dpopserver.py). Idempotent.
#
#   OAUTHFLOW_DPOP_HOME    state directory (venv, log, pid); default /tmp/oauthflow-dpop
#   OAUTHFLOW_IT_PYTHON     interpreter used to create the venv; default python3
#
# A second run with unchanged requirements returns at once (stamp file).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$HERE/../lib.sh"
loopback_setup dpop "${OAUTHFLOW_DPOP_HOME:-/tmp/oauthflow-dpop}"
