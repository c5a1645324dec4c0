#!/usr/bin/env bash
# Starts credserver.py on 127.0.0.1:$OAUTHFLOW_CREDS_PORT (default 8920) and waits (at most 30 s)
# until its metadata answers. Writes the pid to $OAUTHFLOW_CREDS_HOME/server-PORT.pid, logs to server-PORT.log.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$HERE/../lib.sh"
CREDS_HOME="${OAUTHFLOW_CREDS_HOME:-/tmp/oauthflow-creds}"
PORT="${OAUTHFLOW_CREDS_PORT:-8920}"
loopback_start_python creds "$CREDS_HOME" "$PORT" .well-known/oauth-authorization-server credserver.py
