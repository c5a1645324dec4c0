"""End-to-end proof of CIBA (poll and ping) and dynamic client registration (RFC 7591 / RFC 7592)
against the real glewlwyd 2.7.5 started by ciba/start.sh. Python's standard library, plus the
openssl command for RS256 (private_key_jwt assertions, ID token signatures). Run by proof.sh.

    python3 proof.py PORT HOME

Every check prints "ok - …" or "FAIL - …"; the exit status is the number of failures (0: all
passed). The shapes of the answers are printed as they come ("  <- …"), secrets included: these are
test credentials of a server that lives for one run.
"""

import hashlib
import http.server
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import uuid

from glewlwyd_api import Server, Session
from proofkit import b64url, basic, check, json_call, pkce, post_form, section, show, unb64url
import proofkit

HERE = os.path.dirname(os.path.abspath(__file__))
server = Server(sys.argv[1], sys.argv[2])
proofkit.use(server)
ISSUER = f"{server.base}/api/oidc"
CIBA_GRANT = "urn:openid:params:grant-type:ciba"
SECRETS = {
    "ciba-secret": "ciba-secret-value-0123456789abcdef",
    "ciba-post": "ciba-post-value-0123456789abcdef",
    "ciba-ping": "ciba-ping-value-0123456789abcdef",
    "dcr-issuer": "dcr-issuer-value-0123456789abcdef",
}
REDIRECT = "http://127.0.0.1:9999/callback"
# --- JOSE with openssl --------------------------------------------------------------------------

def jwt_claims(token):
    header, payload, _ = token.split(".")
    return json.loads(unb64url(header)), json.loads(unb64url(payload))


def rs256_sign(key_file, header, claims):
    signing_input = f"{b64url(json.dumps(header).encode())}.{b64url(json.dumps(claims).encode())}"
    signature = subprocess.run(["openssl", "dgst", "-sha256", "-sign", key_file], input=signing_input.encode(),
                               check=True, capture_output=True).stdout
    return f"{signing_input}.{b64url(signature)}"


def rs256_verify(public_pem_file, token):
    signing_input, _, signature = token.rpartition(".")
    with tempfile.NamedTemporaryFile() as handle:
        handle.write(unb64url(signature))
        handle.flush()
        done = subprocess.run(["openssl", "dgst", "-sha256", "-verify", public_pem_file, "-signature", handle.name],
                              input=signing_input.encode(), capture_output=True)
    return done.returncode == 0


def client_assertion(client_id, audience, kid=None):
    now = int(time.time())
    return rs256_sign(server.pki("client.key"), {"alg": "RS256", "typ": "JWT", **({"kid": kid} if kid else {})},
                      {"iss": client_id, "sub": client_id, "aud": audience, "jti": str(uuid.uuid4()), "iat": now, "exp": now + 60})


def assertion_form(client_id, audience, kid=None, with_client_id=True):
    """private_key_jwt (RFC 7523 §2.2) with pki/client.key. Glewlwyd's CIBA token request refuses
    an assertion without client_id in the form (400 unauthorized_client), so it is sent by default,
    as RFC 7521 §4.2 allows."""
    return {**({"client_id": client_id} if with_client_id else {}),
            "client_assertion_type": "urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
            "client_assertion": client_assertion(client_id, audience, kid)}


def client_public_jwk():
    modulus = subprocess.run(["openssl", "rsa", "-in", server.pki("client.key"), "-noout", "-modulus"], check=True,
                             capture_output=True, text=True).stdout.strip().split("=", 1)[1]
    return {"kty": "RSA", "n": b64url(bytes.fromhex(modulus)), "e": "AQAB", "use": "sig", "alg": "RS256", "kid": "client"}


def half_hash(value):
    return b64url(hashlib.sha256(value.encode()).digest()[:16])


def check_id_token(id_token, client_id, access_token, extra=None):
    header, claims = jwt_claims(id_token)
    print(f"  ID token header {json.dumps(header)}")
    print(f"  ID token claims {json.dumps(claims)}")
    check("the ID token is RS256, signed with the server's key (pki/oidc.pub)",
          header.get("alg") == "RS256" and rs256_verify(server.pki("oidc.pub"), id_token))
    check("ID token: iss is the issuer, aud and azp the client, exp after iat",
          claims.get("iss") == ISSUER and claims.get("aud") == client_id and claims.get("azp") == client_id
          and claims.get("exp", 0) > claims.get("iat", 0), claims)
    check("ID token: at_hash is the left half of SHA-256 of the access token", claims.get("at_hash") == half_hash(access_token))
    for name, value in (extra or {}).items():
        check(f"ID token: {name} = {value!r}", claims.get(name) == value, claims.get(name))
    return claims


# --- the person's side (user.py, the helper the Swift tests call) ---------------------------------

def user(*arguments):
    done = subprocess.run([sys.executable, os.path.join(HERE, "user.py"), "--port", str(server.port), "--home", server.home, *arguments],
                          capture_output=True, text=True, timeout=60)
    return done.returncode, done.stdout.strip(), done.stderr.strip()


