#!/usr/bin/env bash
# An A/B of two builds beside Go in the same harness: scripts/bench.sh of each tree, alternated, so each
# of its rows is a ratio to Go's figure in the same run, and the two builds meet the same machine.
#
# usage: scripts/bench-ab.sh TREE_A TREE_B [ROUNDS]
#   TREE_A, TREE_B   checkouts to compare (`git worktree add DIR COMMIT`); each is built once with its own
#                    scripts/bench.sh (release build, function order) in $TMPDIR/oauthflow-ab-a and -b
#   ROUNDS           alternations after the builds (default 4); each runs the harness BENCH_RUNS times
# environment: BENCH_RUNS (default 2), BENCH_PIN (default 1; `alternate` for pinned and unpinned),
#   BENCH_HARNESS (default $TMPDIR/oauthflow-harness, a copy of ../shared/bench made by scripts/bench.sh)
# Writes $TMPDIR/oauthflow-ab/{a,b}N.md (each invocation's report) and prints, per measure, the median
# of the per-run ratios of A and of B with every value.
set -euo pipefail
A="$(cd "$1" && pwd)"; B="$(cd "$2" && pwd)"; ROUNDS="${3:-4}"
TMP="${TMPDIR:-/tmp}"; OUT="$TMP/oauthflow-ab"
mkdir -p "$OUT"; rm -f "$OUT"/*.md
export BENCH_HARNESS="${BENCH_HARNESS:-$TMP/oauthflow-harness}" BENCH_ALSO="${BENCH_ALSO-}"
export BENCH_RUNS="${BENCH_RUNS:-2}" BENCH_PIN="${BENCH_PIN:-1}"
one() {   # tag tree skip-build
  BENCH_BUILD_DIR="$TMP/oauthflow-ab-${1:0:1}" BENCH_REPORT="$OUT/$1.md" BENCH_SKIP_BUILD="$3" \
    bash "$2/scripts/bench.sh" >"$OUT/$1.log" 2>&1 || { echo "bench-ab.sh: $1 failed; see $OUT/$1.log" >&2; exit 1; }
  echo "bench-ab.sh: $1 done $(date -u +%T)" >&2
}
one a0 "$A" 0; one b0 "$B" 0
for i in $(seq 1 "$ROUNDS"); do one "a$i" "$A" 1; one "b$i" "$B" 1; done
python3 - "$OUT" <<'PY'
import glob, os, statistics, sys
rows = {}
for path in sorted(glob.glob(os.path.join(sys.argv[1], "*.md"))):
    build = os.path.basename(path)[0]
    for line in open(path):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 10 or cells[0] in ("measure",) or cells[0].startswith("---"):
            continue
        for i in range(3, len(cells) - 3, 3):   # each run: Go, ours, ratio
            name, value = cells[0], cells[i].rstrip("×")
            if value in ("–", ""):   # no Go figure: ours itself
                name, value = name + " (ours)", cells[i - 1].replace(",", "")
            try:
                number = float(value)
            except ValueError:
                continue
            rows.setdefault(name, {}).setdefault(build, []).append(number)
print("| measure | A: median | B: median | A: every run | B: every run |\n|---|---:|---:|---|---|")
for name, by in rows.items():
    if "a" in by and "b" in by:
        a, b = by["a"], by["b"]
        print(f"| {name} | {statistics.median(a):.3g} | {statistics.median(b):.3g} | {', '.join(f'{v:g}' for v in sorted(a))} | {', '.join(f'{v:g}' for v in sorted(b))} |")
PY
