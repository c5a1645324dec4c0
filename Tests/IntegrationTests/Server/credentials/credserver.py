"""Loopback authorization server for issue 17's client-credential tests, built on Authlib.

Authlib (a maintained library, https://authlib.org) implements the RFCs; this file only wires them
to an in-memory client registry:

- RFC 7523 §2.2 / OpenID Connect Core §9 client authentication: ``private_key_jwt`` and
  ``client_secret_jwt`` (Authlib's ``JWTBearerClientAssertion``), next to ``client_secret_basic``
  and ``client_secret_post``, at the token endpoint with the client-credentials grant;
- RFC 7523 §2.1 JWT-bearer grant (Authlib's ``JWTBearerGrant``).

Loopback only (127.0.0.1). Test hooks, for tests only:

- ``POST /it/clients`` (JSON) registers a client: ``client_id``, ``method`` (``private_key_jwt``,
  ``client_secret_jwt``, ``client_secret_basic``, ``client_secret_post``), ``jwk`` (public JWK) or
  ``client_secret``, optional ``audience`` (``endpoint`` = the token URL, the default; ``issuer``),
  optional ``algorithms`` (the JWS algorithms the server accepts; default Authlib's: HS256, RS256, ES256);
- ``GET /it/requests`` returns every token request's form fields as lists, in order, with
  ``_authorization`` holding the Authorization header (the assertion too: this is a test server,
  and the tests decode it).

Run: ``python credserver.py PORT``; the issuer is ``http://127.0.0.1:PORT``.
"""

import json
import sys
import threading
import time

from authlib.integrations.flask_oauth2 import AuthorizationServer
from authlib.oauth2.rfc6749 import ClientMixin, grants
from authlib.oauth2.rfc7523 import JWTBearerClientAssertion, JWTBearerGrant
from flask import Flask, jsonify, request
from joserfc import jwt as jose_jwt
from joserfc.errors import JoseError
from joserfc.jwk import KeySet, OctKey, import_key
from joserfc.jws import JWSRegistry

PORT = int(sys.argv[1]) if len(sys.argv) > 1 else 8920
ISSUER = f"http://127.0.0.1:{PORT}"
TOKEN_URL = f"{ISSUER}/token"

app = Flask(__name__)
lock = threading.Lock()
clients = {}
seen_jti = set()
requests_log = []


class Client(ClientMixin):
    def __init__(self, spec):
        self.spec = spec

    def get_client_id(self):
        return self.spec["client_id"]

    def get_default_redirect_uri(self):
        return None

    def get_allowed_scope(self, scope):
        return scope or ""

    def check_redirect_uri(self, redirect_uri):
        return False

    def check_client_secret(self, client_secret):
        return client_secret == self.spec.get("client_secret")

    def check_endpoint_auth_method(self, method, endpoint):
        wanted = self.spec["method"]
        if method == JWTBearerClientAssertion.CLIENT_AUTH_METHOD:
            return wanted in ("private_key_jwt", "client_secret_jwt")
        return method == wanted

    def check_response_type(self, response_type):
        return False

    def check_grant_type(self, grant_type):
        return grant_type in ("client_credentials", JWTBearerGrant.GRANT_TYPE)

    def key(self):
        if self.spec["method"] == "client_secret_jwt":
            return OctKey.import_key(self.spec["client_secret"].encode())
        return import_key(self.spec["jwk"])

    def audiences(self):
        return [ISSUER] if self.spec.get("audience") == "issuer" else [TOKEN_URL]


def query_client(client_id):
    with lock:
        spec = clients.get(client_id)
    return Client(spec) if spec else None


def save_token(token, req):
    pass


class Assertion(JWTBearerClientAssertion):
    """Authlib's RFC 7523 §3 checks, with per-client audience, algorithms and a jti replay set."""

    def __call__(self, query_client, req):
        self._client = None
        data = req.form
        if data.get("client_assertion"):
            _, claims = self.extract_assertion(data["client_assertion"])
            self._client = query_client(claims.get("sub")) if isinstance(claims.get("sub"), str) else None
        return super().__call__(query_client, req)

    def get_audiences(self):
        return self._client.audiences() if self._client else [TOKEN_URL]

    def process_assertion_claims(self, assertion, resolve_key):
        algorithms = self._client.spec.get("algorithms") if self._client else None
        try:
            token = jose_jwt.decode(assertion, resolve_key, algorithms=algorithms)
        except JoseError as e:
            from authlib.oauth2.rfc6749 import InvalidClientError
            raise InvalidClientError(description=e.description) from e
        self.verify_claims(token.claims)
        return token.claims

    def validate_jti(self, claims, jti):
        key = (claims["sub"], jti)
        with lock:
            if key in seen_jti:
                return False
            seen_jti.add(key)
        return True

    def resolve_client_public_key(self, client):
        return client.key()


class BearerGrant(JWTBearerGrant):
    def resolve_issuer_client(self, issuer):
        return query_client(issuer)

    def resolve_client_public_key(self, client):
        return client.key()

    def get_audiences(self):
        return [TOKEN_URL]

    def authenticate_user(self, subject):
        return {"sub": subject}

    def has_granted_permission(self, client, user):
        return True


class ClientCredentials(grants.ClientCredentialsGrant):
    TOKEN_ENDPOINT_AUTH_METHODS = [
        "client_secret_basic", "client_secret_post", JWTBearerClientAssertion.CLIENT_AUTH_METHOD,
    ]


server = AuthorizationServer(app, query_client=query_client, save_token=save_token)
server.register_grant(ClientCredentials)
server.register_grant(BearerGrant)
server.register_client_auth_method(JWTBearerClientAssertion.CLIENT_AUTH_METHOD, Assertion())


@app.post("/token")
def token():
    with lock:
        requests_log.append({k: request.form.getlist(k) for k in request.form.keys()}
                            | {"_authorization": [request.headers.get("Authorization", "")]})
    return server.create_token_response()


@app.get("/.well-known/oauth-authorization-server")
def metadata():
    return jsonify({
        "issuer": ISSUER,
        "token_endpoint": TOKEN_URL,
        "grant_types_supported": ["client_credentials", JWTBearerGrant.GRANT_TYPE],
        "token_endpoint_auth_methods_supported": [
            "client_secret_basic", "client_secret_post", "private_key_jwt", "client_secret_jwt"],
        "token_endpoint_auth_signing_alg_values_supported": JWSRegistry.recommended,
    })


@app.post("/it/clients")
def register():
    spec = request.get_json(force=True)
    with lock:
        clients[spec["client_id"]] = spec
    return jsonify({"ok": True})


@app.get("/it/requests")
def recorded():
    with lock:
        return jsonify(requests_log)


if __name__ == "__main__":
    app.run(host="127.0.0.1", port=PORT, threaded=True)
