"""Provisions a fresh glewlwyd (Debian's 2.7.5) through its admin API for the PAR / JAR /
mutual-TLS integration tests. Python's standard library only.

Usage: provision.py PORT PAR_HOME. Logs in as the package's default administrator
(admin/password, from Debian's init.sqlite3.sql), then creates:

- the OpenID Connect plugin instance ``oidc`` (issuer https://127.0.0.1:PORT/api/oidc): RS256
  tokens (JWT access tokens), PKCE, pushed authorization requests (not required), request objects
  verified with the client's ``pubkey``, mutual TLS read from the TLS session (self-signed
  certificates allowed), introspection;
- the user ``alice`` (password ``alice-password``) with scope ``openid``, who has granted
  ``openid`` to every client below;
- the clients (redirect URI https://client.oauthflow.test/callback):
  ``par-secret`` client_secret_basic; ``par-jwt`` private_key_jwt with pki/client.key;
  ``mtls-ca`` tls_client_auth (the DNS name in pki/client.crt: Debian's client database module
  does not store ``tls_client_auth_subject_dn``); ``mtls-self``
  self_signed_tls_client_auth (pki/self.crt in its JWKS). Every one may also sign request
  objects with its key (``pubkey``).

and for DPoP (RFC 9449), two more instances of the plugin with the same settings plus DPoP and the
device grant (interval 1 s), whose clients are their own (glewlwyd keeps one DPoP nonce per
client_id, across plugin instances):

- ``dpop`` (issuer https://127.0.0.1:PORT/api/dpop): DPoP without server nonces; clients
  ``dpop-secret`` (client_secret_basic) and ``dpop-jwt`` (private_key_jwt with pki/client.key);
- ``dpopn`` (issuer https://127.0.0.1:PORT/api/dpopn): DPoP nonces required
  (``oauth-dpop-nonce-mandatory``; the nonce changes after every second request that proves one,
  ``oauth-dpop-nonce-counter`` 1); clients ``nonce-code``, ``nonce-device`` and ``nonce-par``,
  client_secret_basic.
"""

import base64
import json
import ssl
import subprocess
import sys
import urllib.error
import urllib.request

PORT = int(sys.argv[1])
HOME = sys.argv[2]
PKI = f"{HOME}/pki"
BASE = f"https://127.0.0.1:{PORT}/api"
ISSUER = f"{BASE}/oidc"
REDIRECT = "https://client.oauthflow.test/callback"
CONTEXT = ssl.create_default_context(cafile=f"{PKI}/ca.crt")


def read(name):
    with open(f"{PKI}/{name}") as handle:
        return handle.read()


def public_pem(key):
    return subprocess.run(["openssl", "pkey", "-in", f"{PKI}/{key}", "-pubout"], check=True, capture_output=True, text=True).stdout


class Session:
    """A login session: glewlwyd answers ``Set-Cookie: ...; Domain=;`` (no cookie_domain set), which
    http.cookiejar refuses, so the session cookie is carried by hand."""

    def __init__(self):
        self.cookie = None

    def call(self, method, path, body):
        headers = {"Content-Type": "application/json"}
        if self.cookie:
            headers["Cookie"] = self.cookie
        request = urllib.request.Request(f"{BASE}{path}", method=method, data=json.dumps(body).encode(), headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=20, context=CONTEXT) as response:
                cookie = response.headers.get("Set-Cookie")
                if cookie:
                    self.cookie = cookie.split(";", 1)[0]
                return response.status
        except urllib.error.HTTPError as error:
            raise SystemExit(f"{method} {path}: HTTP {error.code} {error.read()[:300]!r}")


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def self_signed_jwks():
    """The JWKS of pki/self.crt: its RSA public key with the certificate in x5c."""
    der = subprocess.run(["openssl", "x509", "-in", f"{PKI}/self.crt", "-outform", "DER"], check=True, capture_output=True).stdout
    modulus = subprocess.run(["openssl", "x509", "-in", f"{PKI}/self.crt", "-noout", "-modulus"], check=True,
                             capture_output=True, text=True).stdout.strip().split("=", 1)[1]
    return {"keys": [{"kty": "RSA", "n": b64url(bytes.fromhex(modulus)), "e": "AQAB", "use": "sig", "kid": "self",
                      "x5c": [base64.b64encode(der).decode()]}]}


