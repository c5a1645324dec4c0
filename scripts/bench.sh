#!/usr/bin/env bash
# OAuthFlow's rows of the peer benchmark, measured the way Documentation/Performance.md reports them:
# the release build of Documentation/CLI.md, "Installing, and the release build" (scripts/release-build.sh, with a function order from
# short profiled runs: BENCH_ORDER=0 leaves it out), the harness run BENCH_RUNS times (default 2) with
# go-x-oauth2, oauthflow (oauthflow-bench) and authflow-cli (`authflow token` on a cached token),
# the peak RSS of M2 for ours and Go's, then a markdown table of every run, the mean, and the
# ratio to Go against each target of issue 8.
#
# usage: scripts/bench.sh [HARNESS_DIR]
#   HARNESS_DIR   a writable copy of ../shared/bench; default $BENCH_HARNESS, else a copy made in
#                 $TMPDIR/oauthflow-harness from ../shared/bench (next to this repository).
# environment:
#   BENCH_BUILD_DIR   SwiftPM scratch path for the release build (default $TMPDIR/oauthflow-bench-build;
#                     outside the repository, so the repository's own .build is left alone)
#   BENCH_RUNS        harness runs (default 2)
#   BENCH_PIN         1 (default): the harness pins nginx to CPU 0 and the clients to the others;
#                     0: nothing pinned (what a service on a small VM gets); alternate: odd runs pinned,
#                     even runs unpinned, so both sit in one report (issue 21: BENCH_RUNS=12 gives six
#                     of each, and the report adds the median ratio of each kind)
#   BENCH_SKIP_BUILD  1: use the binaries already in BENCH_BUILD_DIR
#   BENCH_ORDER       0: link without the profiled function order (step 4; it needs valgrind)
#   BENCH_PORT, BENCH_NGINX_PREFIX   passed to the harness (its defaults: 18080, /tmp/oauthbench-nginx)
#   BENCH_REPORT      where the markdown goes as well as stdout (default $TMPDIR/oauthflow-bench-report.md)
#   BENCH_ALSO        more harness rows for the same runs, comma-separated (default curl-keepalive,c-rawsock:
#                     libcurl's own CLI and the raw-socket floor, what bounds M1 and M2; empty for none)
#
# Everything runs on 127.0.0.1. The harness's nginx is started and stopped by the harness (and
# here, briefly, to measure RSS); when it is already running, someone else is measuring and this
# script stops rather than disturb them. The CLI logs in once against a one-shot loopback endpoint.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TMP="${TMPDIR:-/tmp}"
HARNESS="${1:-${BENCH_HARNESS:-$TMP/oauthflow-harness}}"
BUILD="${BENCH_BUILD_DIR:-$TMP/oauthflow-bench-build}"
RUNS="${BENCH_RUNS:-2}"
ALSO="${BENCH_ALSO-curl-keepalive,c-rawsock}"
ONLY="go-x-oauth2,oauthflow,authflow-cli${ALSO:+,$ALSO}"
REPORT="${BENCH_REPORT:-$TMP/oauthflow-bench-report.md}"
export BENCH_PORT="${BENCH_PORT:-18080}"
export BENCH_NGINX_PREFIX="${BENCH_NGINX_PREFIX:-/tmp/oauthbench-nginx}"
TOKEN_URL="http://127.0.0.1:$BENCH_PORT/token"

say() { printf 'bench.sh: %s\n' "$*" >&2; }

# 1. The harness copy.
if [[ ! -x "$HARNESS/run-all.sh" ]]; then
  SHARED="$REPO/../shared/bench"
  [[ -x "$SHARED/run-all.sh" ]] || { say "no harness at $HARNESS and none at $SHARED to copy"; exit 2; }
  say "copying $SHARED to $HARNESS"
  mkdir -p "$(dirname "$HARNESS")"
  cp -r "$SHARED" "$HARNESS"
  chmod -R u+w "$HARNESS"   # ../shared may be read-only; the harness writes results and builds into its folder
fi