# --- CIBA ---------------------------------------------------------------------------------------

def client_auth(client_id, endpoint):
    """(form fields, headers) that authenticate `client_id` at `endpoint` (ciba or token), as each
    provisioned client is registered: ciba-jwt private_key_jwt, ciba-post client_secret_post, the
    others client_secret_basic."""
    if client_id == "ciba-jwt":
        return assertion_form(client_id, f"{ISSUER}/{endpoint}"), None
    if client_id == "ciba-post":
        return {"client_id": client_id, "client_secret": SECRETS[client_id]}, None
    return {}, basic(client_id, SECRETS[client_id])


def ciba_request(client_id, form, label="POST /ciba"):
    auth, headers = client_auth(client_id, "ciba")
    return post_form("/api/oidc/ciba", {**auth, **form}, headers, label)


def ciba_poll(client_id, auth_req_id, label="POST /token (ciba)"):
    auth, headers = client_auth(client_id, "token")
    return post_form("/api/oidc/token", {**auth, "grant_type": CIBA_GRANT, "auth_req_id": auth_req_id}, headers, label)


def hint(username="alice"):
    return json.dumps({"username": username})


def ciba_flows():
    section("discovery")
    status, metadata, _ = json_call("GET", "/api/oidc/.well-known/openid-configuration")
    check("discovery answers", status == 200)
    for key in ("backchannel_authentication_endpoint", "backchannel_token_delivery_modes_supported",
                "backchannel_user_code_parameter_supported", "registration_endpoint", "grant_types_supported",
                "token_endpoint_auth_methods_supported"):
        print(f"  {key}: {json.dumps(metadata.get(key))}")
    check("backchannel_authentication_endpoint is ISSUER/ciba", metadata.get("backchannel_authentication_endpoint") == f"{ISSUER}/ciba")
    check("delivery modes poll and ping", metadata.get("backchannel_token_delivery_modes_supported") == ["poll", "ping"])
    check("backchannel_user_code_parameter_supported", metadata.get("backchannel_user_code_parameter_supported") is True)
    check("registration_endpoint is ISSUER/register", metadata.get("registration_endpoint") == f"{ISSUER}/register")
    check("grant_types_supported lists the CIBA grant", CIBA_GRANT in metadata.get("grant_types_supported", []))

    section("CIBA poll, client_secret_basic: request, pending, the person approves, tokens")
    binding = "Ticket 4711"
    status, answer = ciba_request("ciba-secret", {"scope": "openid api", "login_hint": hint(), "binding_message": binding,
                                                  "user_code": "alice-code-4711", "requested_expiry": "120"})
    check("200 with auth_req_id, expires_in = requested_expiry, interval 5",
          status == 200 and isinstance(answer.get("auth_req_id"), str) and answer.get("expires_in") == 120 and answer.get("interval") == 5, answer)
    check("auth_req_id is 32 characters of [A-Za-z0-9]", len(answer["auth_req_id"]) == 32 and answer["auth_req_id"].isalnum())
    auth_req_id = answer["auth_req_id"]
    pending = [ciba_poll("ciba-secret", auth_req_id, label=None) for _ in range(6)]
    show("POST /token (ciba), 6 times within a second", pending[0][0], pending[0][1])
    check("every early poll is 400 authorization_pending; never slow_down",
          all(s == 400 and a == {"error": "authorization_pending"} for s, a in pending), pending)
    code, out, err = user("list")
    listed = json.loads(out) if code == 0 else []
    print(f"  user.py list -> {out[:600]}")
    mine = [r for r in listed if r.get("client_id") == "ciba-secret" and r.get("binding_message") == binding]
    check("the user's list shows the request with its binding message and scopes",
          len(mine) == 1 and mine[0].get("scopes") == ["openid", "api"], listed)
    code, out, err = user("approve", "--client-id", "ciba-secret", "--binding-message", binding)
    print(f"  user.py approve -> {out[:400]}")
    check("user.py approve: glewlwyd answers ciba_message=complete", code == 0 and json.loads(out).get("result") == "complete", (code, out, err))
    status, tokens = ciba_poll("ciba-secret", auth_req_id)
    check("200 with access, refresh and ID token; token_type 'bearer', scope 'openid api', auth_req_id echoed",
          status == 200 and {"access_token", "refresh_token", "id_token"} <= set(tokens or {}) and tokens.get("token_type") == "bearer"
          and tokens.get("scope") == "openid api" and tokens.get("auth_req_id") == auth_req_id, tokens)
    if status == 200:
        claims = check_id_token(tokens["id_token"], "ciba-secret", tokens["access_token"],
                                {"urn:openid:params:jwt:claim:auth_req_id": auth_req_id,
                                 "urn:openid:params:jwt:claim:rt_hash": half_hash(tokens["refresh_token"])})
        check("ID token has no nonce (CIBA sends none)", "nonce" not in claims)
        refreshed = post_form("/api/oidc/token", {"grant_type": "refresh_token", "refresh_token": tokens["refresh_token"]},
                              basic("ciba-secret", SECRETS["ciba-secret"]), "POST /token (refresh_token)")
        check("the refresh token works", refreshed[0] == 200 and "access_token" in refreshed[1])
    status, answer = ciba_poll("ciba-secret", auth_req_id, "POST /token (ciba), after the tokens")
    check("polling again after the tokens: 400 access_denied (the request is closed), not invalid_grant",
          status == 400 and answer == {"error": "access_denied"}, answer)

    for client_id in ("ciba-post", "ciba-jwt"):
        section(f"CIBA poll, {client_id}")
        status, answer = ciba_request(client_id, {"scope": "openid", "login_hint": hint()})
        check(f"{client_id}: 200 with the default expiry 600", status == 200 and answer.get("expires_in") == 600, answer)
        if status != 200:
            continue
        check(f"{client_id}: pending first", ciba_poll(client_id, answer["auth_req_id"], label=None) == (400, {"error": "authorization_pending"}))
        code, out, err = user("approve", "--client-id", client_id)
        check(f"{client_id}: approved", code == 0, (out, err))
        status, tokens = ciba_poll(client_id, answer["auth_req_id"], label=None)
        check(f"{client_id}: tokens", status == 200 and "id_token" in tokens, tokens)
    status, answer = post_form("/api/oidc/ciba", {**assertion_form("ciba-jwt", ISSUER), "scope": "openid", "login_hint": hint()},
                               label="POST /ciba, private_key_jwt with aud = the issuer")
    check("private_key_jwt at /ciba wants aud = ISSUER/ciba exactly: aud = the issuer is 401", status == 401, (status, answer))
    status, answer = ciba_request("ciba-jwt", {"scope": "openid", "login_hint": hint(), "binding_message": "no client_id"}, None)
    status, answer = post_form("/api/oidc/token", {**assertion_form("ciba-jwt", f"{ISSUER}/token", with_client_id=False),
                                                   "grant_type": CIBA_GRANT, "auth_req_id": answer["auth_req_id"]},
                               label="POST /token (ciba), private_key_jwt without client_id in the form")
    check("the CIBA token request with an assertion but no client_id: 400 unauthorized_client (glewlwyd wants client_id too)",
          (status, answer) == (400, {"error": "unauthorized_client"}), (status, answer))
    user("deny", "--binding-message", "no client_id")

    section("CIBA: the other hints, a replayed assertion, the person's consent")
    status, answer = ciba_request("ciba-secret", {"scope": "openid", "login_hint": hint(), "binding_message": "first login"}, None)
    user("approve", "--binding-message", "first login")
    status, tokens = ciba_poll("ciba-secret", answer["auth_req_id"], label=None)
    id_token = tokens["id_token"]
    sub = jwt_claims(id_token)[1]["sub"]
    for name, form, want in [
        ("login_hint {\"sub\": the ID token's sub}", {"login_hint": json.dumps({"sub": sub})}, 200),
        ("login_hint with a sub and another user's username", {"login_hint": json.dumps({"sub": sub, "username": "admin"})}, 400),
        ("id_token_hint: an ID token issued to this client", {"id_token_hint": id_token}, 200),
    ]:
        status, answer = ciba_request("ciba-secret", {"scope": "openid", "binding_message": "hinted", **form}, None)
        check(f"{name}: {want}", status == want, (status, answer))
        if status == 200:
            check("... the request is alice's", user("deny", "--binding-message", "hinted", "--wait", "2")[0] == 0)
    status, answer = ciba_request("ciba-post", {"scope": "openid", "id_token_hint": id_token}, None)
    check("id_token_hint: an ID token of another client: 400 invalid_request", (status, answer) == (400, {"error": "invalid_request"}), answer)
    now = int(time.time())
    hint_token = rs256_sign(server.pki("client.key"), {"alg": "RS256", "typ": "JWT"},
                            {"iss": "ciba-jwt", "aud": ISSUER, "username": "alice", "iat": now, "exp": now + 60, "jti": str(uuid.uuid4())})
    status, answer = ciba_request("ciba-jwt", {"scope": "openid", "login_hint_token": hint_token, "binding_message": "hinted"}, None)
    check("login_hint_token: a JWT signed with the client's key, claim username: 200", status == 200, answer)
    user("deny", "--binding-message", "hinted", "--wait", "2")
    replayed = assertion_form("ciba-jwt", f"{ISSUER}/ciba")
    first = post_form("/api/oidc/ciba", {**replayed, "scope": "openid", "login_hint": hint(), "binding_message": "replay"})
    second = post_form("/api/oidc/ciba", {**replayed, "scope": "openid", "login_hint": hint()})
    check("the same client assertion twice: 200, then 401 (its jti is kept)", (first[0], second[0]) == (200, 401), (first, second))
    user("deny", "--binding-message", "replay", "--wait", "2")
    user("grant", "ciba-post", "openid")
    status, answer = ciba_request("ciba-post", {"scope": "openid api", "login_hint": hint(), "binding_message": "narrowed"}, None)
    code, out, err = user("approve", "--binding-message", "narrowed", "--no-grant")
    check("approving 'openid api' when only openid is granted: complete", code == 0, (out, err))
    status, tokens = ciba_poll("ciba-post", answer["auth_req_id"], label=None)
    check("... and the token's scope is narrowed to 'openid' without an error", status == 200 and tokens.get("scope") == "openid", tokens)

    section("CIBA denial")
    status, answer = ciba_request("ciba-secret", {"scope": "openid", "login_hint": hint(), "binding_message": "deny me"})
    code, out, err = user("deny", "--binding-message", "deny me")
    print(f"  user.py deny -> {out[:300]}")
    check("user.py deny: ciba_message=cancelled", code == 0 and json.loads(out).get("result") == "cancelled", (code, out, err))
    check("the poll after a denial: 400 access_denied", ciba_poll("ciba-secret", answer["auth_req_id"]) == (400, {"error": "access_denied"}))
    code, out, err = user("list")
    check("a denied request leaves the user's list", "deny me" not in out, out)

    section("CIBA expiry")
    status, answer = ciba_request("ciba-secret", {"scope": "openid", "login_hint": hint(), "requested_expiry": "1",
                                                  "binding_message": "expire me"})
    check("requested_expiry 1: 200, expires_in 1", status == 200 and answer.get("expires_in") == 1, answer)
    started = time.monotonic()
    results = []
    # Glewlwyd compares whole seconds (now > expires_at), so the request outlives expires_in by up to 1 s.
    while time.monotonic() - started < 4:
        results.append(ciba_poll("ciba-secret", answer["auth_req_id"], label=None))
        if results[-1][1] != {"error": "authorization_pending"}:
            break
        time.sleep(0.25)
    elapsed = time.monotonic() - started
    show(f"POST /token (ciba) after {elapsed:.2f} s", *results[-1])
    check("after expires_in: 400 expired_token", results[-1] == (400, {"error": "expired_token"}), results[-1])
    code, out, err = user("list")
    check("an expired request leaves the user's list", "expire me" not in out, out)
    code, out, err = user("approve", "--binding-message", "expire me", "--wait", "0")
    check("user.py approve of an expired request: exit 1, nothing matched", code == 1, (code, out, err))

    section("CIBA: what glewlwyd refuses and what it accepts")
    cases = [
        ("login_hint a bare username", {"scope": "openid", "login_hint": "alice"}, 400, {"error": "invalid_request"}),
        ("login_hint an e-mail", {"scope": "openid", "login_hint": "alice@example.com"}, 400, {"error": "invalid_request"}),
        ("login_hint of an unknown user", {"scope": "openid", "login_hint": hint("nobody")}, 400, {"error": "invalid_request"}),
        ("no hint", {"scope": "openid"}, 400, {"error": "invalid_request"}),
        ("two hints", {"scope": "openid", "login_hint": hint(), "id_token_hint": "x.y.z"}, 400, {"error": "invalid_request"}),
        ("no scope", {"login_hint": hint()}, 403, {"error": "invalid_scope"}),
        ("binding_message of 257 characters", {"scope": "openid", "login_hint": hint(), "binding_message": "b" * 257}, 400,
         {"error": "invalid_binding_message"}),
        ("a wrong user_code", {"scope": "openid", "login_hint": hint(), "user_code": "wrong"}, 400, {"error": "invalid_user_code"}),
        ("requested_expiry above the maximum 3600", {"scope": "openid", "login_hint": hint(), "requested_expiry": "3601"}, 400,
         {"error": "invalid_request"}),
        ("requested_expiry 0", {"scope": "openid", "login_hint": hint(), "requested_expiry": "0"}, 400, {"error": "invalid_request"}),
        ("requested_expiry not a number", {"scope": "openid", "login_hint": hint(), "requested_expiry": "soon"}, 400,
         {"error": "invalid_request"}),
    ]
    for name, form, want_status, want in cases:
        status, answer = ciba_request("ciba-secret", form, label=None)
        check(f"{name}: {want_status} {want['error']}", (status, answer) == (want_status, want), (status, answer))
    status, answer = post_form("/api/oidc/ciba", {"scope": "openid", "login_hint": hint()}, basic("ciba-secret", "wrong"), None)
    check("a wrong client secret: 403 invalid_client (not 401)", (status, answer) == (403, {"error": "invalid_client"}), (status, answer))
    status, answer = post_form("/api/oidc/ciba", {"scope": "openid", "login_hint": hint()}, basic("dcr-issuer", SECRETS["dcr-issuer"]), None)
    check("a client without the CIBA grant: 403 invalid_client", (status, answer) == (403, {"error": "invalid_client"}), (status, answer))
    status, answer = ciba_request("ciba-secret", {"scope": "openid", "login_hint": hint(), "requested_expiry": "12abc"}, label=None)
    check("requested_expiry '12abc' is read as 12 (strtol)", status == 200 and answer.get("expires_in") == 12, answer)
    hostile = "\x1b[31mred\x1b[0m\r\nsecond line\x07"
    status, answer = ciba_request("ciba-secret", {"scope": "openid", "login_hint": hint(), "binding_message": hostile},
                                  "POST /ciba, binding_message with ESC, CR LF and BEL")
    check("a binding message with control characters is accepted (200)", status == 200, answer)
    code, out, err = user("list")
    check("... and shown to the user verbatim", any(r.get("binding_message") == hostile for r in json.loads(out)), out)
    code, out, err = user("deny", "--binding-message", hostile)
    check("user.py selects it by that exact message", code == 0, (out, err))
    check("an unknown auth_req_id: 400 invalid_grant",
          ciba_poll("ciba-secret", "x" * 32, label=None) == (400, {"error": "invalid_grant"}))
    status, answer = ciba_request("ciba-secret", {"scope": "openid", "login_hint": hint(), "binding_message": "not yours"}, label=None)
    check("another client's auth_req_id: 403 unauthorized_client",
          ciba_poll("ciba-post", answer["auth_req_id"], label=None) == (403, {"error": "unauthorized_client"}))
    user("deny", "--binding-message", "not yours")


