#!/usr/bin/env bash
# Prepares the loopback client-credentials server (Authlib in Flask; credserver.py). Idempotent.
#
#   OAUTHFLOW_CREDS_HOME    state directory (venv, log, pid); default /tmp/oauthflow-creds
#   OAUTHFLOW_IT_PYTHON     interpreter used to create the venv; default python3
#
# A second run with unchanged requirements returns at once (stamp file).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$HERE/../lib.sh"
loopback_setup creds "${OAUTHFLOW_CREDS_HOME:-/tmp/oauthflow-creds}"
