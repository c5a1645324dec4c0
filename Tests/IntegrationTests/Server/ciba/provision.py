"""Provisions a fresh glewlwyd (Debian's 2.7.5) through its admin API for the CIBA and dynamic
client registration tests (OpenID Connect CIBA Core 1.0; RFC 7591, RFC 7592). Python's standard
library only. Run by par/start.sh (OAUTHFLOW_PAR_PROVISION) as ``provision.py PORT HOME``.

Logs in as the package's default administrator (admin/password, from Debian's init.sqlite3.sql),
then creates:

- the scope ``api`` (no password required), next to the package's ``openid``;
- the user ``alice`` (password ``alice-password``, scopes ``openid`` and ``api``, CIBA user code
  ``alice-code-4711`` in her ``user-code`` property);
- the OpenID Connect plugin instance ``oidc`` (issuer https://127.0.0.1:PORT/api/oidc): RS256 ID
  and access tokens, the code grant with PKCE, refresh tokens, client credentials; CIBA
  (``POST /api/oidc/ciba``) in poll and ping mode (push off), ``user_code`` checked against the
  user's ``user-code``, default expiry 600 s, at most 3600 s; open dynamic registration
  (``POST /api/oidc/register``, no initial access token) with its management endpoint
  (``/api/oidc/register/CLIENT_ID``);
- the instance ``dcr`` (issuer https://127.0.0.1:PORT/api/dcr): the same, but registration needs
  an initial access token, an access token of this instance with the scope ``api``, usable once
  (``register-client-token-one-use``); the client ``dcr-issuer`` (client_secret_basic, client
  credentials, scope ``api``) gets one from /api/dcr/token;
- the clients of ``oidc`` (no redirect URI is needed by CIBA; each has
  https://client.oauthflow.test/callback for the code grant):
  ``ciba-secret`` client_secret_basic, poll; ``ciba-post`` client_secret_post, poll;
  ``ciba-jwt`` private_key_jwt with pki/client.key, poll; ``ciba-ping`` client_secret_basic, ping,
  its notification endpoint http://127.0.0.1:9/ciba-notify until a test sets its own
  (``user.py set-ping-endpoint``).

Alice grants nothing in advance: glewlwyd counts ``openid`` as granted to every client, and user.py
grants what a request asks for before approving it, as the login page's consent step does.
"""

import subprocess
import sys

from glewlwyd_api import Server, Session

PORT = sys.argv[1]
HOME = sys.argv[2]
server = Server(PORT, HOME)
REDIRECT = "https://client.oauthflow.test/callback"
CIBA = "urn:openid:params:grant-type:ciba"


def read(name):
    with open(server.pki(name)) as handle:
        return handle.read()


def public_pem(key):
    return subprocess.run(["openssl", "pkey", "-in", server.pki(key), "-pubout"], check=True, capture_output=True, text=True).stdout


def plugin(name, **overrides):
    return {
        "module": "oidc", "name": name, "display_name": name, "enabled": True,
        "parameters": {
            "iss": f"{server.base}/api/{name}", "jwt-type": "rsa", "jwt-key-size": "256",
            "key": read("oidc.key"), "cert": read("oidc.pub"),
            "access-token-duration": 3600, "refresh-token-duration": 1209600, "code-duration": 600,
            "refresh-token-rolling": True, "allow-non-oidc": True,
            "auth-type-code-enabled": True, "auth-type-token-enabled": False, "auth-type-id-token-enabled": True,
            "auth-type-client-enabled": True, "auth-type-refresh-enabled": True, "auth-type-device-enabled": False,
            "auth-type-password-enabled": False,
            "pkce-allowed": True, "pkce-method-plain-allowed": False,
            # Client assertions (private_key_jwt) are read only when request objects are allowed.
            "request-parameter-allow": True, "request-maximum-exp": 3600,
            "client-pubkey-parameter": "pubkey", "client-jwks-parameter": "jwks", "jwks-show": True,
            "introspection-revocation-allowed": True, "introspection-revocation-allow-target-client": True,
            "allowed-scope": ["openid", "api"],
            "oauth-ciba-allowed": True, "oauth-ciba-mode-poll-allowed": True, "oauth-ciba-mode-ping-allowed": True,
            "oauth-ciba-mode-push-allowed": False, "oauth-ciba-allow-https-non-secure": False,
            "oauth-ciba-user-code-allowed": True, "oauth-ciba-user-code-property": "user-code",
            "oauth-ciba-default-expiry": 600, "oauth-ciba-maximum-expiry": 3600, "oauth-ciba-email-allowed": False,
            "register-client-allowed": True, "register-client-auth-scope": [], "register-client-credentials-scope": [],
            "register-client-management-allowed": True, "register-resource-specify-allowed": False,
            "register-default-properties": {},
            **overrides,
        },
    }


admin = Session(server, "admin", "password")
admin.call("POST", "/scope/", {"name": "api", "display_name": "API", "description": "The test API", "password_required": False,
                                "scheme": {}})
admin.call("POST", "/mod/plugin/", plugin("oidc"))
admin.call("POST", "/mod/plugin/", plugin("dcr", **{"register-client-auth-scope": ["api"], "register-client-token-one-use": True}))
admin.call("POST", "/user/", {"username": "alice", "password": "alice-password", "name": "Alice", "email": "",
                               "scope": ["openid", "api"], "enabled": True, "user-code": "alice-code-4711"})

client_pubkey = public_pem("client.key")
common = {"confidential": True, "redirect_uri": [REDIRECT], "scope": ["openid", "api"], "enabled": True,
          "authorization_type": ["code", "refresh_token", CIBA]}
clients = [
    {"client_id": "ciba-secret", "name": "CIBA poll, client_secret_basic", "client_secret": "ciba-secret-value-0123456789abcdef",
     "token_endpoint_auth_method": ["client_secret_basic"], "backchannel_token_delivery_mode": "poll"},
    {"client_id": "ciba-post", "name": "CIBA poll, client_secret_post", "client_secret": "ciba-post-value-0123456789abcdef",
     "token_endpoint_auth_method": ["client_secret_post"], "backchannel_token_delivery_mode": "poll"},
    {"client_id": "ciba-jwt", "name": "CIBA poll, private_key_jwt", "token_endpoint_auth_method": ["private_key_jwt"],
     "pubkey": client_pubkey, "backchannel_token_delivery_mode": "poll"},
    {"client_id": "ciba-ping", "name": "CIBA ping, client_secret_basic", "client_secret": "ciba-ping-value-0123456789abcdef",
     "token_endpoint_auth_method": ["client_secret_basic"], "backchannel_token_delivery_mode": "ping",
     "backchannel_client_notification_endpoint": "http://127.0.0.1:9/ciba-notify"},
    {"client_id": "dcr-issuer", "name": "initial access tokens of the dcr instance", "client_secret": "dcr-issuer-value-0123456789abcdef",
     "token_endpoint_auth_method": ["client_secret_basic"], "authorization_type": ["client_credentials"], "redirect_uri": [],
     "scope": ["api"]},
]
for client in clients:
    admin.call("POST", "/client/", {**common, **client})
print(f"[oauthflow-ciba provision] plugins oidc and dcr, user alice and {len(clients)} clients at {server.base}", file=sys.stderr)