server_running() {
  [[ -f "$BENCH_NGINX_PREFIX/nginx.pid" ]] && kill -0 "$(cat "$BENCH_NGINX_PREFIX/nginx.pid")" 2>/dev/null
}
if server_running; then
  say "the harness's nginx is already running ($BENCH_NGINX_PREFIX): someone else is measuring; try again later"
  exit 3
fi

# 2. The release build of Documentation/CLI.md, "Installing, and the release build" (scripts/release-build.sh): static Swift runtime,
#    static libstdc++ when its archive is installed, lld with packed relative relocations. The
#    function order comes in step 4, once the CLI has a store to answer from.
if [[ "${BENCH_SKIP_BUILD:-0}" != 1 ]]; then
  say "building oauthflow-bench and authflow (scripts/release-build.sh) in $BUILD"
  "$REPO/scripts/release-build.sh" --scratch-path "$BUILD" oauthflow-bench authflow >/dev/null
fi
BIN="$BUILD/release"
for binary in oauthflow-bench authflow; do
  [[ -x "$BIN/$binary" ]] || { say "the build produced no $BIN/$binary"; exit 1; }
done

# 3. The CLI row: a catalog with provider "m5" (the harness appends the mode, so `authflow token m5`
#    is what M5 runs) and a store holding a token for it. M5 checks that the printed line is the
#    token of the harness's BENCH_TOKEN_FILE, so `authflow login` fetches exactly that token from a
#    one-shot loopback endpoint (the harness's nginx answers with another one).
WANT="$(grep -o 'bench-cached-access-token-[0-9a-f]*' "$HARNESS/lib/driver.py" | head -1)"
[[ -n "$WANT" ]] || { say "cannot find the M5 token in $HARNESS/lib/driver.py"; exit 1; }
CLI="$TMP/oauthflow-bench-cli"
rm -rf "$CLI"
mkdir -p "$CLI"
python3 "$REPO/scripts/bench-token-server.py" "$CLI/port" "$WANT" --once &
SERVER=$!
for _ in $(seq 1 100); do [[ -s "$CLI/port" ]] && break; sleep 0.1; done
cat > "$CLI/providers.json" <<JSON
[{"id": "m5", "clientID": "bench-client", "clientSecret": "bench-secret", "tokenURL": "http://127.0.0.1:$(cat "$CLI/port")/token", "scopes": []}]
JSON
if ! "$BIN/authflow" --config "$CLI/providers.json" --store "$CLI/store" login m5 --client-credentials >/dev/null 2>"$CLI/login.log"; then
  say "authflow login failed:"; cat "$CLI/login.log" >&2; kill "$SERVER" 2>/dev/null; exit 1
fi
wait "$SERVER" 2>/dev/null || true
[[ "$(AUTHFLOW_CONFIG="$CLI/providers.json" AUTHFLOW_STORE="$CLI/store" "$BIN/authflow" token m5)" == "$WANT" ]] \
  || { say "authflow token m5 does not print the harness's token"; exit 1; }

TSV="$CLI/clients.tsv"
printf 'oauthflow\t%s\n' "$BIN/oauthflow-bench" > "$TSV"
printf 'authflow-cli\t%s token\tAUTHFLOW_CONFIG=%s AUTHFLOW_STORE=%s\n' "$BIN/authflow" "$CLI/providers.json" "$CLI/store" >> "$TSV"