class Notifications(http.server.BaseHTTPRequestHandler):
    received = []

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        Notifications.received.append({"path": self.path, "authorization": self.headers.get("Authorization"),
                                       "content_type": self.headers.get("Content-Type"), "body": body.decode()})
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args):
        pass


def ping_flow():
    section("CIBA ping: glewlwyd calls the client's notification endpoint on loopback")
    listener = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Notifications)
    threading.Thread(target=listener.serve_forever, daemon=True).start()
    endpoint = f"http://127.0.0.1:{listener.server_address[1]}/ciba-notify"
    try:
        code, out, err = user("set-ping-endpoint", "ciba-ping", endpoint)
        check(f"user.py set-ping-endpoint ciba-ping {endpoint}", code == 0, err)
        status, answer = ciba_request("ciba-ping", {"scope": "openid", "login_hint": hint(), "client_notification_token": "short"}, None)
        check("a client_notification_token under 22 characters: 400 invalid_request", (status, answer) == (400, {"error": "invalid_request"}))
        status, answer = ciba_request("ciba-ping", {"scope": "openid", "login_hint": hint()}, None)
        check("ping without client_notification_token: 400 invalid_request", (status, answer) == (400, {"error": "invalid_request"}))
        notification_token = "notify-" + b64url(os.urandom(24))
        status, answer = ciba_request("ciba-ping", {"scope": "openid", "login_hint": hint(), "client_notification_token": notification_token,
                                                    "binding_message": "ping me"})
        check("ping request: 200 with auth_req_id and expires_in, no interval", status == 200 and "interval" not in answer, answer)
        check("ping mode may poll too: 400 authorization_pending", ciba_poll("ciba-ping", answer["auth_req_id"], label=None)
              == (400, {"error": "authorization_pending"}))
        check("no notification before the person answers", Notifications.received == [])
        code, out, err = user("approve", "--binding-message", "ping me")
        check("approved", code == 0, (out, err))
        # glewlwyd sends the ping inside the approval request, before it answers the person.
        print(f"  notifications received: {json.dumps(Notifications.received)}")
        check("one ping: POST, Authorization: Bearer <client_notification_token>, JSON {auth_req_id}",
              len(Notifications.received) == 1 and Notifications.received[0]["authorization"] == f"Bearer {notification_token}"
              and json.loads(Notifications.received[0]["body"]) == {"auth_req_id": answer["auth_req_id"]}
              and Notifications.received[0]["path"] == "/ciba-notify", Notifications.received)
        status, tokens = ciba_poll("ciba-ping", answer["auth_req_id"])
        check("after the ping, the token request gives the tokens", status == 200 and "id_token" in tokens, tokens)
        Notifications.received.clear()
        status, answer = ciba_request("ciba-ping", {"scope": "openid", "login_hint": hint(), "client_notification_token": notification_token,
                                                    "binding_message": "ping denied"}, None)
        code, out, err = user("deny", "--binding-message", "ping denied")
        check("denied", code == 0, (out, err))
        check("a denial sends no ping (CIBA Core §10.2 wants one): the client learns it only by polling",
              Notifications.received == [], Notifications.received)
        check("... which answers 400 access_denied", ciba_poll("ciba-ping", answer["auth_req_id"], label=None) == (400, {"error": "access_denied"}))
        code, out, err = user("set-ping-endpoint", "ciba-ping", "http://127.0.0.1:9/nobody-listens")
        status, answer = ciba_request("ciba-ping", {"scope": "openid", "login_hint": hint(), "client_notification_token": notification_token,
                                                    "binding_message": "ping nobody"}, None)
        code, out, err = user("approve", "--binding-message", "ping nobody")
        check("a notification endpoint that refuses the connection: the approval still completes", code == 0, (out, err))
        check("... and the poll gives the tokens", ciba_poll("ciba-ping", answer["auth_req_id"], label=None)[0] == 200)
    finally:
        listener.shutdown()
        listener.server_close()


