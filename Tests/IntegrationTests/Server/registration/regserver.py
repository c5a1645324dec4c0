"""Loopback authorization server with dynamic client registration, built on Authlib (issue 32's
second registration server, next to glewlwyd in ciba/).

Authlib (https://authlib.org) implements the RFCs; this file only wires them to in-memory stores:

- RFC 7591 client registration (Authlib's ``ClientRegistrationEndpoint``) at ``POST /register``,
  open, and at ``POST /protected/register``, which wants the initial access token
  ``Bearer initial-access-token-0123456789`` (RFC 7591 §3);
- RFC 7592 client configuration (Authlib's ``ClientConfigurationEndpoint``) at
  ``GET / PUT / DELETE /register/CLIENT_ID`` with the registration access token of the answer;
- RFC 8414 metadata at ``/.well-known/oauth-authorization-server`` (issuer ``http://127.0.0.1:PORT``);
- the authorization code grant with PKCE S256 required (RFC 7636), refresh tokens and client
  credentials, client authentication ``client_secret_basic``, ``client_secret_post`` or ``none``.
  ``GET /authorize`` approves at once as the user ``alice`` (a test server: no login page) and
  redirects to the client with ``code`` and ``state``.

Loopback only (127.0.0.1). Test hooks, for tests only:

- ``POST /it/expire-secret/CLIENT_ID`` makes the client's secret expired (client_secret_expires_at
  one second ago): the token endpoint then refuses it, and a read shows the expiry;
- ``GET /it/clients`` lists the registered client IDs;
- ``GET /it/token-info`` with ``Authorization: Bearer TOKEN``: ``{"active": true, "scope", "client_id"}``
  for an access token this server issued to a client still registered, else 401 ``{"active": false}``
  (what resource/resource.py, the protected resource in front of this server, asks).

Run: ``python regserver.py PORT``.
"""

import secrets
import sys
import threading
import time

from authlib.integrations.flask_oauth2 import AuthorizationServer
from authlib.oauth2.rfc6749 import ClientMixin, OAuth2Error, grants
from authlib.oauth2.rfc7591 import ClientRegistrationEndpoint
from authlib.oauth2.rfc7592 import ClientConfigurationEndpoint
from authlib.oauth2.rfc7636 import CodeChallenge
from flask import Flask, jsonify, request

PORT = int(sys.argv[1]) if len(sys.argv) > 1 else 8950
ISSUER = f"http://127.0.0.1:{PORT}"
INITIAL_ACCESS_TOKEN = "initial-access-token-0123456789"
METADATA = {
    "issuer": ISSUER,
    "authorization_endpoint": f"{ISSUER}/authorize",
    "token_endpoint": f"{ISSUER}/token",
    "registration_endpoint": f"{ISSUER}/register",
    "scopes_supported": ["openid", "api", "read", "write"],
    "response_types_supported": ["code"],
    "grant_types_supported": ["authorization_code", "refresh_token", "client_credentials"],
    "token_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post", "none"],
    "code_challenge_methods_supported": ["S256"],
}

app = Flask(__name__)
# Authlib's Flask integration makes refresh tokens only when this is set (its default token generator).
app.config["OAUTH2_REFRESH_TOKEN_GENERATOR"] = True
lock = threading.Lock()
clients = {}            # client_id -> Client
registration_tokens = {}  # registration access token -> client_id
codes = {}              # code -> dict
refresh_tokens = {}     # refresh token -> dict
access_tokens = {}      # access token -> {"scope", "client_id"} (the resource's check, /it/token-info)


