"""End-to-end proof of dynamic client registration (RFC 7591) and its management (RFC 7592)
against the Authlib server of registration/start.sh, then a code + PKCE login with each registered
client. Python's standard library only (the kit in ciba/). Run by ciba/proof.sh.

    python3 proof.py PORT

Prints "ok - …" or "FAIL - …" per check; the exit status is the number of failures.
"""

import os
import sys
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "ciba"))

import proofkit  # noqa: E402
from glewlwyd_api import Server  # noqa: E402
from proofkit import b64url, basic, check, json_call, pkce, post_form, section, show  # noqa: E402

server = Server(sys.argv[1])
proofkit.use(server)
ISSUER = server.base
REDIRECT = "http://127.0.0.1:9999/callback"
INITIAL_ACCESS_TOKEN = "initial-access-token-0123456789"


def path(uri):
    return urllib.parse.urlsplit(uri).path


def code_login(client_id, token_auth, scope="api", label="POST /token (authorization_code)"):
    """Authorization code + PKCE: /authorize approves at once as alice (a test server); then the
    code exchange with `token_auth()` = (headers, form)."""
    verifier, challenge = pkce()
    state = b64url(os.urandom(12))
    status, headers, body = server.request("GET", "/authorize?" + urllib.parse.urlencode({
        "response_type": "code", "client_id": client_id, "redirect_uri": REDIRECT, "scope": scope, "state": state,
        "code_challenge": challenge, "code_challenge_method": "S256"}))
    location = headers.get("Location") or ""
    print(f"  GET /authorize -> {status} {location[:200]}")
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(location).query)
    if status != 302 or not location.startswith(REDIRECT) or query.get("state") != [state] or "code" not in query:
        return None, (status, location, body[:300])
    auth_headers, form = token_auth()
    return post_form("/token", {**form, "grant_type": "authorization_code", "code": query["code"][0], "redirect_uri": REDIRECT,
                                "code_verifier": verifier}, auth_headers, label), query


