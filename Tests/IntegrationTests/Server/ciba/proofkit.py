"""The small kit of the proof scripts (ciba/proof.py, registration/proof.py): checks that
print "ok - …" or "FAIL - …" and count the failures, the answers' shapes as they come, and the
HTTP and PKCE helpers. Python's standard library only. Call use(server) first.
"""

import base64
import hashlib
import json
import os

from glewlwyd_api import decode

server = None
failures = 0


def use(target):
    """The glewlwyd_api.Server the HTTP helpers talk to."""
    global server
    server = target


def check(name, condition, detail=""):
    global failures
    if condition:
        print(f"ok - {name}")
    else:
        failures += 1
        print(f"FAIL - {name}{': ' + str(detail) if detail != '' else ''}")
    return condition


def section(title):
    print(f"\n## {title}")


def show(label, status, body):
    text = body if isinstance(body, str) else json.dumps(body)
    print(f"  <- {label}: HTTP {status} {text[:600]}{'…' if len(text) > 600 else ''}")


# --- HTTP ---------------------------------------------------------------------------------------

def basic(client_id, secret):
    return {"Authorization": "Basic " + base64.b64encode(f"{client_id}:{secret}".encode()).decode()}


def post_form(path, form, headers=None, label=None):
    status, _, body = server.request("POST", path, form=form, headers=headers)
    answer = decode(body)
    if label:
        show(label, status, answer if answer is not None else body.decode(errors="replace"))
    return status, answer


def json_call(method, path, body=None, token=None, label=None):
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    status, response_headers, raw = server.request(method, path, json_body=body, headers=headers)
    answer = decode(raw)
    if label:
        show(label, status, answer if answer is not None else raw.decode(errors="replace"))
    return status, answer, response_headers


# --- encodings ----------------------------------------------------------------------------------

def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64url(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def pkce():
    """An RFC 7636 S256 pair: (code_verifier, code_challenge)."""
    verifier = b64url(os.urandom(32))
    return verifier, b64url(hashlib.sha256(verifier.encode()).digest())


def summary(what):
    """Prints the verdict; returns the exit status (the number of failures, at most 100)."""
    print(f"\n{'all checks passed' if failures == 0 else f'{failures} check(s) FAILED'} ({what})")
    return min(failures, 100)