class Client(ClientMixin):
    def __init__(self, info, metadata):
        self.client_info = dict(info)
        self.client_metadata = dict(metadata)

    def get_client_id(self):
        return self.client_info["client_id"]

    def get_default_redirect_uri(self):
        uris = self.client_metadata.get("redirect_uris") or []
        return uris[0] if uris else None

    def get_allowed_scope(self, scope):
        allowed = set((self.client_metadata.get("scope") or "").split())
        return " ".join(s for s in (scope or "").split() if s in allowed)

    def check_redirect_uri(self, redirect_uri):
        return redirect_uri in (self.client_metadata.get("redirect_uris") or [])

    def check_client_secret(self, client_secret):
        expires = self.client_info.get("client_secret_expires_at") or 0
        if expires and expires <= time.time():
            return False
        return secrets.compare_digest(client_secret or "", self.client_info.get("client_secret") or "")

    def check_endpoint_auth_method(self, method, endpoint):
        if endpoint == "token":
            return method == self.client_metadata.get("token_endpoint_auth_method", "client_secret_basic")
        return True

    def check_response_type(self, response_type):
        return response_type in (self.client_metadata.get("response_types") or ["code"])

    def check_grant_type(self, grant_type):
        return grant_type in (self.client_metadata.get("grant_types") or ["authorization_code"])


class RegistrationToken:
    """What authenticate_token returns: the caller of /register (anonymous or the initial access
    token), or a registration access token bound to one client (RFC 7592 §1)."""

    def __init__(self, client_id=None):
        self.client_id = client_id

    def check_client(self, client):
        return self.client_id == client.get_client_id()


def bearer():
    header = request.headers.get("Authorization", "")
    return header[7:] if header.startswith("Bearer ") else None


class Registration(ClientRegistrationEndpoint):
    def authenticate_token(self, req):
        if request.path.startswith("/protected/"):
            return RegistrationToken() if bearer() == INITIAL_ACCESS_TOKEN else None
        return RegistrationToken()

    def get_server_metadata(self):
        return METADATA

    def save_client(self, client_info, client_metadata, req):
        client = Client(client_info, client_metadata)
        with lock:
            clients[client.get_client_id()] = client
        return client

    def generate_client_registration_info(self, client, req):
        token = secrets.token_urlsafe(32)
        with lock:
            registration_tokens[token] = client.get_client_id()
        return {"registration_client_uri": f"{ISSUER}/register/{client.get_client_id()}", "registration_access_token": token}


class Configuration(ClientConfigurationEndpoint):
    def authenticate_token(self, req):
        with lock:
            client_id = registration_tokens.get(bearer() or "")
        return RegistrationToken(client_id) if client_id else None

    def authenticate_client(self, req):
        client_id = request.path.rstrip("/").rsplit("/", 1)[-1]
        with lock:
            return clients.get(client_id)

    def revoke_access_token(self, req, token):
        with lock:
            registration_tokens.pop(bearer() or "", None)

    def check_permission(self, client, req):
        return True

    def delete_client(self, client, req):
        with lock:
            clients.pop(client.get_client_id(), None)
            for token, client_id in list(registration_tokens.items()):
                if client_id == client.get_client_id():
                    del registration_tokens[token]

    def update_client(self, client, client_metadata, req):
        with lock:
            client.client_metadata = {**client.client_metadata, **client_metadata}
        return client

    def generate_client_registration_info(self, client, req):
        return {"registration_client_uri": f"{ISSUER}/register/{client.get_client_id()}", "registration_access_token": bearer()}

    def get_server_metadata(self):
        return METADATA


def query_client(client_id):
    with lock:
        return clients.get(client_id)


def save_token(token, req):
    with lock:
        access_tokens[token["access_token"]] = {"scope": token.get("scope", ""), "client_id": req.client.get_client_id()}
    if "refresh_token" in token:
        with lock:
            refresh_tokens[token["refresh_token"]] = {"client_id": req.client.get_client_id(), "scope": token.get("scope", ""),
                                                      "user": "alice"}


class Code:
    def __init__(self, **fields):
        self.__dict__.update(fields)

    def get_redirect_uri(self):
        return self.redirect_uri

    def get_scope(self):
        return self.scope