# 4. The function order (Documentation/CLI.md, "Installing, and the release build"; BENCH_ORDER=0 skips it): short runs of the same
#    work under callgrind (scripts/link-order.sh) list the functions each executable runs, and both
#    are linked again with those first. authflow: `token`, `status` and the offline `demo`;
#    oauthflow-bench: m5, pkce, m3, m1, m2 and m4 with small counts against the harness's nginx.
if [[ "${BENCH_SKIP_BUILD:-0}" != 1 && "${BENCH_ORDER:-1}" != 0 ]] && command -v valgrind >/dev/null; then
  orders="$BUILD/orders"
  rm -rf "$orders"
  mkdir -p "$orders"
  say "profiling for the function order (valgrind; about two minutes)"
  # valgrind profiles the process it starts (not children), so the environment is exported, not passed through env(1).
  (
    export AUTHFLOW_CONFIG="$CLI/providers.json" AUTHFLOW_STORE="$CLI/store"
    "$REPO/scripts/link-order.sh" "$orders/authflow.order" "$BIN/authflow" -- "$BIN/authflow" token m5
    "$REPO/scripts/link-order.sh" "$orders/authflow.order" "$BIN/authflow" -- "$BIN/authflow" status
  )
  "$REPO/scripts/link-order.sh" "$orders/authflow.order" "$BIN/authflow" -- "$BIN/authflow" demo
  (cd "$HARNESS" && BENCH_SERVER_CPU="" ./server-start.sh >/dev/null)
  trap '(cd "$HARNESS" && ./server-stop.sh >/dev/null 2>&1) || true' EXIT
  (
    export BENCH_NAME=order BENCH_TOKEN_URL="$TOKEN_URL" BENCH_WARMUP=10 BENCH_M1_N=200 BENCH_M2_N=500 BENCH_M3_N=10000 \
      BENCH_M4_CALLERS=100 BENCH_PKCE_N=1000
    for mode in m5 pkce m3 m1 m2 m4; do
      "$REPO/scripts/link-order.sh" "$orders/oauthflow-bench.order" "$BIN/oauthflow-bench" -- "$BIN/oauthflow-bench" "$mode"
    done
  )
  (cd "$HARNESS" && ./server-stop.sh >/dev/null)
  trap - EXIT
  for product in authflow oauthflow-bench; do
    say "linking $product again with $(wc -l < "$orders/$product.order") functions first"
    "$REPO/scripts/release-build.sh" --scratch-path "$BUILD" --order "$orders/$product.order" "$product" >/dev/null
  done
  [[ "$(AUTHFLOW_CONFIG="$CLI/providers.json" AUTHFLOW_STORE="$CLI/store" "$BIN/authflow" token m5)" == "$WANT" ]] \
    || { say "the ordered authflow does not print the harness's token"; exit 1; }
elif [[ "${BENCH_ORDER:-1}" != 0 && "${BENCH_SKIP_BUILD:-0}" != 1 ]]; then
  say "no valgrind: the executables keep the linker's function order"
fi

# Peak RSS of M2 (KiB): each client run once more, pinned like the harness pins it, the harness's
# environment, its resident-set peak from getrusage(RUSAGE_CHILDREN). Then, against the same nginx,
# ours once in `diag-handoffs`: context switches per M1 fetch (no wall clock; see Performance.md).
measure_rss() {
  local pin=() server_cpu=""
  if [[ "$RUN_PIN" != 0 && "$(nproc)" -ge 2 ]]; then pin=(taskset -c 1); server_cpu=0; fi
  (cd "$HARNESS" && BENCH_SERVER_CPU="$server_cpu" ./server-start.sh >/dev/null)
  trap '(cd "$HARNESS" && ./server-stop.sh >/dev/null 2>&1) || true' EXIT
  for client in go-x-oauth2:"$HARNESS/go/bin/go-x-oauth2" oauthflow:"$BIN/oauthflow-bench"; do
    local name="${client%%:*}" binary="${client#*:}"
    BENCH_NAME="$name" BENCH_TOKEN_URL="$TOKEN_URL" python3 - "$name" "${pin[@]}" "$binary" m2 <<'PY'
import resource, subprocess, sys
name, command = sys.argv[1], sys.argv[2:]
subprocess.run(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120, check=True)
print(f"RESULT {name} m2_peak_rss_kb_external {resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}")
PY
  done
  BENCH_NAME=oauthflow BENCH_TOKEN_URL="$TOKEN_URL" "${pin[@]}" "$BIN/oauthflow-bench" diag-handoffs 2>/dev/null \
    | grep -E '^RESULT oauthflow authflow_(voluntary|involuntary)_switches_per_fetch' || true
  (cd "$HARNESS" && ./server-stop.sh >/dev/null)
  trap - EXIT
}

# 5. The harness runs, each followed by the RSS measurement.
RESULTS=()
PINS=()
case "${BENCH_PIN:-1}" in
  0|1|alternate) ;;
  *) say "BENCH_PIN is 1, 0 or alternate, not '${BENCH_PIN}'"; exit 2 ;;
