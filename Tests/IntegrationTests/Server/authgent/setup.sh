#!/usr/bin/env bash
# Prepares the loopback authgent-server (agserver.py): DPoP with the JWT-bearer grant and token
# exchange. Idempotent.
#
#   OAUTHFLOW_AUTHGENT_HOME   state directory (venv, database, log, pid); default /tmp/oauthflow-authgent
#   OAUTHFLOW_IT_PYTHON       interpreter used to create the venv; default python3 (3.11 or newer)
#
# A second run with unchanged requirements returns at once (stamp file).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$HERE/../lib.sh"
loopback_setup authgent "${OAUTHFLOW_AUTHGENT_HOME:-/tmp/oauthflow-authgent}"
