#!/usr/bin/env bash
# Prepares the loopback OAuth 2.0 / OIDC test server (django-oauth-toolkit). Idempotent.
#
#   OAUTHFLOW_IT_HOME    state directory (venv, SQLite DB, RS256 key, logs); default /tmp/oauthflow-it
#   OAUTHFLOW_IT_PYTHON  interpreter used to create the venv; default python3
#
# A second run with unchanged inputs returns immediately (stamp file). Any change of
# requirements.txt or of the Django project re-runs pip/migrate/bootstrap.
# Full reset: rm -rf "$OAUTHFLOW_IT_HOME".
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
IT_HOME="${OAUTHFLOW_IT_HOME:-/tmp/oauthflow-it}"
PYTHON="${OAUTHFLOW_IT_PYTHON:-python3}"
VENV="$IT_HOME/venv"
STAMP="$IT_HOME/.setup-stamp"

export OAUTHFLOW_IT_HOME="$IT_HOME"
# Keep the repository free of __pycache__ folders.
export PYTHONDONTWRITEBYTECODE=1

log() { echo "[oauthflow-it setup] $*" >&2; }

inputs_hash() {
    (
        cd "$HERE"
        cat setup.sh requirements.txt manage.py
        find itserver -type f \( -name '*.py' -o -name '*.html' \) | LC_ALL=C sort | xargs cat
    ) | sha256sum | cut -d' ' -f1
}

HASH="$(inputs_hash)"
if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$HASH" && -x "$VENV/bin/python" && -f "$IT_HOME/db.sqlite3" ]]; then
    log "up to date ($IT_HOME)"
    exit 0
fi

mkdir -p "$IT_HOME"
chmod 700 "$IT_HOME"

# 1. Python virtual environment with pinned packages.
if [[ ! -x "$VENV/bin/python" ]] || ! "$VENV/bin/python" -c 'import sys' 2>/dev/null; then
    log "creating venv at $VENV with $("$PYTHON" --version 2>&1)"
    rm -rf "$VENV"
    if ! "$PYTHON" -m venv "$VENV"; then
        log "ERROR: '$PYTHON -m venv' failed. On Debian/Ubuntu: apt-get install -y python3-venv"
        rm -rf "$VENV"
        exit 1
    fi
fi
log "installing pinned packages"
"$VENV/bin/python" -m pip install --disable-pip-version-check --quiet -r "$HERE/requirements.txt"

# 2. Secrets generated once per state directory.
if [[ ! -s "$IT_HOME/django-secret-key" ]]; then
    "$VENV/bin/python" -c 'import secrets; print(secrets.token_urlsafe(50))' > "$IT_HOME/django-secret-key"
    chmod 600 "$IT_HOME/django-secret-key"
fi
if [[ ! -s "$IT_HOME/oidc-rs256.pem" ]]; then
    log "generating RS256 key"
    "$VENV/bin/python" - "$IT_HOME/oidc-rs256.pem" <<'PY'
import os, sys
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
pem = key.private_bytes(
    serialization.Encoding.PEM,
    serialization.PrivateFormat.PKCS8,
    serialization.NoEncryption(),
)
path = sys.argv[1]
fd = os.open(path + ".tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
with os.fdopen(fd, "wb") as f:
    f.write(pem)
os.replace(path + ".tmp", path)
PY
fi

# 3. Database schema, user and applications.
cd "$HERE"
log "migrating database"
"$VENV/bin/python" manage.py migrate --noinput -v 0
log "creating user and applications"
"$VENV/bin/python" manage.py itbootstrap

echo "$HASH" > "$STAMP"
log "done ($IT_HOME)"
