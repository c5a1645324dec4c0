#!/usr/bin/env bash
# burst-ab.sh: an A/B of `authflow agent` builds in agent-load's burst mode (1,000 connections open,
# then 1,000 lines written at once; 5 bursts per cell), beside floor-server.c (and
# uring-floor-server.c when liburing-dev is installed), in rounds whose order of servers
# alternates. Documentation/PerformanceLog.md ("2026-12-04") records its runs.
#
# usage: [KIND=pinned|unpinned] [ROUNDS=5] [START_PINNED="NAME ..."] scripts/agent-bench/burst-ab.sh NAME=BINARY ...
#   Each BINARY (a release build of authflow) serves 10 client-credentials providers from a loopback
#   Python token endpoint, on its own socket and store under a temporary directory. Like
#   scripts/bench-agent.sh, each agent is started unpinned and then, with KIND=pinned, moved to CPU 0
#   (`taskset -a -p`; the clients run on CPU 1); a NAME in START_PINNED is started under
#   `taskset -c 0` instead (so it starts with one socket loop).
# Prints a line per round and server: the p99 and median over the 5,000 requests (ms), errors, the
# server's CPU time per request (µs, from /proc/PID/stat), the client's longest pause between two
# writes (ms), each burst's p99 and how long each burst's writing took (ms). Everything it started
# is stopped by pid, and its temporary directory removed, when it exits.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
KIND="${KIND:-pinned}" ROUNDS="${ROUNDS:-5}"
(( $# > 0 )) || { echo "usage: $0 NAME=BINARY ..." >&2; exit 2; }
W="$(mktemp -d "${TMPDIR:-/tmp}/oauthflow-burst-ab.XXXXXX")"
gcc -O2 -pthread -o "$W/agent-load" "$REPO/scripts/agent-bench/agent-load.c"
gcc -O2 -o "$W/floor-server" "$REPO/scripts/agent-bench/floor-server.c"
gcc -O2 -o "$W/agent-client" "$REPO/scripts/agent-bench/agent-client.c"
FLOORS=(floor)
if [[ -e /usr/include/liburing.h ]]; then   # Debian: liburing-dev
  gcc -O2 -o "$W/uring-floor-server" "$REPO/scripts/agent-bench/uring-floor-server.c" -luring
  FLOORS+=(uring-floor)
fi
TOKEN="bench-agent-access-token-$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"
python3 "$REPO/scripts/bench-token-server.py" "$W/port" "$TOKEN" &
PIDS=($!)
trap 'kill "${PIDS[@]}" 2>/dev/null; wait 2>/dev/null; rm -rf "$W"' EXIT
for _ in $(seq 100); do [[ -s "$W/port" ]] && break; sleep 0.1; done
python3 - "$W/providers.json" "$(cat "$W/port")" <<'PY'
import json, sys
json.dump([{"id": f"p{i}", "grant": "client-credentials", "clientID": f"bench-client-{i}", "clientSecret": "bench-secret",
            "tokenURL": f"http://127.0.0.1:{sys.argv[2]}/token", "scopes": []} for i in range(1, 11)], open(sys.argv[1], "w"))
PY
declare -A SOCK PID
NAMES=()
for arg in "$@"; do
  name="${arg%%=*}" bin="${arg#*=}"
  NAMES+=("$name")
  start=()
  [[ " ${START_PINNED:-} " == *" $name "* ]] && start=(taskset -c 0)
  "${start[@]}" "$bin" --config "$W/providers.json" --store "$W/store-$name" agent --socket "$W/$name.sock" > "$W/$name.log" 2>&1 &
  PID[$name]=$! SOCK[$name]="$W/$name.sock"
  PIDS+=($!)
done
for name in "${FLOORS[@]}"; do
  "$W/$name-server" "$W/$name.sock" "$TOKEN" &
  PID[$name]=$! SOCK[$name]="$W/$name.sock"
  PIDS+=($!)
  NAMES+=("$name")
done
for name in "${NAMES[@]}"; do
  for _ in $(seq 200); do "$W/agent-client" "${SOCK[$name]}" p1 >/dev/null 2>&1 && break; sleep 0.1; done
done
sleep 2
client=()
for name in "${NAMES[@]}"; do
  if [[ $KIND == pinned ]]; then
    taskset -a -cp 0 "${PID[$name]}" >/dev/null
    client=(taskset -c 1)
  else
    taskset -a -cp 0-"$(( $(nproc) - 1 ))" "${PID[$name]}" >/dev/null
  fi
done
echo "# $(date -u +%H:%M:%S) UTC, KIND=$KIND, ROUNDS=$ROUNDS, load $(cut -d' ' -f1-3 /proc/loadavg)"
ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
for round in $(seq "$ROUNDS"); do
  order=("${NAMES[@]}")
  (( round % 2 == 0 )) && mapfile -t order < <(printf '%s\n' "${NAMES[@]}" | tac)
  for name in "${order[@]}"; do
    out="$W/out-$round-$name"
    before=$(ticks "${PID[$name]}")
    "${client[@]}" "$W/agent-load" "${SOCK[$name]}" p1 1000 5 "$name" burst > "$out"
    cpu=$(( ($(ticks "${PID[$name]}") - before) * 1000000 / $(getconf CLK_TCK) / 5000 ))
    awk -v round="$round" -v name="$name" -v cpu="$cpu" '
      $3 == "load_p99_us" { p99 = $4 / 1000 } $3 == "load_median_us" { median = $4 / 1000 } $3 == "load_errors" { errors = $4 }
      $3 ~ /^load_r[0-9]+_p99_us$/ { bursts = bursts sprintf(" %.2f", $4 / 1000) }
      $3 ~ /_client_pause_ms$/ && $4 > pause { pause = $4 }
      $3 ~ /_write_ms$/ { writes = writes sprintf(" %.1f", $4) }
      END { printf "r%s %s p99=%.2f median=%.2f errors=%d cpu_us_per_req=%d max_client_pause_ms=%.1f bursts:%s writes:%s\n", round, name, p99, median, errors, cpu, pause, bursts, writes }' "$out"
  done
done