# --- registration -------------------------------------------------------------------------------

def code_login(client_id, token_auth, scope="openid", label_prefix=""):
    """Authorization code + PKCE: the browser step through user.py authorize (login as alice, the
    URL with g_continue), then the code exchange with `token_auth` (headers, form) applied."""
    verifier, challenge = pkce()
    state, nonce = b64url(os.urandom(12)), b64url(os.urandom(12))
    url = f"{ISSUER}/auth?" + urllib.parse.urlencode({
        "response_type": "code", "client_id": client_id, "redirect_uri": REDIRECT, "scope": scope, "state": state,
        "nonce": nonce, "code_challenge": challenge, "code_challenge_method": "S256"})
    code, out, err = user("authorize", url)
    print(f"  {label_prefix}user.py authorize -> {out[:300]}")
    if code != 0:
        return None, (code, out, err)
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(out).query)
    if query.get("state") != [state] or "code" not in query:
        return None, query
    headers, form = token_auth()
    status, answer = post_form("/api/oidc/token", {**form, "grant_type": "authorization_code", "code": query["code"][0],
                                                   "redirect_uri": REDIRECT, "code_verifier": verifier},
                               headers, f"{label_prefix}POST /token (authorization_code)")
    return (status, answer, nonce), query


def register(body, token=None, path="/api/oidc/register", label="POST /register"):
    return json_call("POST", path, body, token, label)


