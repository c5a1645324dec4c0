"""A protected resource on loopback in front of a real authorization server (issue 32): the
resource's side of RFC 9728 and RFC 6750 §3, which no authorization server package plays.

Python's standard library only. Run: ``python3 resource.py PORT KIND ISSUER [CAFILE]``, where KIND
says how a token is checked with the authorization server that issued it:

- ``glewlwyd``: ``GET`` its ``userinfo_endpoint`` (from its discovery document) with the token (200: a live token of glewlwyd's; its
  ``scope`` is read from the token, a JWT whose signature userinfo has just checked);
- ``authlib``: ``GET ISSUER/it/token-info`` with the token (registration/regserver.py's hook).

What it serves, for ``RESOURCE = http://127.0.0.1:PORT/mcp``:

- ``GET /.well-known/oauth-protected-resource/mcp``: the metadata (RFC 9728 §2): ``resource`` =
  RESOURCE, ``authorization_servers`` = [ISSUER], ``scopes_supported`` ``BASE api``, where BASE is
  ``openid`` for glewlwyd and ``read`` for Authlib (not an OpenID provider);
- ``/mcp`` and below, any method: no token → 401 ``Bearer resource_metadata="…", scope="BASE"``
  (RFC 9728 §5.1); a token the server does not know → 401 ``error="invalid_token"``; ``/mcp/admin``
  with a token without ``api`` → 403 ``error="insufficient_scope", scope="BASE api"``; otherwise 200
  with ``{"path", "scope", "method", "body"}``;
- ``GET /it/seen``: the number of requests that carried an ``Authorization`` header (for tests).

Loopback only. Test data only.
"""

import base64
import json
import ssl
import sys
import threading
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PORT = int(sys.argv[1])
KIND = sys.argv[2]
ISSUER = sys.argv[3]
CAFILE = sys.argv[4] if len(sys.argv) > 4 else None
BASE = f"http://127.0.0.1:{PORT}"
RESOURCE = f"{BASE}/mcp"
METADATA_URL = f"{BASE}/.well-known/oauth-protected-resource/mcp"
CONTEXT = ssl.create_default_context(cafile=CAFILE) if CAFILE else None
# The scope every request needs: `openid` at glewlwyd (an OpenID provider); `read` at Authlib, which
# is not one (a client asking it for `openid` gets no ID token, which OAuthFlow refuses).
BASE = "openid" if KIND == "glewlwyd" else "read"
lock = threading.Lock()
seen = {"authorized": 0}


def userinfo_endpoint():
    """The server's userinfo_endpoint, from its OpenID Connect discovery document (read once)."""
    with lock:
        if "userinfo" not in seen:
            with urllib.request.urlopen(f"{ISSUER}/.well-known/openid-configuration", timeout=10, context=CONTEXT) as answer:
                seen["userinfo"] = json.loads(answer.read())["userinfo_endpoint"]
        return seen["userinfo"]


def scope_of(token):
    """The token's scopes as the authorization server says, or None when it does not accept it."""
    if KIND == "glewlwyd":
        request = urllib.request.Request(userinfo_endpoint(), headers={"Authorization": f"Bearer {token}"})
        try:
            with urllib.request.urlopen(request, timeout=10, context=CONTEXT) as answer:
                if answer.status != 200:
                    return None
        except urllib.error.HTTPError:
            return None
        payload = token.split(".")[1]
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
        return str(claims.get("scope", "")).split()
    request = urllib.request.Request(f"{ISSUER}/it/token-info", headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            info = json.loads(answer.read())
    except urllib.error.HTTPError:
        return None
    return str(info.get("scope", "")).split() if info.get("active") else None


class Handler(BaseHTTPRequestHandler):
    def reply(self, status, body, headers=None):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def challenge(self, status, parameters):
        self.reply(status, {"error": "refused"}, {"WWW-Authenticate": "Bearer " + ", ".join(f'{k}="{v}"' for k, v in parameters)})

    def handle_any(self):
        path = self.path.split("?")[0]
        if self.command == "GET" and path == "/.well-known/oauth-protected-resource/mcp":
            return self.reply(200, {"resource": RESOURCE, "authorization_servers": [ISSUER], "scopes_supported": [BASE, "api"],
                                    "bearer_methods_supported": ["header"], "resource_name": "oauthflow test resource"})
        if self.command == "GET" and path == "/it/seen":
            with lock:
                return self.reply(200, {"authorized": seen["authorized"]})
        if path != "/mcp" and not path.startswith("/mcp/"):
            return self.reply(404, {"error": "not_found"})
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length).decode() if length else ""
        header = self.headers.get("Authorization", "")
        if not header.startswith("Bearer "):
            return self.challenge(401, [("resource_metadata", METADATA_URL), ("scope", BASE)])
        with lock:
            seen["authorized"] += 1
        scopes = scope_of(header[7:])
        if scopes is None:
            return self.challenge(401, [("error", "invalid_token"), ("resource_metadata", METADATA_URL)])
        if path == "/mcp/admin" and "api" not in scopes:
            return self.challenge(403, [("error", "insufficient_scope"), ("scope", f"{BASE} api"), ("resource_metadata", METADATA_URL),
                                        ("error_description", "the admin tools need the api scope")])
        return self.reply(200, {"path": path, "scope": " ".join(scopes), "method": self.command, "body": body})

    do_GET = handle_any
    do_POST = handle_any
    do_PUT = handle_any
    do_DELETE = handle_any

    def log_message(self, format, *args):
        sys.stderr.write("[resource] " + (format % args) + "\n")


if __name__ == "__main__":
    ThreadingHTTPServer(("127.0.0.1", PORT), Handler).serve_forever()
