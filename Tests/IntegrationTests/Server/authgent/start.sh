#!/usr/bin/env bash
# Starts agserver.py (authgent-server) on 127.0.0.1:$OAUTHFLOW_AUTHGENT_PORT (default 8940), its
# SQLite database in $OAUTHFLOW_AUTHGENT_HOME, and waits (at most 30 s) until its metadata answers.
# OAUTHFLOW_AUTHGENT_REQUIRE_DPOP=false starts it without required proofs and nonces (default true).
# Writes the pid to $OAUTHFLOW_AUTHGENT_HOME/server-PORT.pid, logs to server-PORT.log.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$HERE/../lib.sh"
AUTHGENT_HOME="${OAUTHFLOW_AUTHGENT_HOME:-/tmp/oauthflow-authgent}"
PORT="${OAUTHFLOW_AUTHGENT_PORT:-8940}"
rm -f "$AUTHGENT_HOME/authgent-$PORT.db"
loopback_start_python authgent "$AUTHGENT_HOME" "$PORT" .well-known/oauth-authorization-server agserver.py "$AUTHGENT_HOME"