admin = Session()
admin.call("POST", "/auth/", {"username": "admin", "password": "password"})
PLUGIN = {
    "iss": ISSUER, "jwt-type": "rsa", "jwt-key-size": "256", "key": read("oidc.key"), "cert": read("oidc.pub"),
    "access-token-duration": 3600, "refresh-token-duration": 1209600, "code-duration": 600,
    "refresh-token-rolling": True, "allow-non-oidc": True,
    "auth-type-code-enabled": True, "auth-type-token-enabled": False, "auth-type-id-token-enabled": True,
    "auth-type-client-enabled": True, "auth-type-refresh-enabled": True, "auth-type-device-enabled": False,
    "auth-type-password-enabled": False,
    "pkce-allowed": True, "pkce-method-plain-allowed": False,
    "request-parameter-allow": True, "request-maximum-exp": 3600, "client-pubkey-parameter": "pubkey",
    "client-jwks-parameter": "jwks", "jwks-show": True,
    "oauth-par-allowed": True, "oauth-par-required": False, "oauth-par-duration": 90,
    "oauth-par-request_uri-prefix": "urn:ietf:params:oauth:request_uri:",
    "client-cert-source": "TLS", "client-cert-header-name": "SSL_CLIENT_CERT",
    "client-cert-self-signed-allowed": True, "client-cert-use-endpoint-aliases": False,
    "introspection-revocation-allowed": True, "introspection-revocation-allow-target-client": True,
    "allowed-scope": ["openid"],
}
admin.call("POST", "/mod/plugin/", {"module": "oidc", "name": "oidc", "display_name": "oidc", "enabled": True, "parameters": PLUGIN})
# The DPoP instances: the same settings, DPoP on (proof iat at most 60 s old, at most 5 s ahead), the
# device grant on; "dpopn" also requires glewlwyd's DPoP nonces.
dpop_parameters = {
    "auth-type-device-enabled": True, "device-authorization-expiration": 600, "device-authorization-interval": 1,
    "oauth-dpop-allowed": True, "oauth-dpop-iat-duration": 60, "oauth-dpop-iat-gap-duration": 5,
}
for name, nonces in (("dpop", False), ("dpopn", True)):
    admin.call("POST", "/mod/plugin/", {
        "module": "oidc", "name": name, "display_name": name, "enabled": True,
        "parameters": {**PLUGIN, **dpop_parameters, "iss": f"{BASE}/{name}",
                       **({"oauth-dpop-nonce-mandatory": True, "oauth-dpop-nonce-counter": 1} if nonces else {})},
    })
admin.call("POST", "/user/", {"username": "alice", "password": "alice-password", "name": "Alice", "email": "",
                               "scope": ["openid"], "enabled": True})

client_pubkey = public_pem("client.key")
common = {"confidential": True, "redirect_uri": [REDIRECT], "scope": ["openid"], "enabled": True,
          "authorization_type": ["code", "refresh_token", "client_credentials"]}
dpop_types = {"authorization_type": ["code", "refresh_token", "client_credentials", "device_authorization"]}
clients = [
    {"client_id": "par-secret", "name": "PAR with a secret", "client_secret": "par-secret-value-0123456789abcdef",
     "token_endpoint_auth_method": ["client_secret_basic"], "pubkey": client_pubkey},
    {"client_id": "par-jwt", "name": "PAR with private_key_jwt", "token_endpoint_auth_method": ["private_key_jwt"],
     "pubkey": client_pubkey},
    {"client_id": "mtls-ca", "name": "tls_client_auth", "token_endpoint_auth_method": ["tls_client_auth"],
     "tls_client_auth_san_dns": "client.oauthflow.test", "pubkey": client_pubkey},
    {"client_id": "mtls-self", "name": "self_signed_tls_client_auth", "token_endpoint_auth_method": ["self_signed_tls_client_auth"],
     "jwks": self_signed_jwks(), "pubkey": public_pem("self.key")},
    {**dpop_types, "client_id": "dpop-secret", "name": "DPoP with a secret", "client_secret": "dpop-secret-value-0123456789abcdef",
     "token_endpoint_auth_method": ["client_secret_basic"], "pubkey": client_pubkey},
    {**dpop_types, "client_id": "dpop-jwt", "name": "DPoP with private_key_jwt", "token_endpoint_auth_method": ["private_key_jwt"],
     "pubkey": client_pubkey},
    {**dpop_types, "client_id": "nonce-code", "name": "DPoP nonces, code", "client_secret": "nonce-code-value-0123456789abcdef",
     "token_endpoint_auth_method": ["client_secret_basic"]},
    {**dpop_types, "client_id": "nonce-device", "name": "DPoP nonces, device", "client_secret": "nonce-device-value-0123456789abcdef",
     "token_endpoint_auth_method": ["client_secret_basic"]},
    {**dpop_types, "client_id": "nonce-par", "name": "DPoP nonces, PAR", "client_secret": "nonce-par-value-0123456789abcdef",
     "token_endpoint_auth_method": ["client_secret_basic"]},
]
for client in clients:
    admin.call("POST", "/client/", {**common, **client})

alice = Session()
alice.call("POST", "/auth/", {"username": "alice", "password": "alice-password"})
for client in clients:
    alice.call("PUT", f"/auth/grant/{client['client_id']}", {"scope": "openid"})
print(f"[oauthflow-par provision] plugin, user alice and {len(clients)} clients at {ISSUER}", file=sys.stderr)