def main():
    section("Authlib: metadata (RFC 8414)")
    status, metadata, _ = json_call("GET", "/.well-known/oauth-authorization-server", label="GET /.well-known/oauth-authorization-server")
    check("registration_endpoint is ISSUER/register", status == 200 and metadata.get("registration_endpoint") == f"{ISSUER}/register")

    section("Authlib RFC 7591 / RFC 7592: a confidential client: register, read, update, log in, delete")
    body = {"redirect_uris": [REDIRECT], "token_endpoint_auth_method": "client_secret_basic", "client_name": "confidential",
            "grant_types": ["authorization_code", "refresh_token", "client_credentials"], "response_types": ["code"],
            "scope": "api read", "software_id": "oauthflow", "software_version": "1.0"}
    status, reg, headers = json_call("POST", "/register", body, label="POST /register")
    check("201 with client_id, client_secret, client_id_issued_at, client_secret_expires_at 0, registration_access_token, "
          "registration_client_uri; Cache-Control no-store",
          status == 201 and reg.get("client_secret") and reg.get("client_secret_expires_at") == 0 and isinstance(reg.get("client_id_issued_at"), int)
          and reg.get("registration_access_token") and reg.get("registration_client_uri") == f"{ISSUER}/register/{reg.get('client_id')}"
          and headers.get("Cache-Control") == "no-store", (status, reg))
    check("the metadata comes back as sent (software_id, software_version, scope)",
          all(reg.get(key) == body[key] for key in ("software_id", "software_version", "scope", "grant_types")), reg)
    client_id, secret, rat, uri = reg["client_id"], reg["client_secret"], reg["registration_access_token"], path(reg["registration_client_uri"])
    status, read, _ = json_call("GET", uri, token=rat, label="GET /register/ID")
    check("read: 200, the registration as registered, with the same registration_access_token and the secret",
          status == 200 and read.get("client_secret") == secret and read.get("registration_access_token") == rat
          and read.get("client_name") == "confidential", read)
    update = {**body, "client_id": client_id, "client_name": "renamed"}
    status, updated, _ = json_call("PUT", uri, update, rat, "PUT /register/ID")
    check("update: 200, the new name, the secret unchanged", status == 200 and updated.get("client_name") == "renamed"
          and updated.get("client_secret") == secret, updated)
    status, updated, _ = json_call("PUT", uri, {key: value for key, value in update.items() if key != "scope"}, rat, None)
    check("update without scope keeps the old scope (this server merges, as Authlib's docs show; RFC 7592 §2.2 replaces)",
          status == 200 and updated.get("scope") == "api read", updated)
    for name, change in (("a wrong client_secret", {"client_secret": "wrong"}), ("registration_access_token in the body", {"registration_access_token": rat}),
                         ("another client_id", {"client_id": "other"})):
        status, answer, _ = json_call("PUT", uri, {**update, **change}, rat, None)
        check(f"update with {name}: 400 invalid_request", status == 400 and answer.get("error") == "invalid_request", (status, answer))
    status, answer, _ = json_call("PUT", uri, {**update, "client_secret": secret}, rat, None)
    check("update with the right client_secret: 200", status == 200, (status, answer))
    result, query = code_login(client_id, lambda: (basic(client_id, secret), {}))
    check("code + PKCE login with the registered client: 200, Bearer token, refresh token, scope 'api'",
          result is not None and result[0] == 200 and result[1].get("token_type") == "Bearer" and "refresh_token" in result[1]
          and result[1].get("scope") == "api", (result, query))
    check("the authorization response has no iss (RFC 9207)", "iss" not in query, query)
    if result and result[0] == 200:
        refreshed = post_form("/token", {"grant_type": "refresh_token", "refresh_token": result[1]["refresh_token"]}, basic(client_id, secret),
                              "POST /token (refresh_token)")
        check("the refresh token works", refreshed[0] == 200 and "access_token" in refreshed[1])
    status, answer = post_form("/token", {"grant_type": "client_credentials", "scope": "read"}, basic(client_id, secret), "POST /token (client_credentials)")
    check("client credentials: 200 with scope read", status == 200 and answer.get("scope") == "read", answer)
    status, answer = post_form("/token", {"grant_type": "client_credentials"}, basic(client_id, "wrong"), None)
    check("a wrong secret: 401 invalid_client", (status, answer.get("error")) == (401, "invalid_client"), (status, answer))

    status, answer, headers = json_call("DELETE", uri, token=rat, label="DELETE /register/ID")
    check("delete: 204 (RFC 7592 §2.3)", status == 204, status)
    status, answer, _ = json_call("GET", uri, token=rat, label="GET /register/ID after delete")
    check("read after delete: 400 access_denied (the token went with the client; RFC 7592 §2.1 wants 401)",
          (status, (answer or {}).get("error")) == (400, "access_denied"), (status, answer))
    status, answer = post_form("/token", {"grant_type": "client_credentials"}, basic(client_id, secret), None)
    check("the deleted client at the token endpoint: 401 invalid_client", (status, answer.get("error")) == (401, "invalid_client"), (status, answer))
    status, headers, raw = server.request("GET", "/authorize?" + urllib.parse.urlencode({
        "response_type": "code", "client_id": client_id, "redirect_uri": REDIRECT, "scope": "api", "state": "s",
        "code_challenge": pkce()[1], "code_challenge_method": "S256"}))
    show("GET /authorize for the deleted client", status, raw.decode(errors="replace"))
    check("an authorization request for the deleted client: 400 invalid_client, no redirect",
          status == 400 and b"invalid_client" in raw and not headers.get("Location"), (status, raw))
    check("the test hook no longer lists it", client_id not in json_call("GET", "/it/clients")[1])

    section("Authlib: an expired client secret (test hook)")
    _, reg, _ = json_call("POST", "/register", {"redirect_uris": [REDIRECT], "grant_types": ["client_credentials"], "scope": "read"})
    client_id, secret, rat, uri = reg["client_id"], reg["client_secret"], reg["registration_access_token"], path(reg["registration_client_uri"])
    check("before: client credentials work", post_form("/token", {"grant_type": "client_credentials"}, basic(client_id, secret))[0] == 200)
    status, expired, _ = json_call("POST", f"/it/expire-secret/{client_id}", label="POST /it/expire-secret/ID (test hook)")
    status, answer = post_form("/token", {"grant_type": "client_credentials"}, basic(client_id, secret), "POST /token with the expired secret")
    check("an expired secret: 401 invalid_client", (status, answer.get("error")) == (401, "invalid_client"), (status, answer))
    status, read, _ = json_call("GET", uri, token=rat, label=None)
    check("read shows client_secret_expires_at in the past", read.get("client_secret_expires_at") == expired["client_secret_expires_at"], read)

    section("Authlib: a public client (token_endpoint_auth_method none)")
    status, reg, _ = json_call("POST", "/register", {"redirect_uris": [REDIRECT], "token_endpoint_auth_method": "none",
                                                      "grant_types": ["authorization_code", "refresh_token"], "scope": "api"}, label="POST /register (none)")
    check("201, and Authlib issues a client_secret anyway (the client must not use it)", status == 201 and reg.get("client_secret"), reg)
    result, query = code_login(reg["client_id"], lambda: ({}, {"client_id": reg["client_id"]}))
    check("code + PKCE login without a secret: 200", result is not None and result[0] == 200 and "access_token" in result[1], (result, query))
    result, query = code_login(reg["client_id"], lambda: (basic(reg["client_id"], reg["client_secret"]), {}), label="POST /token, none client with basic")
    check("... and with basic authentication it is refused: 401 invalid_client",
          result is not None and (result[0], result[1].get("error")) == (401, "invalid_client"), (result, query))

    section("Authlib: what /register refuses")
    for name, body, want_status, want in [
        ("private_key_jwt (not in token_endpoint_auth_methods_supported)", {"redirect_uris": [REDIRECT], "token_endpoint_auth_method": "private_key_jwt"},
         400, "invalid_client_metadata"),
        ("an unsupported grant type", {"redirect_uris": [REDIRECT], "grant_types": ["password"]}, 400, "invalid_client_metadata"),
        ("an unsupported scope", {"redirect_uris": [REDIRECT], "scope": "admin"}, 400, "invalid_client_metadata"),
        ("an empty body", {}, 400, "invalid_request"),
    ]:
        status, answer, _ = json_call("POST", "/register", body, label=None)
        check(f"{name}: {want_status} {want}", (status, (answer or {}).get("error")) == (want_status, want), (status, answer))
    status, answer, _ = json_call("POST", "/register", {"redirect_uris": ["ftp://files.example.com/x"]}, label=None)
    check("a redirect URI of any scheme is accepted (Authlib checks only that it parses): 201", status == 201, (status, answer))
    status, answer, _ = json_call("POST", "/register", {"redirect_uris": [REDIRECT], "client_secret": "chosen", "client_id": "chosen"}, label=None)
    check("client_id and client_secret in the request are ignored: the server makes its own",
          status == 201 and answer.get("client_id") != "chosen" and answer.get("client_secret") != "chosen", answer)

    section("Authlib RFC 7591 §3: an initial access token (/protected/register)")
    status, answer, _ = json_call("POST", "/protected/register", {"redirect_uris": [REDIRECT]}, label="POST /protected/register without a token")
    check("without it: 400 access_denied (RFC 6750 §3.1 would say 401 invalid_token)", (status, (answer or {}).get("error")) == (400, "access_denied"),
          (status, answer))
    status, answer, _ = json_call("POST", "/protected/register", {"redirect_uris": [REDIRECT]}, "wrong", label=None)
    check("with a wrong token: 400 access_denied", (status, (answer or {}).get("error")) == (400, "access_denied"), (status, answer))
    status, reg, _ = json_call("POST", "/protected/register", {"redirect_uris": [REDIRECT]}, INITIAL_ACCESS_TOKEN, "POST /protected/register with it")
    check("with it: 201 (and it may be used again)", status == 201, (status, reg))
    check("... twice", json_call("POST", "/protected/register", {"redirect_uris": [REDIRECT]}, INITIAL_ACCESS_TOKEN)[0] == 201)

    section("Authlib RFC 7592: a registration access token used for another client")
    _, first, _ = json_call("POST", "/register", {"redirect_uris": [REDIRECT]})
    _, second, _ = json_call("POST", "/register", {"redirect_uris": [REDIRECT]})
    status, answer, _ = json_call("GET", path(second["registration_client_uri"]), token=first["registration_access_token"], label=None)
    check("the first client's token at the second client's URI: 400 access_denied", (status, (answer or {}).get("error")) == (400, "access_denied"),
          (status, answer))
    check("the first client's token still reads its own registration", json_call("GET", path(first["registration_client_uri"]),
                                                                                  token=first["registration_access_token"])[0] == 200)
    status, answer, _ = json_call("GET", "/register/no-such-client", token=first["registration_access_token"], label="GET /register/no-such-client")
    check("a valid token at an unknown client's URI: 401 invalid_client, and the token is revoked (RFC 7592 §2.1)",
          (status, (answer or {}).get("error")) == (401, "invalid_client")
          and json_call("GET", path(first["registration_client_uri"]), token=first["registration_access_token"])[0] == 400, (status, answer))
    show("GET /it/clients (test hook)", *json_call("GET", "/it/clients")[:2])


if __name__ == "__main__":
    try:
        main()
    except Exception as error:  # an answer of an unexpected shape: the rest cannot run
        check("the proof ran to its end", False, repr(error))
    sys.exit(proofkit.summary(f"Authlib at {server.base}"))
