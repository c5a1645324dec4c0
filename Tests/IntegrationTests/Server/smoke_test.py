#!/usr/bin/env python3
"""End-to-end smoke test of the running loopback test server (stdlib only).

    "${OAUTHFLOW_IT_HOME:-/tmp/oauthflow-it}/venv/bin/python" smoke_test.py   # or any python3

Exercises every flow the Swift integration tests rely on and prints one line per check,
then "N passed, N failed". Exit status 1 if any check failed.
"""

import base64
import hashlib
import html.parser
import http.cookiejar
import json
import os
import secrets
import sys
import urllib.error
import urllib.parse
import urllib.request

PORT = int(os.environ.get("OAUTHFLOW_IT_PORT", "8910"))
BASE = f"http://127.0.0.1:{PORT}"
ISSUER = f"{BASE}/o"
TOKEN = f"{ISSUER}/token/"
DEVICE_GRANT = "urn:ietf:params:oauth:grant-type:device_code"
USER, PASSWORD = "alice", "wonderland-pass-1"

results = {"passed": 0, "failed": 0}


def check(name, cond, detail=""):
    results["passed" if cond else "failed"] += 1
    print(f"{'ok  ' if cond else 'FAIL'} {name}" + ("" if cond else f"  -- {detail}"))


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


class Browser:
    """Cookie jar + manual redirects; stops at a redirect into `stop_prefix`."""

    def __init__(self):
        self.jar = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar), NoRedirect)

    def request(self, url, data=None):
        body = urllib.parse.urlencode(data).encode() if data is not None else None
        try:
            with self.opener.open(urllib.request.Request(url, data=body), timeout=10) as r:
                return r.status, r.headers, r.read().decode(), r.url
        except urllib.error.HTTPError as e:
            return e.code, e.headers, e.read().decode(), url

    def navigate(self, url, data=None, stop_prefix=None):
        """Returns (final_url, status, html); final_url is the stop URL when reached."""
        for _ in range(10):
            status, headers, text, _ = self.request(url, data)
            if status in (301, 302, 303, 307, 308):
                url = urllib.parse.urljoin(url, headers["Location"])
                data = None
                if stop_prefix and url.startswith(stop_prefix):
                    return url, status, ""
                continue
            return url, status, text
        raise RuntimeError("too many redirects")


