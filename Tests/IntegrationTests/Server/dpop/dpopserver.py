"""Loopback authorization server for issue 18's DPoP tests (RFC 9449), built on idpyoidc.

idpyoidc 5.0.0 (IdentityPython, a maintained OpenID Connect library) does the protocol: the
authorization endpoint (a user logged in without a page: its ``NoAuthn`` method), the token
endpoint (authorization code and refresh grants, client_secret_basic) with its DPoP add-on
(``idpyoidc.server.oauth2.add_on.dpop``), which verifies each proof's signature with cryptojwt,
checks ``typ``, ``htm`` and ``htu``, binds the tokens to the proof's key (``dpop_jkt``) and
answers ``token_type: DPoP``; and the metadata with ``dpop_signing_alg_values_supported``.

What idpyoidc 5.0.0 does not do, this file adds on top, marked "ours" below (Documentation/Testing.md):
server nonces (RFC 9449 §8: off unless a test turns them on), ``jti`` replay refusal at the token
endpoint, and a resource endpoint ``/api`` that verifies proofs as RFC 9449 §7.1 says: proof
signature and claims through idpyoidc's own ``DPoPProof``, ``ath`` as base64url SHA-256 (idpyoidc's
userinfo compares a hex digest, which no RFC client sends), the key's thumbprint against the one
the token was bound to, ``iat`` within 60 s, no replayed ``jti``, and resource nonces (§9) when on.

Test hooks (tests only):

- ``POST /it/nonces`` (JSON ``{"token": bool, "resource": bool}``) turns nonces on or off;
- ``POST /it/client-key`` (a public JWK) lets idpyoidc verify ``dpop-client``'s request objects
  (RFC 9101) at its authorization endpoint;
- ``GET /it/requests`` returns every request to ``/token`` and ``/api``: path, method, the
  ``Authorization`` and ``DPoP`` headers and the form, in order; ``POST /it/reset`` empties it.

Run: ``python dpopserver.py PORT``; the issuer is ``http://127.0.0.1:PORT``.
"""

import base64
import hashlib
import json
import logging
import os
import secrets
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qsl, urlsplit

from cryptojwt.jwk.jwk import key_from_jwk_dict
from idpyoidc.server import Server
from idpyoidc.server.configure import OPConfiguration
from idpyoidc.server.oauth2.add_on.dpop import DPoPProof

PORT = int(sys.argv[1]) if len(sys.argv) > 1 else 8930
ISSUER = f"http://127.0.0.1:{PORT}"
CLIENT_ID = "dpop-client"
CLIENT_SECRET = "dpop-client-secret-0123456789abcdef"
REDIRECT_URI = "http://127.0.0.1:9/callback"
ALGORITHMS = ["ES256", "ES384", "EdDSA", "PS256", "RS256"]

logging.basicConfig(level=logging.WARNING)

CRYPT = {"kwargs": {"keys": {"key_defs": [{"type": "OCT", "use": ["enc"], "kid": "password"},
                                          {"type": "OCT", "use": ["enc"], "kid": "salt"}]}, "iterations": 1}}
KEYDEFS = [{"type": "RSA", "key": "", "use": ["sig"]}, {"type": "EC", "crv": "P-256", "use": ["sig"]}]
STATE = os.path.join(os.environ.get("OAUTHFLOW_DPOP_HOME", "/tmp/oauthflow-dpop"), f"op-{PORT}")
os.makedirs(STATE, mode=0o700, exist_ok=True)
os.chdir(STATE)