def registration_flows():
    section("RFC 7591: token_endpoint_auth_method none")
    status, reg, _ = register({"redirect_uris": [REDIRECT], "token_endpoint_auth_method": "none", "client_name": "public by none",
                               "grant_types": ["authorization_code", "refresh_token"]})
    check("registered: 200 (RFC 7591 §3.2.1 says 201)", status == 200, status)
    check("no client_secret; client_secret_expires_at 0; registration_access_token and registration_client_uri",
          "client_secret" not in reg and reg.get("client_secret_expires_at") == 0 and len(reg.get("registration_access_token", "")) == 32
          and reg.get("registration_client_uri") == f"{ISSUER}/register/{reg['client_id']}", reg)
    admin = Session(server, "admin", "password")
    stored = admin.call("GET", f"/client/{reg['client_id']}")
    print(f"  <- admin GET /api/client/{reg['client_id']}: {json.dumps(stored)}")
    check("glewlwyd stored it as a confidential client with no secret (the 'none' quirk)",
          stored.get("confidential") is True and "client_secret" not in stored, stored)
    result, query = code_login(reg["client_id"], lambda: ({}, {"client_id": reg["client_id"]}), label_prefix="none: ")
    check("its code login fails at the token endpoint (the code is issued, the exchange without a secret is refused)",
          result is not None and result[0] in (400, 401, 403), (result, query))

    section("RFC 7591: none + glewlwyd's client_confidential false: a real public client")
    status, reg, _ = register({"redirect_uris": [REDIRECT], "token_endpoint_auth_method": "none", "client_confidential": False,
                               "client_name": "public", "grant_types": ["authorization_code", "refresh_token"]})
    stored = admin.call("GET", f"/client/{reg['client_id']}")
    check("stored as confidential false", status == 200 and stored.get("confidential") is False, stored)
    result, query = code_login(reg["client_id"], lambda: ({}, {"client_id": reg["client_id"]}), label_prefix="public: ")
    check("code + PKCE login without a secret: tokens", result is not None and result[0] == 200 and "id_token" in result[1], (result, query))

    section("RFC 7591 / RFC 7592: a confidential client (client_secret_basic): register, read, update, log in, delete")
    body = {"redirect_uris": [REDIRECT], "token_endpoint_auth_method": "client_secret_basic", "client_name": "confidential",
            "grant_types": ["authorization_code", "refresh_token"], "response_types": ["code"], "application_type": "native",
            "contacts": ["ops@example.com"], "client_uri": "https://client.example.com/"}
    status, reg, _ = register(body)
    client_id, secret, rat, uri = reg.get("client_id"), reg.get("client_secret"), reg.get("registration_access_token"), reg.get("registration_client_uri")
    check("200 with client_id (16 of [a-z0-9]), client_secret (32), client_id_issued_at, client_secret_expires_at 0",
          status == 200 and len(client_id) == 16 and len(secret) == 32 and isinstance(reg.get("client_id_issued_at"), int)
          and reg.get("client_secret_expires_at") == 0, reg)
    path = urllib.parse.urlsplit(uri).path
    status, read, _ = json_call("GET", path, token=rat, label="GET /register/ID")
    check("read: 200; token_endpoint_auth_method comes back as an array; no registration_access_token, registration_client_uri, "
          "client_id_issued_at or client_secret_expires_at; the client_secret is in it",
          status == 200 and read.get("token_endpoint_auth_method") == ["client_secret_basic"] and "registration_access_token" not in read
          and "registration_client_uri" not in read and "client_id_issued_at" not in read and read.get("client_secret") == secret, read)
    check("read drops metadata glewlwyd's client module does not store (contacts, client_uri, application_type)",
          not ({"contacts", "client_uri", "application_type"} & set(read)), read)
    status, _, _ = json_call("GET", path, token="x" * 32, label=None)
    check("read with a wrong registration access token: 401", status == 401, status)
    status, _, _ = json_call("GET", path, label=None)
    check("read without a token: 401", status == 401, status)

    update = {**body, "client_id": client_id, "client_name": "confidential, renamed",
              "redirect_uris": [REDIRECT, "http://127.0.0.1:9998/callback"]}
    status, updated, _ = json_call("PUT", path, update, rat, "PUT /register/ID")
    new_secret = (updated or {}).get("client_secret")
    check("update: 200, the answer is the request plus a NEW client_secret (every update rotates it)",
          status == 200 and updated.get("client_name") == "confidential, renamed" and new_secret and new_secret != secret, updated)
    check("the update answer has no registration_access_token; the old one still works",
          "registration_access_token" not in updated and json_call("GET", path, token=rat)[0] == 200)
    status, read, _ = json_call("GET", path, token=rat, label=None)
    check("read after update: the new name, both redirect URIs, the new secret",
          read.get("client_name") == "confidential, renamed" and len(read.get("redirect_uris", [])) == 2 and read.get("client_secret") == new_secret, read)
    status, answer, _ = json_call("PUT", path, {**update, "client_id": "someone-else"}, rat, "PUT /register/ID with another client_id")
    check("update with another client_id in the body: 400 invalid_client_metadata",
          status == 400 and answer.get("error") == "invalid_client_metadata", answer)
    status, answer = post_form("/api/oidc/token", {"grant_type": "client_credentials"}, basic(client_id, secret), None)
    check("the first secret no longer authenticates", status in (401, 403) or answer.get("error") in ("invalid_client", "unauthorized_client"),
          (status, answer))
    result, query = code_login(client_id, lambda: (basic(client_id, new_secret), {}), label_prefix="confidential: ")
    check("code + PKCE login with the registered client and its (new) secret: tokens", result is not None and result[0] == 200, (result, query))
    if result and result[0] == 200:
        check("authorization response has no iss (RFC 9207)", "iss" not in query, query)
        check_id_token(result[1]["id_token"], client_id, result[1]["access_token"], {"nonce": result[2]})

    status, answer, _ = json_call("DELETE", path, token=rat, label="DELETE /register/ID")
    check("delete: 200 with an empty body (RFC 7592 §2.3 says 204)", status == 200, status)
    check("read after delete: 401", json_call("GET", path, token=rat)[0] == 401)
    stored = admin.call("GET", f"/client/{client_id}")
    check("the client is disabled, not removed (admin view: enabled false)", stored.get("enabled") is False, stored)
    status, answer = post_form("/api/oidc/token", {"grant_type": "refresh_token", "refresh_token": result[1]["refresh_token"]} if result else {},
                               basic(client_id, new_secret), "POST /token (refresh) with the deleted client")
    check("the deleted client cannot use its refresh token", status != 200, (status, answer))
    code, out, err = user("authorize", f"{ISSUER}/auth?" + urllib.parse.urlencode({
        "response_type": "code", "client_id": client_id, "redirect_uri": REDIRECT, "scope": "openid", "state": "s"}))
    print(f"  user.py authorize with the deleted client -> {out[:300]}")
    check("an authorization request for the deleted client never reaches its redirect URI", not out.startswith(REDIRECT), out)

    section("RFC 7591: private_key_jwt with a jwks sent at registration")
    status, reg, _ = register({"redirect_uris": [REDIRECT], "token_endpoint_auth_method": "private_key_jwt", "client_name": "jwt",
                               "jwks": {"keys": [client_public_jwk()]}, "grant_types": ["authorization_code", "refresh_token"]})
    check("registered without a client_secret", status == 200 and "client_secret" not in reg, reg)
    status, read, _ = json_call("GET", urllib.parse.urlsplit(reg["registration_client_uri"]).path, token=reg["registration_access_token"],
                                label="GET /register/ID (private_key_jwt)")
    check("read returns the jwks", status == 200 and read.get("jwks", {}).get("keys", [{}])[0].get("n") == client_public_jwk()["n"], read)
    result, query = code_login(reg["client_id"], lambda: ({}, assertion_form(reg["client_id"], f"{ISSUER}/token")), label_prefix="jwt, no kid: ")
    check("with a jwks, an assertion without kid is refused: 403 (glewlwyd looks the key up by kid only)",
          result is not None and result[0] == 403, (result, query))
    result, query = code_login(reg["client_id"], lambda: ({}, assertion_form(reg["client_id"], f"{ISSUER}/token", kid="client")),
                               label_prefix="jwt: ")
    check("code + PKCE login with a client assertion (kid of the registered key, aud = ISSUER/token): tokens",
          result is not None and result[0] == 200 and "id_token" in result[1], (result, query))
    status, answer, _ = json_call("DELETE", urllib.parse.urlsplit(reg["registration_client_uri"]).path, token=reg["registration_access_token"])
    check("deleted", status == 200)

    section("RFC 7591: a registered CIBA client")
    status, reg, _ = register({"redirect_uris": [REDIRECT], "token_endpoint_auth_method": "client_secret_basic", "client_name": "ciba",
                               "grant_types": [CIBA_GRANT], "backchannel_token_delivery_mode": "poll"})
    check("registered with the CIBA grant and poll mode", status == 200 and reg.get("backchannel_token_delivery_mode") == "poll", reg)
    SECRETS[reg["client_id"]] = reg["client_secret"]
    status, answer = ciba_request(reg["client_id"], {"scope": "openid", "login_hint": hint(), "binding_message": "registered"}, None)
    check("its CIBA request: 200", status == 200, answer)
    code, out, err = user("approve", "--binding-message", "registered")
    status, tokens = ciba_poll(reg["client_id"], answer["auth_req_id"], label=None)
    check("approved; tokens", code == 0 and status == 200 and "id_token" in tokens, (out, tokens))

    section("RFC 7591: what /register refuses")
    for name, body, want in [
        ("no redirect_uris", {"client_name": "x"}, "invalid_redirect_uri"),
        ("an http redirect URI off loopback", {"redirect_uris": ["http://example.com/cb"]}, "invalid_redirect_uri"),
        ("a redirect URI with credentials", {"redirect_uris": ["https://user@example.com/cb"]}, "invalid_redirect_uri"),
        ("an unknown token_endpoint_auth_method", {"redirect_uris": [REDIRECT], "token_endpoint_auth_method": "tls_client_auth"},
         "invalid_client_metadata"),
        ("an unknown grant type", {"redirect_uris": [REDIRECT], "grant_types": ["urn:ietf:params:oauth:grant-type:device_code"]},
         "invalid_client_metadata"),
        ("ping without a notification endpoint", {"redirect_uris": [REDIRECT], "grant_types": [CIBA_GRANT],
                                                  "backchannel_token_delivery_mode": "ping"}, "invalid_client_metadata"),
    ]:
        status, answer, _ = register(body, label=None)
        check(f"{name}: 400 {want}", status == 400 and (answer or {}).get("error") == want, (status, answer))
    status, answer, _ = register({"redirect_uris": ["http://localhost:1/cb", "http://[::1]:2/cb", "https://app.example.com/cb"]}, label=None)
    check("http://localhost, http://[::1] and https redirect URIs are accepted", status == 200, answer)

    section("RFC 7592: a registration access token used for another client")
    _, first, _ = register({"redirect_uris": [REDIRECT], "token_endpoint_auth_method": "client_secret_basic"}, label=None)
    _, second, _ = register({"redirect_uris": [REDIRECT], "token_endpoint_auth_method": "client_secret_basic"}, label=None)
    first_path = urllib.parse.urlsplit(first["registration_client_uri"]).path
    second_path = urllib.parse.urlsplit(second["registration_client_uri"]).path
    check("the first client's token at the second client's URI: 401", json_call("GET", second_path, token=first["registration_access_token"])[0] == 401)
    check("... and glewlwyd then disables the first client's token: its own read is 401",
          json_call("GET", first_path, token=first["registration_access_token"])[0] == 401)
    check("the second client's token is untouched", json_call("GET", second_path, token=second["registration_access_token"])[0] == 200)

    section("RFC 7591 §3: an initial access token (instance dcr, register-client-auth-scope [api], one use)")
    status, answer, headers = register({"redirect_uris": [REDIRECT]}, path="/api/dcr/register", label="POST /api/dcr/register without a token")
    check("without a token: 401", status == 401, status)
    status, token = post_form("/api/dcr/token", {"grant_type": "client_credentials", "scope": "api"},
                              basic("dcr-issuer", SECRETS["dcr-issuer"]), "POST /api/dcr/token (client_credentials, scope api)")
    check("dcr-issuer gets an access token with scope api", status == 200 and token.get("scope") == "api", token)
    initial = token["access_token"]
    status, reg, _ = register({"redirect_uris": [REDIRECT], "token_endpoint_auth_method": "client_secret_basic"}, initial,
                              "/api/dcr/register", "POST /api/dcr/register with the token")
    check("with it: 200, a client with a secret", status == 200 and "client_secret" in reg, reg)
    status, _, _ = register({"redirect_uris": [REDIRECT]}, initial, "/api/dcr/register", None)
    check("the same token again: 401 (register-client-token-one-use)", status == 401, status)
    status, token = post_form("/api/oidc/token", {"grant_type": "client_credentials", "scope": "api"},
                              basic("dcr-issuer", SECRETS["dcr-issuer"]), None)
    status, _, _ = register({"redirect_uris": [REDIRECT]}, token.get("access_token") if token else None, "/api/dcr/register", None)
    check("a token of the other instance (oidc): 401", status == 401, status)
    status, _, _ = json_call("GET", urllib.parse.urlsplit(reg["registration_client_uri"]).path, token=reg["registration_access_token"])
    check("the client registered with an initial access token is managed with its registration access token", status == 200, status)


if __name__ == "__main__":
    for flow in (ciba_flows, ping_flow, registration_flows):
        try:
            flow()
        except Exception as error:  # an answer of an unexpected shape: the rest of that flow cannot run
            check(f"{flow.__name__} ran to its end", False, repr(error))
    sys.exit(proofkit.summary(f"glewlwyd at {server.base}"))