class AuthorizationCode(grants.AuthorizationCodeGrant):
    TOKEN_ENDPOINT_AUTH_METHODS = ["client_secret_basic", "client_secret_post", "none"]

    def save_authorization_code(self, code, req):
        with lock:
            codes[code] = Code(code=code, client_id=req.client.get_client_id(), redirect_uri=req.payload.redirect_uri,
                               scope=req.payload.scope or "", code_challenge=req.payload.data.get("code_challenge"),
                               code_challenge_method=req.payload.data.get("code_challenge_method"), user="alice")

    def query_authorization_code(self, code, client):
        with lock:
            found = codes.get(code)
        return found if found and found.client_id == client.get_client_id() else None

    def delete_authorization_code(self, authorization_code):
        with lock:
            codes.pop(authorization_code.code, None)

    def authenticate_user(self, authorization_code):
        return {"sub": authorization_code.user}


class RefreshToken(grants.RefreshTokenGrant):
    TOKEN_ENDPOINT_AUTH_METHODS = ["client_secret_basic", "client_secret_post", "none"]
    INCLUDE_NEW_REFRESH_TOKEN = True

    def authenticate_refresh_token(self, refresh_token):
        with lock:
            found = refresh_tokens.get(refresh_token)
        if found:
            return Code(refresh_token=refresh_token, **found, check_client=lambda client: client.get_client_id() == found["client_id"],
                        is_expired=lambda: False, is_revoked=lambda: False, get_scope=lambda: found["scope"])
        return None

    def authenticate_user(self, credential):
        return {"sub": credential.user}

    def revoke_old_credential(self, credential):
        with lock:
            refresh_tokens.pop(credential.refresh_token, None)


class ClientCredentials(grants.ClientCredentialsGrant):
    TOKEN_ENDPOINT_AUTH_METHODS = ["client_secret_basic", "client_secret_post"]


server = AuthorizationServer(app, query_client=query_client, save_token=save_token)
server.register_grant(AuthorizationCode, [CodeChallenge(required=True)])
server.register_grant(RefreshToken)
server.register_grant(ClientCredentials)
server.register_endpoint(Registration)
server.register_endpoint(Configuration)


@app.get("/.well-known/oauth-authorization-server")
def metadata():
    return jsonify(METADATA)


@app.post("/register")
@app.post("/protected/register")
def register():
    return server.create_endpoint_response(Registration.ENDPOINT_NAME)


@app.route("/register/<client_id>", methods=["GET", "PUT", "DELETE"])
def configure(client_id):
    return server.create_endpoint_response(Configuration.ENDPOINT_NAME)


@app.get("/authorize")
def authorize():
    try:
        grant = server.get_consent_grant(end_user={"sub": "alice"})
    except OAuth2Error as error:
        return server.handle_error_response(None, error)
    return server.create_authorization_response(grant_user={"sub": "alice"}, grant=grant)


@app.post("/token")
def token():
    return server.create_token_response()


@app.post("/it/expire-secret/<client_id>")
def expire_secret(client_id):
    with lock:
        client = clients.get(client_id)
        if client is None:
            return jsonify({"error": "not_found"}), 404
        client.client_info["client_secret_expires_at"] = int(time.time()) - 1
    return jsonify({"client_secret_expires_at": client.client_info["client_secret_expires_at"]})


@app.get("/it/token-info")
def token_info():
    """What a resource server asks about a bearer token (resource/resource.py): active while its
    client is registered, with the scope it was issued with; 401 otherwise."""
    with lock:
        found = access_tokens.get(bearer() or "")
        active = found is not None and found["client_id"] in clients
    if not active:
        return jsonify({"active": False}), 401
    return jsonify({"active": True, "scope": found["scope"], "client_id": found["client_id"]})


@app.get("/it/clients")
def listed():
    with lock:
        return jsonify(sorted(clients))


if __name__ == "__main__":
    app.run(host="127.0.0.1", port=PORT, threaded=True)
