#!/usr/bin/env bash
# Prepares the loopback registration server (Authlib in Flask; regserver.py). Idempotent.
#
#   OAUTHFLOW_REG_HOME     state directory (venv, log, pid); default /tmp/oauthflow-reg
#   OAUTHFLOW_IT_PYTHON    interpreter used to create the venv; default python3
#
# A second run with unchanged requirements returns at once (stamp file).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$HERE/../lib.sh"
loopback_setup reg "${OAUTHFLOW_REG_HOME:-/tmp/oauthflow-reg}"
