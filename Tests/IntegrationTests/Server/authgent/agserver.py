"""Loopback authorization server for the DPoP tests of the JWT-bearer grant and token exchange
(issue 18 A), built on authgent-server (PyPI, pinned in requirements.txt).

authgent-server implements the RFCs; this file only configures it and adds test hooks:

- its token endpoint (``/token``) with DPoP (RFC 9449) for every grant, its server nonces required
  (``AUTHGENT_REQUIRE_DPOP``), the JWT-bearer grant (RFC 7523 §2.1) and token exchange (RFC 8693);
- clients are registered through its own RFC 7591 endpoint (``POST /register``);
- its JWT-bearer grant takes assertions only from a "trusted chaining issuer", whose JWKS it fetches
  from ``ISSUER/.well-known/jwks.json``. The trusted issuer here is ``http://127.0.0.1:PORT/it/issuer``,
  and a client of that id (public, the JWT-bearer grant only) is made at start: the client signs its
  own assertions (``iss`` = its client id, as OAuthFlow does with a client key).

Test hooks, for tests only:

- ``POST /it/issuer-keys`` (JSON: a public JWK with ``kid``) adds a key to that issuer's JWKS;
- ``GET /it/issuer/.well-known/jwks.json`` serves it (authgent fetches it itself).

Run: ``python agserver.py PORT STATE_DIR``; the issuer is ``http://127.0.0.1:PORT``.
"""

import asyncio
import json
import os
import secrets
import sys

PORT = int(sys.argv[1]) if len(sys.argv) > 1 else 8940
STATE = sys.argv[2] if len(sys.argv) > 2 else "/tmp/oauthflow-authgent"
ISSUER = f"http://127.0.0.1:{PORT}"
CHAIN_ISSUER = f"{ISSUER}/it/issuer"
JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"

os.environ.update({
    "AUTHGENT_SERVER_URL": ISSUER,
    "AUTHGENT_HOST": "127.0.0.1",
    "AUTHGENT_PORT": str(PORT),
    "AUTHGENT_DATABASE_URL": f"sqlite+aiosqlite:///{STATE}/authgent-{PORT}.db",
    "AUTHGENT_SECRET_KEY": secrets.token_hex(32),
    "AUTHGENT_REQUIRE_DPOP": os.environ.get("OAUTHFLOW_AUTHGENT_REQUIRE_DPOP", "true"),
    "AUTHGENT_TRUSTED_CHAINING_ISSUERS": json.dumps([CHAIN_ISSUER]),
    "AUTHGENT_REGISTRATION_POLICY": "open",
})
os.chdir(STATE)  # its settings also read ./.env: none here

import uvicorn  # noqa: E402
from fastapi import Request  # noqa: E402
from fastapi.responses import JSONResponse  # noqa: E402

from authgent_server.app import create_app  # noqa: E402
from authgent_server.config import get_settings  # noqa: E402
from authgent_server.db import get_session_factory  # noqa: E402
from authgent_server.models.oauth_client import OAuthClient  # noqa: E402

app = create_app()
issuer_keys = []
made = asyncio.Lock()
client_made = False


async def ensure_chain_client():
    """The client whose id is the trusted issuer (made once, after authgent created its tables)."""
    global client_made
    async with made:
        if client_made:
            return
        async with get_session_factory(get_settings())() as session:
            if await session.get(OAuthClient, CHAIN_ISSUER) is None:
                session.add(OAuthClient(
                    client_id=CHAIN_ISSUER, client_secret_hash="!", client_name="oauthflow jwt-bearer",
                    grant_types=[JWT_BEARER], token_endpoint_auth_method="none"))
                await session.commit()
        client_made = True


@app.post("/it/issuer-keys")
async def add_issuer_key(request: Request):
    jwk = await request.json()
    if not isinstance(jwk, dict) or "kid" not in jwk or "d" in jwk:
        return JSONResponse({"error": "a public JWK with kid"}, status_code=400)
    await ensure_chain_client()
    issuer_keys.append(jwk)
    return {"ok": True, "client_id": CHAIN_ISSUER}


@app.get("/it/issuer/.well-known/jwks.json")
async def issuer_jwks():
    return {"keys": issuer_keys}


if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=PORT, log_level="info")