esac
for run in $(seq 1 "$RUNS"); do
  RUN_PIN="${BENCH_PIN:-1}"
  if [[ "$RUN_PIN" == alternate ]]; then RUN_PIN=$(( run % 2 )); fi
  PINS+=("$RUN_PIN")
  say "harness run $run of $RUNS ($([[ "$RUN_PIN" == 0 ]] && echo unpinned || echo pinned))"
  before="$(ls "$HARNESS/results/runs" 2>/dev/null | sort | tail -1 || true)"
  (cd "$HARNESS" && BENCH_PIN="$RUN_PIN" BENCH_EXTRA_CLIENTS="$TSV" BENCH_ONLY="$ONLY" ./run-all.sh >"$CLI/run-$run.log" 2>&1) \
    || { say "run-all.sh failed; see $CLI/run-$run.log"; tail -20 "$CLI/run-$run.log" >&2; exit 1; }
  latest="$(ls "$HARNESS/results/runs" | sort | tail -1)"
  [[ "$latest" != "$before" ]] || { say "run-all.sh wrote no new run"; exit 1; }
  say "measuring M2 peak RSS"
  measure_rss >> "$HARNESS/results/runs/$latest/results.txt"
  RESULTS+=("$HARNESS/results/runs/$latest")
done

# 6. The table.
BENCH_PINS="${PINS[*]}" python3 - "${RESULTS[@]}" <<'PY' | tee "$REPORT"
import json, os, re, statistics, sys
runs = sys.argv[1:]
pins = os.environ.get("BENCH_PINS", "").split()
def load(run):
    values = {}
    for line in open(os.path.join(run, "results.txt")):
        m = re.match(r"RESULT\s+(\S+)\s+(\S+)\s+(\S+)\s*$", line)
        if m:
            try: values[(m.group(1), m.group(2))] = float(m.group(3))
            except ValueError: pass
    return values
data = [load(r) for r in runs]
meta = json.load(open(os.path.join(runs[0], "meta.json")))
# (label, client, metric, Go metric, target op, target, unit, digits)
rows = [
    ("M1 fresh fetch, median", "oauthflow", "m1_median_us", "m1_median_us", "<=", 0.85, "µs", 1),
    ("M1 fresh fetch, p99", "oauthflow", "m1_p99_us", "m1_p99_us", "<=", 1.0, "µs", 1),
    ("M2 64 concurrent callers", "oauthflow", "m2_fetch_per_s", "m2_fetch_per_s", ">=", 1.25, "fetch/s", 0),
    ("M3 cached token", "oauthflow", "m3_ns_per_op", "m3_ns_per_op", "<=", 1.0, "ns", 1),
    ("PKCE pair", "oauthflow", "pkce_ns_per_op", "pkce_ns_per_op", "<=", 1.0, "ns", 0),
    ("M4 requests for 1,000 callers", "oauthflow", "m4_endpoint_hits", None, "==", 1, "", 0),
    ("M5 `authflow token` (cached)", "authflow-cli", "m5_median_ms", "m5_median_ms", "<=", 1.5, "ms", 1),
    ("M5 oauthflow-bench m5", "oauthflow", "m5_median_ms", "m5_median_ms", None, None, "ms", 1),
    ("peak RSS in M2", "oauthflow", "m2_peak_rss_kb_external", "m2_peak_rss_kb_external", "<=", 1.5, "MiB", 1),
    ("M1 voluntary context switches per fetch (diag-handoffs)", "oauthflow", "authflow_voluntary_switches_per_fetch", None, None, None, "", 2),
    ("of which the curl engine thread", "oauthflow", "authflow_voluntary_switches_per_fetch_engine", None, None, None, "", 2),
    ("of which the cooperative pool", "oauthflow", "authflow_voluntary_switches_per_fetch_pool", None, None, None, "", 2),
    ("M1 involuntary context switches per fetch", "oauthflow", "authflow_involuntary_switches_per_fetch", None, None, None, "", 2),
]
def fmt(v, digits, unit):
    if v is None: return "–"
    if unit == "MiB": v = v / 1024
    return f"{v:,.{digits}f}"
