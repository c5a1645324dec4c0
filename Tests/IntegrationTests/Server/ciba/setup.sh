#!/usr/bin/env bash
# Prepares the glewlwyd of the CIBA and dynamic registration tests: par/setup.sh (its PKI and database
# template) in this server's home $OAUTHFLOW_CIBA_HOME (default /tmp/oauthflow-ciba). Idempotent.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export OAUTHFLOW_PAR_HOME="${OAUTHFLOW_CIBA_HOME:-/tmp/oauthflow-ciba}"
exec bash "$HERE/../par/setup.sh"
