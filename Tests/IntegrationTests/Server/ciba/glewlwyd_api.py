"""HTTP plumbing shared by provision.py and user.py (Python's standard library only): one request
function that never follows redirects and never raises on an HTTP error status, and a login session
of glewlwyd's API.

The server is https://127.0.0.1:PORT with the certificate made by par/setup.sh under HOME/pki, or
http://127.0.0.1:PORT without a HOME (registration/proof.py, for the Authlib server).
"""

import json
import ssl
import urllib.error
import urllib.parse
import urllib.request


class NoRedirect(urllib.request.HTTPRedirectHandler):
    """Glewlwyd answers its authorization and ciba_user_check endpoints with 302 to the login page or
    to the client; the caller reads the Location itself."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None


class Server:
    def __init__(self, port, home=None):
        self.port = int(port)
        self.home = home
        if home is None:
            self.base = f"http://127.0.0.1:{self.port}"
            self.opener = urllib.request.build_opener(NoRedirect)
        else:
            self.base = f"https://127.0.0.1:{self.port}"
            context = ssl.create_default_context(cafile=f"{home}/pki/ca.crt")
            self.opener = urllib.request.build_opener(NoRedirect, urllib.request.HTTPSHandler(context=context))

    def pki(self, name):
        return f"{self.home}/pki/{name}"

    def request(self, method, url, *, json_body=None, form=None, headers=None, timeout=20):
        """Returns (status, headers, body bytes). `url` is absolute or a path under the base URL."""
        if url.startswith("/"):
            url = self.base + url
        headers = dict(headers or {})
        data = None
        if json_body is not None:
            data = json.dumps(json_body).encode()
            headers.setdefault("Content-Type", "application/json")
        elif form is not None:
            data = urllib.parse.urlencode(form).encode()
            headers.setdefault("Content-Type", "application/x-www-form-urlencoded")
        req = urllib.request.Request(url, method=method, data=data, headers=headers)
        try:
            with self.opener.open(req, timeout=timeout) as response:
                return response.status, response.headers, response.read()
        except urllib.error.HTTPError as error:
            return error.code, error.headers, error.read()


def decode(body):
    """The JSON of a body, or None when it is empty or not JSON."""
    try:
        return json.loads(body) if body else None
    except ValueError:
        return None


class Session:
    """A login session of glewlwyd's API (`POST /api/auth/`). Glewlwyd answers
    ``Set-Cookie: ...; Domain=;`` (no cookie_domain set), which http.cookiejar refuses, so the
    session cookie is carried by hand."""

    def __init__(self, server, username, password):
        self.server = server
        self.cookie = None
        status, headers, body = self.server.request("POST", "/api/auth/", json_body={"username": username, "password": password})
        if status != 200:
            raise SystemExit(f"login as {username}: HTTP {status} {body[:300]!r}")
        self.cookie = headers.get("Set-Cookie").split(";", 1)[0]

    def request(self, method, url, **options):
        headers = dict(options.pop("headers", None) or {})
        headers["Cookie"] = self.cookie
        return self.server.request(method, url, headers=headers, **options)

    def call(self, method, path, body=None):
        """An API call that must succeed (2xx); returns the decoded answer."""
        status, _, answer = self.request(method, f"/api{path}", json_body=body if body is not None else ({} if method in ("POST", "PUT") else None))
        if not 200 <= status < 300:
            raise SystemExit(f"{method} /api{path}: HTTP {status} {answer[:300]!r}")
        return decode(answer)