class FormParser(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.fields = []
        self.in_form = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "form":
            self.in_form = True
        elif tag == "input" and self.in_form and a.get("name") and a.get("type") in ("hidden", None, "text"):
            self.fields.append((a["name"], a.get("value") or ""))

    def handle_endtag(self, tag):
        if tag == "form":
            self.in_form = False


def form_fields(text):
    p = FormParser()
    p.feed(text)
    return dict(p.fields)


def login_if_needed(b, url, status, text, stop_prefix=None):
    if "/accounts/login/" not in url:
        return url, status, text
    f = form_fields(text)
    f.update(username=USER, password=PASSWORD)
    return b.navigate(f"{BASE}/accounts/login/", f, stop_prefix=stop_prefix)


def post(url, data, auth=None):
    req = urllib.request.Request(url, data=urllib.parse.urlencode(data).encode())
    if auth:
        req.add_header("Authorization", "Basic " + base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode())
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            raw = r.read().decode()
            return r.status, (json.loads(raw) if raw else {})
    except urllib.error.HTTPError as e:
        raw = e.read().decode()
        try:
            return e.code, json.loads(raw)
        except ValueError:
            return e.code, {"raw": raw[:100]}


def get_json(url, bearer=None):
    req = urllib.request.Request(url)
    if bearer:
        req.add_header("Authorization", f"Bearer {bearer}")
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, {}


def pkce_pair():
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    return verifier, challenge


def authorize(client_id, redirect_uri, allow, challenge=None, scope="openid profile email read"):
    b = Browser()
    q = {"response_type": "code", "client_id": client_id, "redirect_uri": redirect_uri,
         "scope": scope, "state": "s-" + secrets.token_hex(4), "nonce": "n-" + secrets.token_hex(4)}
    if challenge:
        q.update(code_challenge=challenge, code_challenge_method="S256")
    url = f"{ISSUER}/authorize/?" + urllib.parse.urlencode(q)
    stop = redirect_uri.split("?")[0]
    url2, status, text = b.navigate(url, stop_prefix=stop)
    if url2.startswith(stop):
        return url2, q["state"]
    url2, status, text = login_if_needed(b, url2, status, text, stop)
    if url2.startswith(stop):
        return url2, q["state"]
    f = form_fields(text)
    if allow:
        f["allow"] = "Authorize"
    final, status, text = b.navigate(url2, f, stop_prefix=stop)
    return final, q["state"]


def query(url):
    return {k: v[0] for k, v in urllib.parse.parse_qs(urllib.parse.urlparse(url).query).items()}


def main():
    status, disco = get_json(f"{ISSUER}/.well-known/openid-configuration")
    check("discovery", status == 200 and disco.get("issuer") == ISSUER, disco)
    check("discovery advertises device endpoint",
          disco.get("device_authorization_endpoint") == f"{ISSUER}/device-authorization/")

    # Client credentials.
    s, body = post(TOKEN, {"grant_type": "client_credentials", "scope": "read write"},
                   auth=("it-confidential-cc", "it-cc-secret-1"))
    check("client_credentials basic", s == 200 and "access_token" in body, body)
    cc_token = body.get("access_token")
    s, body = post(TOKEN, {"grant_type": "client_credentials", "client_id": "it-confidential-cc",
                           "client_secret": "it-cc-secret-1"})
    check("client_credentials post", s == 200 and "access_token" in body, body)
    s, body = post(TOKEN, {"grant_type": "client_credentials"}, auth=("it-confidential-cc", "wrong"))
    check("client_credentials wrong secret -> 401 invalid_client", s == 401 and body.get("error") == "invalid_client", (s, body))

    # Authorization code + PKCE (public client), any loopback port.
    verifier, challenge = pkce_pair()
    redirect = "http://127.0.0.1:54321/callback"
    final, state = authorize("it-public-pkce", redirect, True, challenge)
    q = query(final)
    check("authorize (PKCE, loopback any port) -> code", final.startswith(redirect) and "code" in q and q.get("state") == state, final)
    check("authorization response carries iss", q.get("iss") == ISSUER, q)
    s, tok = post(TOKEN, {"grant_type": "authorization_code", "client_id": "it-public-pkce", "code": q.get("code"),
                          "redirect_uri": redirect, "code_verifier": verifier})
    check("code exchange", s == 200 and "id_token" in tok and "refresh_token" in tok, (s, tok))
    s, again = post(TOKEN, {"grant_type": "authorization_code", "client_id": "it-public-pkce", "code": q.get("code"),
                            "redirect_uri": redirect, "code_verifier": verifier})
    check("code reuse -> invalid_grant", s == 400 and again.get("error") == "invalid_grant", (s, again))

    final, _ = authorize("it-public-pkce", "http://127.0.0.1:8911/callback", True, None)
    check("public client without PKCE -> error redirect", "error=" in final, final)

    final, state = authorize("it-public-pkce", "http://127.0.0.1:8911/callback", False, challenge)
    q2 = query(final)
    check("deny consent -> access_denied", q2.get("error") == "access_denied" and q2.get("state") == state, final)

    # Userinfo / introspection / refresh rotation / revocation.
    s, ui = get_json(f"{ISSUER}/userinfo/", bearer=tok.get("access_token"))
    check("userinfo", s == 200 and ui.get("preferred_username") == USER, (s, ui))
    s, intro = post(f"{ISSUER}/introspect/", {"token": tok.get("access_token")}, auth=("it-confidential-cc", "it-cc-secret-1"))
    check("introspect (basic, confidential client)", s == 200 and intro.get("active") is True, (s, intro))
    s, intro = post(f"{ISSUER}/introspect/", {"token": tok.get("access_token")})
    check("introspect unauthenticated -> 403", s == 403, s)
    s, tok2 = post(TOKEN, {"grant_type": "refresh_token", "client_id": "it-public-pkce", "refresh_token": tok.get("refresh_token")})
    check("refresh", s == 200 and tok2.get("refresh_token") not in (None, tok.get("refresh_token")), (s, tok2))
    s, old = post(TOKEN, {"grant_type": "refresh_token", "client_id": "it-public-pkce", "refresh_token": tok.get("refresh_token")})
    check("old refresh token rejected (rotation)", s == 400 and old.get("error") == "invalid_grant", (s, old))
    s, _ = post(f"{ISSUER}/revoke_token/", {"client_id": "it-public-pkce", "token": tok2.get("access_token")})
    s2, intro = post(f"{ISSUER}/introspect/", {"token": tok2.get("access_token")}, auth=("it-confidential-cc", "it-cc-secret-1"))
    check("revoke access token", s == 200 and intro.get("active") is False, (s, intro))
    s, _ = post(f"{ISSUER}/revoke_token/", {"token": cc_token}, auth=("it-confidential-cc", "it-cc-secret-1"))
    check("revoke (confidential, basic)", s == 200, s)

    # Confidential web client (client_secret_basic at the token endpoint, no PKCE).
    final, _ = authorize("it-confidential-web", "http://127.0.0.1:8912/callback", True, None)
    q3 = query(final)
    s, tok3 = post(TOKEN, {"grant_type": "authorization_code", "code": q3.get("code"),
                           "redirect_uri": "http://127.0.0.1:8912/callback"}, auth=("it-confidential-web", "it-web-secret-1"))
    check("confidential web client code flow", s == 200 and "id_token" in tok3, (s, tok3))

    # Device flow: pending -> approve -> token; deny -> access_denied.
    for approve in (True, False):
        s, dev = post(f"{ISSUER}/device-authorization/", {"client_id": "it-public-device", "scope": "read"})
        check("device authorization", s == 200 and "device_code" in dev, (s, dev))
        poll = {"grant_type": DEVICE_GRANT, "client_id": "it-public-device", "device_code": dev.get("device_code")}
        s, p = post(TOKEN, poll)
        check("device poll pending", s == 400 and p.get("error") == "authorization_pending", (s, p))
        b = Browser()
        url, status, text = login_if_needed(b, *b.navigate(dev["verification_uri"]))
        f = form_fields(text)
        f["user_code"] = dev["user_code"]
        url, status, text = b.navigate(url, f)
        check("device confirm page", "/device-confirm/" in url and status == 200, (url, status))
        f = form_fields(text)
        f["action"] = "accept" if approve else "deny"
        url, status, text = b.navigate(url, f)
        s, p = post(TOKEN, poll)
        if approve:
            check("device poll -> token", s == 200 and "access_token" in p, (s, p))
        else:
            check("device poll after deny -> access_denied", s == 400 and p.get("error") == "access_denied", (s, p))

    print(f"{results['passed']} passed, {results['failed']} failed")
    return 1 if results["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