CONF = {
    "issuer": ISSUER,
    "httpc_params": {"verify": False, "timeout": 2},
    "keys": {"uri_path": "jwks.json", "key_defs": KEYDEFS, "private_path": os.path.join(STATE, "jwks.json"),
             "read_only": False},
    "capabilities": {
        "response_types_supported": ["code"],
        "token_endpoint_auth_methods_supported": ["client_secret_basic"],
        "grant_types_supported": ["authorization_code", "refresh_token"],
        "response_modes_supported": ["query"],
        "subject_types_supported": ["public"],
    },
    "add_on": {
        "dpop": {
            "function": "idpyoidc.server.oauth2.add_on.dpop.add_support",
            "kwargs": {"dpop_signing_alg_values_supported": ALGORITHMS, "dpop_endpoints": ["token"]},
        },
    },
    "token_handler_args": {
        "jwks_def": {"private_path": os.path.join(STATE, "token_jwks.json"), "read_only": False,
                     "key_defs": [{"type": "oct", "bytes": "24", "use": ["enc"], "kid": "code"}]},
        "code": {"lifetime": 600, "kwargs": {"crypt_conf": CRYPT}},
        "token": {"class": "idpyoidc.server.token.jwt_token.JWTToken",
                  "kwargs": {"lifetime": 3600, "aud": [ISSUER + "/api"]}},
        "refresh": {"class": "idpyoidc.server.token.jwt_token.JWTToken",
                    "kwargs": {"lifetime": 86400, "aud": [ISSUER]}},
        "id_token": {"class": "idpyoidc.server.token.id_token.IDToken", "kwargs": {}},
    },
    "endpoint": {
        "provider_config": {"path": ".well-known/openid-configuration",
                            "class": "idpyoidc.server.oidc.provider_config.ProviderConfiguration", "kwargs": {}},
        "authorization": {"path": "authorization", "class": "idpyoidc.server.oauth2.authorization.Authorization",
                          "kwargs": {}},
        "token": {"path": "token", "class": "idpyoidc.server.oidc.token.Token",
                  "kwargs": {"client_authn_method": ["client_secret_basic"]}},
    },
    "authentication": {
        "anon": {"acr": "urn:oasis:names:tc:SAML:2.0:ac:classes:InternetProtocolPassword",
                 "class": "idpyoidc.server.user_authn.user.NoAuthn", "kwargs": {"user": "diana"}},
    },
    "userinfo": {"class": "idpyoidc.server.user_info.UserInfo", "kwargs": {"db": {"diana": {"sub": "diana"}}}},
    "session_params": {"encrypter": CRYPT},
    "template_dir": STATE,
}

server = Server(OPConfiguration(CONF, base_path=STATE), cwd=STATE)
server.context.cdb[CLIENT_ID] = {
    "client_id": CLIENT_ID,
    "client_secret": CLIENT_SECRET,
    "redirect_uris": [(REDIRECT_URI, {})],
    "client_salt": "salted",
    "token_endpoint_auth_method": "client_secret_basic",
    "response_types": ["code"],
    "grant_types": ["authorization_code", "refresh_token"],
    "allowed_scopes": ["read", "offline_access"],
}
# Quirk: the add-on writes dpop_signing_alg_values_supported into provider_info before the server
# computes provider_info, which then drops it; written again from what the add-on registered.
server.context.provider_info["dpop_signing_alg_values_supported"] = server.context.add_on["dpop"]["algs_supported"]

