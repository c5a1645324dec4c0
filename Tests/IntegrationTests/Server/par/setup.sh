#!/usr/bin/env bash
# Prepares the loopback glewlwyd server of the PAR / JAR / mutual-TLS integration tests (issue 18
# parts B and C, issue 17's tls_client_auth): glewlwyd 2.7.5 from Debian (`apt-get install
# glewlwyd`), its SQLite database, and a private PKI made with openssl. Idempotent.
#
#   OAUTHFLOW_PAR_HOME    state directory (database, keys, logs, pid); default /tmp/oauthflow-par
#
# Made here (once; a second run returns at once):
#   pki/ca.{key,crt}           the CA glewlwyd trusts for client certificates (secure_connection_ca_file)
#   pki/server.{key,crt}       glewlwyd's TLS certificate for 127.0.0.1, signed by the CA
#   pki/client.{key,crt}       a client certificate (DNS client.oauthflow.test) signed by the CA, RSA 2048:
#                              tls_client_auth; its key also signs request objects and private_key_jwt assertions
#   pki/self.{key,crt}         a self-signed client certificate (CN=oauthflow-self), RSA 2048: self_signed_tls_client_auth
#   pki/other.{key,crt}        another CA-signed client certificate (DNS other.oauthflow.test): the wrong certificate
#   pki/trusted-clients.pem    the CA and self.crt: the listener's secure_connection_ca_file
#   pki/oidc.{key,pub}         the key glewlwyd signs ID and access tokens with (RS256)
#   glewlwyd.db.template       the database made from Debian's init.sqlite3.sql
set -euo pipefail

PAR_HOME="${OAUTHFLOW_PAR_HOME:-/tmp/oauthflow-par}"
STAMP="$PAR_HOME/.setup-stamp"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
log() { echo "[oauthflow-par setup] $*" >&2; }

command -v glewlwyd >/dev/null || { log "ERROR: glewlwyd is not installed; on Debian: apt-get install -y glewlwyd"; exit 1; }
command -v openssl >/dev/null || { log "ERROR: openssl is not installed"; exit 1; }
HASH="$(cat "$HERE/setup.sh" | sha256sum | cut -d' ' -f1)"
if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$HASH" && -f "$PAR_HOME/glewlwyd.db.template" ]]; then
    log "up to date ($PAR_HOME)"
    exit 0
fi
rm -rf "$PAR_HOME/pki"
mkdir -p "$PAR_HOME/pki"
chmod 700 "$PAR_HOME"
PKI="$PAR_HOME/pki"
umask 077

openssl req -x509 -newkey rsa:2048 -nodes -keyout "$PKI/ca.key" -out "$PKI/ca.crt" -days 3650 \
    -subj "/CN=OAuthFlow test CA" -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
issue() {   # name subject extensions
    openssl req -newkey rsa:2048 -nodes -keyout "$PKI/$1.key" -out "$PKI/$1.csr" -subj "$2" 2>/dev/null
    printf '%s\n' "$3" > "$PKI/$1.ext"
    openssl x509 -req -in "$PKI/$1.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -CAcreateserial -days 3650 \
        -extfile "$PKI/$1.ext" -out "$PKI/$1.crt" 2>/dev/null
    rm -f "$PKI/$1.csr" "$PKI/$1.ext"
}
issue server "/CN=127.0.0.1" "subjectAltName=IP:127.0.0.1,DNS:localhost
extendedKeyUsage=serverAuth"
issue client "/O=OAuthFlow/CN=oauthflow-client" "subjectAltName=DNS:client.oauthflow.test
extendedKeyUsage=clientAuth"
issue other "/O=OAuthFlow/CN=oauthflow-other" "subjectAltName=DNS:other.oauthflow.test
extendedKeyUsage=clientAuth"
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$PKI/self.key" -out "$PKI/self.crt" -days 3650 \
    -subj "/CN=oauthflow-self" -addext "extendedKeyUsage=clientAuth" 2>/dev/null
openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$PKI/oidc.key" 2>/dev/null
openssl pkey -in "$PKI/oidc.key" -pubout -out "$PKI/oidc.pub"
# What glewlwyd's TLS listener accepts client certificates from: the CA, and the self-signed
# certificate itself (GnuTLS drops a certificate it cannot verify before glewlwyd sees it, so a
# self-signed one must be trusted directly; glewlwyd then matches it against the client's JWKS).
cat "$PKI/ca.crt" "$PKI/self.crt" > "$PKI/trusted-clients.pem"
chmod 600 "$PKI"/*.key

rm -f "$PAR_HOME/glewlwyd.db.template"
zcat /usr/share/doc/glewlwyd/database/init.sqlite3.sql.gz \
    | python3 -c 'import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.executescript(sys.stdin.read()); c.commit()' \
        "$PAR_HOME/glewlwyd.db.template"
echo "$HASH" > "$STAMP"
log "done ($PAR_HOME)"
