#!/usr/bin/env bash
# Starts the glewlwyd of the CIBA and dynamic registration tests on https://127.0.0.1:$OAUTHFLOW_CIBA_PORT
# (default 8940): par/start.sh (the same configuration file, TLS listener and database template, made by
# par/setup.sh) with its own home $OAUTHFLOW_CIBA_HOME (default /tmp/oauthflow-ciba), so that it never
# shares a PKI or a pid file with the PAR server, and provisioned by ciba/provision.py (README.md).
# Writes the pid to $OAUTHFLOW_CIBA_HOME/server-PORT.pid.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export OAUTHFLOW_PAR_HOME="${OAUTHFLOW_CIBA_HOME:-/tmp/oauthflow-ciba}"
export OAUTHFLOW_PAR_PORT="${OAUTHFLOW_CIBA_PORT:-8940}"
export OAUTHFLOW_PAR_PROVISION="$HERE/provision.py"
export OAUTHFLOW_PAR_TAG=ciba
export OAUTHFLOW_PAR_LOG_LEVEL="${OAUTHFLOW_CIBA_LOG_LEVEL:-INFO}"
exec bash "$HERE/../par/start.sh"