lock = threading.Lock()
log = []
seen_jti = set()
token_keys = {}          # access token -> the thumbprint idpyoidc bound it to
nonces = {"token": False, "resource": False}
current = {"token": secrets.token_urlsafe(16), "resource": secrets.token_urlsafe(16)}


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def verify_proof(header, method, url):
    """idpyoidc's DPoPProof: signature (cryptojwt), typ and alg; the claims are returned."""
    proof = DPoPProof().verify_header(header)
    if proof is None:
        raise ValueError("not a JWS")
    proof.verify()
    if proof["htm"] != method or proof["htu"] != url:
        raise ValueError("htm/htu do not match the request")
    return proof


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def answer(self, status, body, headers=(), content_type="application/json"):
        data = body.encode() if isinstance(body, str) else body
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-store")
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def record(self, form):
        with lock:
            log.append({"path": urlsplit(self.path).path, "method": self.command,
                        "authorization": self.headers.get("Authorization"), "dpop": self.headers.get("DPoP"),
                        "form": form})

    def body(self):
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length).decode() if length else ""

    def do_GET(self):
        parts = urlsplit(self.path)
        if parts.path == "/.well-known/openid-configuration":
            endpoint = server.get_endpoint("provider_config")
            args = endpoint.process_request(endpoint.parse_request({}))
            return self.answer(200, endpoint.do_response(**args)["response"])
        if parts.path == "/jwks.json":
            return self.answer(200, json.dumps(server.keyjar.export_jwks()))
        if parts.path == "/authorization":
            endpoint = server.get_endpoint("authorization")
            request = endpoint.parse_request(parts.query, http_info={"headers": {}, "url": ISSUER + parts.path})
            if "error" in request:
                return self.answer(400, request.to_json())
            args = endpoint.process_request(request, http_info={"headers": {}})
            response = endpoint.do_response(request=request, **args)
            return self.answer(302, "", [("Location", response["response"])], "text/plain")
        if parts.path == "/it/requests":
            with lock:
                return self.answer(200, json.dumps(log))
        if parts.path == "/api":
            return self.resource("GET")
        self.answer(404, '{"error":"not_found"}')

    def do_POST(self):
        parts = urlsplit(self.path)
        if parts.path == "/token":
            return self.token()
        if parts.path == "/api":
            return self.resource("POST")
        if parts.path == "/it/nonces":
            settings = json.loads(self.body() or "{}")
            with lock:
                for kind in ("token", "resource"):
                    nonces[kind] = bool(settings.get(kind, False))
            return self.answer(200, "{}")
        if parts.path == "/it/client-key":
            # Ours: the public JWK that verifies dpop-client's request objects (RFC 9101).
            server.keyjar.import_jwks({"keys": [json.loads(self.body())]}, CLIENT_ID)
            return self.answer(200, "{}")
        if parts.path == "/it/reset":
            with lock:
                log.clear()
            return self.answer(200, "{}")
        self.answer(404, '{"error":"not_found"}')

    def token(self):
        text = self.body()
        form = dict(parse_qsl(text))
        self.record(form)
        header = self.headers.get("DPoP")
        # Ours: jti replay and server nonces (§8), which idpyoidc 5.0.0 lacks.
        # htm and htu are left to idpyoidc's add-on, which refuses a mismatch (tested).
        if header:
            try:
                proof = DPoPProof().verify_header(header)
                if proof is None:
                    raise ValueError("not a JWS")
            except Exception as error:  # cryptojwt raises for a bad signature or a malformed JWS
                return self.answer(400, json.dumps({"error": "invalid_dpop_proof", "error_description": str(error)[:200]}))
            with lock:
                if proof["jti"] in seen_jti:
                    return self.answer(400, '{"error":"invalid_dpop_proof","error_description":"jti replayed"}')
                seen_jti.add(proof["jti"])
                if nonces["token"] and proof.get("nonce") != current["token"]:
                    return self.answer(400, '{"error":"use_dpop_nonce","error_description":"a nonce is required"}',
                                       [("DPoP-Nonce", current["token"])])
        endpoint = server.get_endpoint("token")
        http_info = {"headers": {"dpop": header} if header else {}, "url": ISSUER + "/token", "method": "POST"}
        if self.headers.get("Authorization"):
            http_info["headers"]["authorization"] = self.headers["Authorization"]
        try:
            request = endpoint.parse_request(text, http_info=http_info)
        except Exception as error:  # the DPoP add-on raises on a proof it refuses
            return self.answer(400, json.dumps({"error": "invalid_dpop_proof", "error_description": str(error)[:200]}))
        if "error" in request:
            return self.answer(400, request.to_json())
        args = endpoint.process_request(request, http_info=http_info)
        if "error" in args:
            return self.answer(400, json.dumps({k: args[k] for k in ("error", "error_description") if k in args}))
        response = endpoint.do_response(request=request, **args)
        payload = json.loads(response["response"])
        headers = []
        with lock:
            if "access_token" in payload and request.get("dpop_jkt"):
                token_keys[payload["access_token"]] = request["dpop_jkt"]
            if nonces["token"]:
                current["token"] = secrets.token_urlsafe(16)   # rotates after every token
                headers.append(("DPoP-Nonce", current["token"]))
        self.answer(200, json.dumps(payload), headers)

    def resource(self, method):
        """Ours: an RFC 9449 §7.1 resource check over idpyoidc's proof verification."""
        self.record(dict(parse_qsl(self.body())) if method == "POST" else {})

        def refuse(error, extra=()):
            self.answer(401, json.dumps({"error": error}), [("WWW-Authenticate", f'DPoP error="{error}", algs="ES256"')] + list(extra))

        authorization = self.headers.get("Authorization") or ""
        if not authorization.startswith("DPoP "):
            return refuse("invalid_token")
        token = authorization[5:]
        header = self.headers.get("DPoP")
        if not header:
            return refuse("invalid_dpop_proof")
        try:
            proof = verify_proof(header, method, ISSUER + urlsplit(self.path).path)
        except Exception:
            return refuse("invalid_dpop_proof")
        key = key_from_jwk_dict(proof["jwk"])
        thumbprint = key.thumbprint("SHA-256").decode()   # cryptojwt returns it base64url-encoded already
        with lock:
            bound = token_keys.get(token)
            if bound is None:
                return refuse("invalid_token")
            if proof.get("ath") != b64url(hashlib.sha256(token.encode()).digest()) or thumbprint != bound:
                return refuse("invalid_dpop_proof")
            if abs(time.time() - proof["iat"]) > 60 or proof["jti"] in seen_jti:
                return refuse("invalid_dpop_proof")
            seen_jti.add(proof["jti"])
            if nonces["resource"] and proof.get("nonce") != current["resource"]:
                current["resource"] = secrets.token_urlsafe(16)
                return refuse("use_dpop_nonce", [("DPoP-Nonce", current["resource"])])
        self.answer(200, json.dumps({"ok": True, "jkt": thumbprint}))


ThreadingHTTPServer(("127.0.0.1", PORT), Handler).serve_forever()
