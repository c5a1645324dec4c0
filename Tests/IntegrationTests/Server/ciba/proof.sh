#!/usr/bin/env bash
# The end-to-end proof of the CIBA and dynamic registration servers: starts glewlwyd (ciba/start.sh)
# and the Authlib registration server (registration/start.sh) on free loopback ports, runs
# ciba/proof.py and registration/proof.py against them, stops both (also on failure or Ctrl-C).
# Exit status 0 when every check passed. Needs what .ci/run installs (glewlwyd, openssl, python3-venv).
#
#   OAUTHFLOW_CIBA_HOME, OAUTHFLOW_REG_HOME    the servers' homes (defaults /tmp/oauthflow-ciba, /tmp/oauthflow-reg)
set -uo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export PYTHONDONTWRITEBYTECODE=1
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'; }
export OAUTHFLOW_CIBA_HOME="${OAUTHFLOW_CIBA_HOME:-/tmp/oauthflow-ciba}" OAUTHFLOW_REG_HOME="${OAUTHFLOW_REG_HOME:-/tmp/oauthflow-reg}"
export OAUTHFLOW_CIBA_PORT="$(free_port)" OAUTHFLOW_REG_PORT="$(free_port)"
stop() {
    bash "$HERE/stop.sh" || true
    bash "$HERE/../registration/stop.sh" || true
}
trap stop EXIT
trap 'exit 130' INT TERM

started=$SECONDS
bash "$HERE/start.sh" || exit 1
bash "$HERE/../registration/start.sh" || exit 1
echo "# servers ready after $((SECONDS - started)) s: glewlwyd https://127.0.0.1:$OAUTHFLOW_CIBA_PORT, Authlib http://127.0.0.1:$OAUTHFLOW_REG_PORT"

status=0
started=$SECONDS
echo "# glewlwyd $(dpkg-query -W -f='${Version}' glewlwyd 2>/dev/null): CIBA and registration"
python3 "$HERE/proof.py" "$OAUTHFLOW_CIBA_PORT" "$OAUTHFLOW_CIBA_HOME" || status=1
echo "# glewlwyd proof took $((SECONDS - started)) s"
started=$SECONDS
echo
echo "# Authlib $("$OAUTHFLOW_REG_HOME/venv/bin/python" -c 'import authlib; print(authlib.__version__)'): registration"
python3 "$HERE/../registration/proof.py" "$OAUTHFLOW_REG_PORT" || status=1
echo "# Authlib proof took $((SECONDS - started)) s"
exit $status