print(f"Machine: {meta.get('machine', '?')}\n")
print("Versions: " + ", ".join(f"{k} {v}" for k, v in meta.get("versions", {}).items() if k in ("nginx", "go", "x/oauth2", "curl", "hyperfine")) + "\n")
kind = lambda i: ("unpinned" if pins[i] == "0" else "pinned") if i < len(pins) else "?"
head = "| measure | " + " | ".join(f"run {i + 1} ({kind(i)}): Go | run {i + 1}: ours | run {i + 1}: ratio" for i in range(len(runs)))
head += " | mean ratio | target | result |"
print(head)
print("|---|" + "---:|" * (3 * len(runs) + 1) + "---|---|")
for label, client, metric, go_metric, op, target, unit, digits in rows:
    cells, ratios = [], []
    for d in data:
        ours = d.get((client, metric))
        go = d.get(("go-x-oauth2", go_metric)) if go_metric else None
        ratio = ours / go if ours is not None and go else None
        if ratio is not None: ratios.append(ratio)
        cells += [fmt(go, digits, unit), fmt(ours, digits, unit), f"{ratio:.2f}×" if ratio is not None else "–"]
    if op == "==":
        values = [d.get((client, metric)) for d in data]
        mean = None
        ok = all(v == target for v in values)
        verdict = "met" if ok else "missed"
        target_text = f"exactly {target}"
    elif op is None:
        mean = sum(ratios) / len(ratios) if ratios else None
        verdict, target_text = "(no target)", "–"
    else:
        mean = sum(ratios) / len(ratios) if ratios else None
        target_text = f"{op} {target}×"
        if mean is None:
            verdict = "no data"
        elif (op == "<=" and mean <= target) or (op == ">=" and mean >= target):
            verdict = "met"
        else:
            miss = (mean / target - 1) * 100 if op == "<=" else (1 - mean / target) * 100
            verdict = f"missed by {miss:.0f}%"
    print(f"| {label} ({unit or 'count'}) | " + " | ".join(cells) + f" | {f'{mean:.2f}×' if mean is not None else '–'} | {target_text} | {verdict} |")
peers = sorted({c for d in data for (c, m) in d if c not in ("go-x-oauth2", "oauthflow", "authflow-cli")})
if peers:
    print("\nOther rows of the same runs (M1 median µs / M2 fetch/s, and the ratio to Go of each):\n")
    print("| client | " + " | ".join(f"run {i + 1}" for i in range(len(runs))) + " |")
    print("|---|" + "---|" * len(runs))
    for peer in peers:
        cells = []
        for d in data:
            m1, m2 = d.get((peer, "m1_median_us")), d.get((peer, "m2_fetch_per_s"))
            g1, g2 = d.get(("go-x-oauth2", "m1_median_us")), d.get(("go-x-oauth2", "m2_fetch_per_s"))
            cell = f"{fmt(m1, 1, '')} ({m1 / g1:.2f}×)" if m1 and g1 else "–"
            cell += f" / {fmt(m2, 0, '')} ({m2 / g2:.2f}×)" if m2 and g2 else " / –"
            cells.append(cell)
        print(f"| {peer} | " + " | ".join(cells) + " |")
if len(set(pins)) > 1:
    print("\nM1 by pinning: the median over the runs of each kind of the ratio to Go's figure in the same run:\n")
    print("| runs | M1 median ratio | M1 p99 ratio |")
    print("|---|---:|---:|")
    for want, name in (("1", "pinned"), ("0", "unpinned")):
        picked = [d for i, d in enumerate(data) if i < len(pins) and pins[i] == want]
        def ratios(metric):
            return [d[("oauthflow", metric)] / d[("go-x-oauth2", metric)] for d in picked
                    if d.get(("oauthflow", metric)) is not None and d.get(("go-x-oauth2", metric))]
        cells = [f"{statistics.median(r):.2f}× ({len(r)})" if r else "–" for r in (ratios("m1_median_us"), ratios("m1_p99_us"))]
        print(f"| {name} | " + " | ".join(cells) + " |")
print(f"\nRuns: {', '.join(os.path.basename(r) for r in runs)} (raw RESULT lines in each run's results.txt).")
PY
say "report written to $REPORT"
