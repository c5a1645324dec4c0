#!/usr/bin/env bash
# Client assertions, issue 17's figures (Documentation/Performance.md, "Client assertions"):
#   1. `oauthflow-bench diag-assertion`: a whole private_key_jwt assertion (ES256, RS256-2048, EdDSA)
#      against a bare EVP_DigestSign of the same signing input, same process, alternating rounds;
#      pinned to CPU 1 and unpinned; the limit: at most 1.3x;
#   2. the harness's M1 and M2 (BENCH_MODES=m1,m2) with two rows of the same run: `oauthflow`
#      (client_secret_basic) and `oauthflow-pkjwt-es256` (the same binary with
#      BENCH_CLIENT_AUTH=private_key_jwt and a P-256 key: an ES256 assertion per fetch), beside
#      go-x-oauth2; the harness's nginx does not verify the assertion, so this is the client's cost.
#
# usage: scripts/bench-assertion.sh [HARNESS_DIR]   (a writable copy of ../shared/bench; default
#        $BENCH_HARNESS, else a copy made in $TMPDIR/oauthflow-harness, as scripts/bench.sh does)
# environment:
#   BENCH_BUILD_DIR   the release build's scratch path (default $TMPDIR/oauthflow-bench-build; build it
#                     with scripts/release-build.sh --scratch-path DIR oauthflow-bench)
#   BENCH_RUNS        harness runs, alternately pinned and unpinned (default 2)
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TMP="${TMPDIR:-/tmp}"
HARNESS="${1:-${BENCH_HARNESS:-$TMP/oauthflow-harness}}"
BIN="${BENCH_BUILD_DIR:-$TMP/oauthflow-bench-build}/release/oauthflow-bench"
RUNS="${BENCH_RUNS:-2}"
say() { printf 'bench-assertion.sh: %s\n' "$*" >&2; }
[[ -x "$BIN" ]] || { say "no $BIN"; exit 2; }
if [[ ! -x "$HARNESS/run-all.sh" ]]; then
  cp -r "$REPO/../shared/bench" "$HARNESS" && chmod -R u+w "$HARNESS"
fi
if [[ -f /tmp/oauthbench-nginx/nginx.pid ]] && kill -0 "$(cat /tmp/oauthbench-nginx/nginx.pid)" 2>/dev/null; then
  say "the harness's nginx is already running: someone else is measuring; try again later"; exit 3
fi

WORK="$(mktemp -d "$TMP/oauthflow-bench-assertion.XXXXXX")"
trap 'rm -f "$WORK"/*.pem' EXIT   # the keys made below; results.txt stays
(umask 077
 openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$WORK/es256.pem" 2>/dev/null
 openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$WORK/rs256.pem" 2>/dev/null
 openssl genpkey -algorithm ED25519 -out "$WORK/eddsa.pem" 2>/dev/null)

say "machine: $(nproc) CPUs, $(uptime)"
for kind in pinned unpinned; do
  pin=(); [[ $kind == pinned ]] && pin=(taskset -c 1)
  say "diag-assertion, $kind"
  BENCH_NAME="diag-$kind" BENCH_CLIENT_KEY_DIR="$WORK" "${pin[@]}" "$BIN" diag-assertion | tee -a "$WORK/results.txt"
done

printf 'oauthflow\t%s\noauthflow-pkjwt-es256\t%s\tBENCH_CLIENT_AUTH=private_key_jwt BENCH_CLIENT_KEY_FILE=%s\n' \
  "$BIN" "$BIN" "$WORK/es256.pem" > "$WORK/clients.tsv"
for run in $(seq 1 "$RUNS"); do
  pin=$(( run % 2 ))
  say "harness run $run of $RUNS (M1, M2; $([[ $pin == 1 ]] && echo pinned || echo unpinned))"
  before="$(ls "$HARNESS/results/runs" 2>/dev/null | sort | tail -1 || true)"
  (cd "$HARNESS" && BENCH_PIN=$pin BENCH_MODES=m1,m2 BENCH_EXTRA_CLIENTS="$WORK/clients.tsv" \
     BENCH_ONLY=go-x-oauth2,oauthflow,oauthflow-pkjwt-es256 ./run-all.sh >"$WORK/run-$run.log" 2>&1) \
    || { say "run-all.sh failed; see $WORK/run-$run.log"; exit 1; }
  latest="$(ls "$HARNESS/results/runs" | sort | tail -1)"
  [[ "$latest" != "$before" ]] || { say "run-all.sh wrote no new run"; exit 1; }
  python3 - "$HARNESS/results/runs/$latest/results.txt" "$run" "$([[ $pin == 1 ]] && echo pinned || echo unpinned)" <<'PY' | tee -a "$WORK/results.txt"
import re, sys
values = {}
for line in open(sys.argv[1]):
    m = re.match(r"RESULT\s+(\S+)\s+(\S+)\s+(\S+)\s*$", line)
    if m:
        try: values[(m.group(1), m.group(2))] = float(m.group(3))
        except ValueError: pass
run, kind = sys.argv[2], sys.argv[3]
for metric in ("m1_median_us", "m1_p99_us", "m2_fetch_per_s", "m2_errors", "m1_errors"):
    for client in ("go-x-oauth2", "oauthflow", "oauthflow-pkjwt-es256"):
        if (client, metric) in values:
            print(f"RESULT {client} run{run}_{kind}_{metric} {values[(client, metric)]:g}")
secret, signed = values.get(("oauthflow", "m2_fetch_per_s")), values.get(("oauthflow-pkjwt-es256", "m2_fetch_per_s"))
if secret and signed:
    print(f"RESULT compare run{run}_{kind}_m2_pkjwt_over_secret {signed / secret:.3f}")
PY
done
say "machine after: $(uptime)"
say "results: $WORK/results.txt"
