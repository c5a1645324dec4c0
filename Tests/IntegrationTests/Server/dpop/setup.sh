#!/usr/bin/env bash
# Prepares the loopback DPoP server (idpyoidc; dpopserver.py). Idempotent.
#
#   OAUTHFLOW_DPOP_HOME    state directory (venv, log, pid); default /tmp/oauthflow-dpop
#   OAUTHFLOW_IT_PYTHON     interpreter used to create the venv; default python3
#
# A second run with unchanged requirements returns at once (stamp file).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
DPOP_HOME="${OAUTHFLOW_DPOP_HOME:-/tmp/oauthflow-dpop}"
PYTHON="${OAUTHFLOW_IT_PYTHON:-python3}"
VENV="$DPOP_HOME/venv"
STAMP="$DPOP_HOME/.setup-stamp"
export PYTHONDONTWRITEBYTECODE=1

log() { echo "[oauthflow-dpop setup] $*" >&2; }

HASH="$(cat "$HERE/setup.sh" "$HERE/requirements.txt" | sha256sum | cut -d' ' -f1)"
if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$HASH" && -x "$VENV/bin/python" ]]; then
    log "up to date ($DPOP_HOME)"
    exit 0
fi
mkdir -p "$DPOP_HOME"
chmod 700 "$DPOP_HOME"
if [[ ! -x "$VENV/bin/python" ]]; then
    log "creating venv at $VENV"
    "$PYTHON" -m venv "$VENV" || { log "ERROR: '$PYTHON -m venv' failed; on Debian: apt-get install -y python3-venv"; exit 1; }
fi
log "installing pinned packages"
"$VENV/bin/python" -m pip install --disable-pip-version-check --quiet -r "$HERE/requirements.txt"
echo "$HASH" > "$STAMP"
log "done ($DPOP_HOME)"
