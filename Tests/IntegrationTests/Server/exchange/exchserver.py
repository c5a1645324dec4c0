"""Loopback authorization server for issue 17's token-exchange tests, built on idpyoidc.

idpyoidc (IdentityPython's maintained OAuth 2.0 / OpenID Connect library, https://github.com/IdentityPython/idpy-oidc)
implements RFC 8693 token exchange at its token endpoint (``TokenExchangeHelper``) and the client
authentication; this file only configures it and serves it over HTTP on 127.0.0.1.

- Token endpoint ``/token``: ``urn:ietf:params:oauth:grant-type:token-exchange`` with
  ``client_secret_basic`` / ``client_secret_post``. Subject tokens are tokens this server issued
  (idpyoidc's token exchange only accepts its own access and refresh tokens). Its default policy
  refuses an actor token, and a ``resource`` or ``audience`` outside the lists below
  (``invalid_target``).
- Metadata ``/.well-known/oauth-authorization-server``.

Test hooks, for tests only:

- ``POST /it/subject-token`` (JSON ``{"scope": "openid offline_access"}``, optional) runs an
  authorization code login of user ``diana`` at client ``issuer-client`` inside the server and returns
  its token response: the subject tokens a test exchanges.
- ``GET /it/requests`` returns every token request's form fields as lists, in order, with
  ``_authorization`` holding the Authorization header.

Run: ``python exchserver.py PORT STATE_DIR``; the issuer is ``http://127.0.0.1:PORT``.
"""

import json
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs

from idpyoidc.message.oidc import AccessTokenRequest, AuthorizationRequest
from idpyoidc.server import Server
from idpyoidc.server.authn_event import create_authn_event
from idpyoidc.server.authz import AuthzHandling
from idpyoidc.server.client_authn import verify_client
from idpyoidc.server.configure import ASConfiguration
from idpyoidc.server.exception import ClientAuthenticationError, UnAuthorizedClient
from idpyoidc.server.oauth2.token_helper import validate_token_exchange_policy
from idpyoidc.server.user_authn.authn_context import INTERNETPROTOCOLPASSWORD
from idpyoidc.server.user_info import UserInfo

PORT = int(sys.argv[1]) if len(sys.argv) > 1 else 8930
STATE = sys.argv[2] if len(sys.argv) > 2 else "/tmp/oauthflow-exchange"
ISSUER = f"http://127.0.0.1:{PORT}"
EXCHANGER_SECRET = "exchanger-secret-0123456789"
ISSUER_CLIENT_SECRET = "issuer-client-secret-0123456789"
RESOURCES = ["https://api.example.com/orders", "https://api.example.com/billing"]
AUDIENCES = ["orders-service", "billing-service"]
ACCESS_TOKEN = "urn:ietf:params:oauth:token-type:access_token"
REFRESH_TOKEN = "urn:ietf:params:oauth:token-type:refresh_token"

CRYPT = {"kwargs": {"keys": {"key_defs": [
    {"type": "OCT", "use": ["enc"], "kid": "password"},
    {"type": "OCT", "use": ["enc"], "kid": "salt"},
]}, "iterations": 1}}

CONF = {
    "issuer": ISSUER,
    "httpc_params": {"verify": False, "timeout": 1},
    "keys": {"uri_path": "jwks.json", "key_defs": [{"type": "EC", "crv": "P-256", "use": ["sig"]}]},
    "endpoint": {
        "authorization": {"path": "authorization", "class": "idpyoidc.server.oauth2.authorization.Authorization", "kwargs": {}},
        "token": {
            "path": "token",
            "class": "idpyoidc.server.oauth2.token.Token",
            "kwargs": {
                "client_authn_method": ["client_secret_basic", "client_secret_post"],
                "grant_types_helpers": {
                    "authorization_code": {"class": "idpyoidc.server.oauth2.token_helper.access_token.AccessTokenHelper"},
                    "urn:ietf:params:oauth:grant-type:token-exchange": {
                        "class": "idpyoidc.server.oauth2.token_helper.token_exchange.TokenExchangeHelper",
                        "kwargs": {
                            "subject_token_types_supported": [ACCESS_TOKEN, REFRESH_TOKEN],
                            "requested_token_types_supported": [ACCESS_TOKEN, REFRESH_TOKEN],
                            "default_requested_token_type": ACCESS_TOKEN,
                            "policy": {"": {"function": validate_token_exchange_policy,
                                            "kwargs": {"resource": RESOURCES, "audience": AUDIENCES}}},
                        },
                    },
                },
            },
        },
    },
    "authentication": {"anon": {"acr": INTERNETPROTOCOLPASSWORD, "class": "idpyoidc.server.user_authn.user.NoAuthn",
                                "kwargs": {"user": "diana"}}},
    "userinfo": {"class": UserInfo, "kwargs": {"db": {}}},
    "client_authn": verify_client,
    "authz": {"class": AuthzHandling, "kwargs": {"grant_config": {
        "usage_rules": {
            "authorization_code": {"supports_minting": ["access_token", "refresh_token"], "max_usage": 1},
            "access_token": {"supports_minting": ["access_token", "refresh_token"], "expires_in": 600},
            "refresh_token": {"supports_minting": ["access_token", "refresh_token"], "expires_in": 43200},
        },
        "expires_in": 43200,
    }}},
    "token_handler_args": {
        "code": {"lifetime": 600, "kwargs": {"crypt_conf": CRYPT}},
        "token": {"class": "idpyoidc.server.token.jwt_token.JWTToken", "kwargs": {"lifetime": 3600, "aud": [ISSUER]}},
        "refresh": {"class": "idpyoidc.server.token.jwt_token.JWTToken", "kwargs": {"lifetime": 3600, "aud": [ISSUER]}},
    },
    "session_params": {"encrypter": CRYPT},
}

