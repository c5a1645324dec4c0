#!/usr/bin/env bash
# Starts glewlwyd (Debian's package) on https://127.0.0.1:$OAUTHFLOW_PAR_PORT (default 8930) with
# its own copy of the database, waits (at most 30 s) until it answers, then provisions it through
# its admin API (provision.py): the OpenID Connect plugin (PAR, request objects, mutual TLS from
# the TLS session), a user and the test clients. Writes the pid to $OAUTHFLOW_PAR_HOME/server-PORT.pid.
#
# Another glewlwyd server of the tests (ciba/) runs this script with its own home and
#   OAUTHFLOW_PAR_PROVISION   the provisioning script run as `python3 SCRIPT PORT HOME`; default par/provision.py
#   OAUTHFLOW_PAR_TAG         the log prefix after "oauthflow-"; default par
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$HERE/../lib.sh"
PAR_HOME="${OAUTHFLOW_PAR_HOME:-/tmp/oauthflow-par}"
PORT="${OAUTHFLOW_PAR_PORT:-8930}"
PROVISION="${OAUTHFLOW_PAR_PROVISION:-$HERE/provision.py}"

"$HERE/setup.sh"
RUN="$PAR_HOME/run-$PORT"
loopback_begin "${OAUTHFLOW_PAR_TAG:-par}" "$PAR_HOME" "$PORT"
loopback_exit_if_running
rm -rf "$RUN"
mkdir -p "$RUN"
cp "$PAR_HOME/glewlwyd.db.template" "$RUN/glewlwyd.db"
PKI="$PAR_HOME/pki"
cat > "$RUN/glewlwyd.conf" <<CONF
port=$PORT
bind_address="127.0.0.1"
external_url="https://127.0.0.1:$PORT"
login_url="login.html"
api_prefix="api"
static_files_path="/usr/share/glewlwyd/webapp/"
allow_origin="*"
log_mode="console"
log_level="${OAUTHFLOW_PAR_LOG_LEVEL:-INFO}"
cookie_domain=""
cookie_secure=0
cookie_same_site="empty"
session_expiration=2419200
session_key="GLEWLWYD2_SESSION_ID"
admin_session_authentication="cookie"
profile_session_authentication="cookie"
allow_multiple_user_per_session=true
login_api_enabled=true
max_post_size=16778240
admin_scope="g_admin"
profile_scope="g_profile"
user_module_path="/usr/lib/glewlwyd/user"
user_middleware_module_path="/usr/lib/glewlwyd/user_middleware"
client_module_path="/usr/lib/glewlwyd/client"
user_auth_scheme_module_path="/usr/lib/glewlwyd/scheme"
plugin_module_path="/usr/lib/glewlwyd/plugin"
use_secure_connection=true
secure_connection_key_file="$PKI/server.key"
secure_connection_pem_file="$PKI/server.crt"
secure_connection_ca_file="$PKI/trusted-clients.pem"
hash_algorithm="SHA512"
database =
{
  type = "sqlite3"
  path = "$RUN/glewlwyd.db"
};
CONF
loopback_launch glewlwyd --config-file="$RUN/glewlwyd.conf"
for _ in $(seq 1 120); do
    # Any HTTP answer means it listens (this one is a 401 without a session).
    if python3 -c 'import ssl,sys,urllib.error,urllib.request
try: urllib.request.urlopen(sys.argv[1], timeout=2, context=ssl.create_default_context(cafile=sys.argv[2]))
except urllib.error.HTTPError: pass' \
        "https://127.0.0.1:$PORT/api/profile/scheme/" "$PKI/ca.crt" 2>/dev/null; then
        python3 "$PROVISION" "$PORT" "$PAR_HOME" || loopback_fail "provisioning failed"
        loopback_ready "https://127.0.0.1:$PORT"
    fi
    if ! kill -0 "$(cat "$LOOPBACK_PIDFILE")" 2>/dev/null; then break; fi
    sleep 0.25
done
loopback_fail "not ready after 30 s"