os.makedirs(STATE, exist_ok=True)
server = Server(ASConfiguration(conf=CONF, base_path=STATE), cwd=STATE)
context = server.context
context.map_supported_to_preferred()
context.cdb["issuer-client"] = {
    "client_id": "issuer-client",
    "client_secret": ISSUER_CLIENT_SECRET,
    "redirect_uris": [("https://client.example.com/cb", None)],
    "client_salt": "salted",
    "token_endpoint_auth_method": "client_secret_post",
    "response_types": ["code"],
    "allowed_scopes": ["openid", "profile", "offline_access"],
}
context.cdb["exchanger"] = {
    "client_id": "exchanger",
    "client_secret": EXCHANGER_SECRET,
    "redirect_uris": [("https://exchanger.example.com/cb", None)],
    "client_salt": "salted",
    "token_endpoint_auth_method": "client_secret_basic",
    "grant_types_supported": ["urn:ietf:params:oauth:grant-type:token-exchange"],
    "response_types": ["code"],
    "allowed_scopes": ["openid", "profile", "offline_access"],
}
token_endpoint = server.get_endpoint("token")
lock = threading.Lock()
requests_log = []


def mint_subject_tokens(scope):
    """An authorization code login of diana at issuer-client, as idpyoidc's own tests run one."""
    areq = AuthorizationRequest(client_id="issuer-client", redirect_uri="https://client.example.com/cb",
                                scope=scope, state="STATE", response_type="code")
    manager = context.session_manager
    session_id = manager.create_session(create_authn_event("diana"), areq, "diana", client_id="issuer-client")
    grant = context.authz(session_id, areq)
    code = grant.mint_token(session_id=session_id, context=context, token_class="authorization_code",
                            token_handler=manager.token_handler["authorization_code"],
                            usage_rules=grant.usage_rules.get("authorization_code", {}))
    treq = AccessTokenRequest(client_id="issuer-client", redirect_uri="https://client.example.com/cb", state="STATE",
                              grant_type="authorization_code", client_secret=ISSUER_CLIENT_SECRET, code=code.value)
    parsed = token_endpoint.parse_request(treq.to_dict())
    args = token_endpoint.process_request(request=parsed)["response_args"]
    return args if isinstance(args, dict) else args.to_dict()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        sys.stderr.write("%s %s\n" % (self.requestline, fmt % args))

    def reply(self, status, body, headers=None):
        data = body.encode() if isinstance(body, str) else body
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Cache-Control", "no-store")
        for name, value in (headers or {}).items():
            if name.lower() not in ("content-type", "content-length"):
                self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def body(self):
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length).decode() if length else ""

    def do_GET(self):
        if self.path == "/.well-known/oauth-authorization-server":
            return self.reply(200, json.dumps({
                "issuer": ISSUER,
                "token_endpoint": f"{ISSUER}/token",
                "grant_types_supported": ["authorization_code", "urn:ietf:params:oauth:grant-type:token-exchange"],
                "token_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post"],
            }))
        if self.path == "/it/requests":
            with lock:
                return self.reply(200, json.dumps(requests_log))
        self.reply(404, json.dumps({"error": "not_found"}))

    def do_POST(self):
        try:
            self.post()
        except Exception as error:  # a bug here or in idpyoidc: say so instead of dropping the connection
            sys.stderr.write(f"server_error: {error!r}\n")
            self.reply(500, json.dumps({"error": "server_error"}))

    def post(self):
        if self.path == "/it/subject-token":
            text = self.body()
            scope = (json.loads(text) if text else {}).get("scope", "openid profile").split()
            with lock:
                return self.reply(200, json.dumps(mint_subject_tokens(scope)))
        if self.path != "/token":
            return self.reply(404, json.dumps({"error": "not_found"}))
        text = self.body()
        authorization = self.headers.get("Authorization", "")
        with lock:
            requests_log.append({k: v for k, v in parse_qs(text, keep_blank_values=True).items()}
                                | {"_authorization": [authorization]})
            http_info = {"headers": {"authorization": authorization} if authorization else {}, "url": f"{ISSUER}/token"}
            # idpyoidc's Token endpoint reads a string as JSON (request_format "json"); hand it the
            # form decoded by its own message class instead (repeated fields become lists).
            form = token_endpoint.request_cls().from_urlencoded(text)
            try:
                parsed = token_endpoint.parse_request(form, http_info=http_info)
            except (UnAuthorizedClient, ClientAuthenticationError):
                # idpyoidc raises on a client that fails authentication; RFC 6749 §5.2 says invalid_client.
                return self.reply(401, json.dumps({"error": "invalid_client", "error_description": "client authentication failed"}),
                                  {"WWW-Authenticate": 'Basic realm="token"'})
            if "error" in parsed:
                result = token_endpoint.do_response(**parsed.to_dict())
                status = 401 if parsed["error"] == "invalid_client" else 400
            else:
                args = token_endpoint.process_request(request=parsed, http_info=http_info)
                if "error" in args:
                    result = token_endpoint.do_response(**args.to_dict())
                    status = 400
                else:
                    result = token_endpoint.do_response(request=parsed, **args)
                    status = 200
        self.reply(status, result["response"], dict(result.get("http_headers", [])))


if __name__ == "__main__":
    ThreadingHTTPServer(("127.0.0.1", PORT), Handler).serve_forever()
