#!/usr/bin/env bash
# The agent's figures of issue 19 (Documentation/Performance.md, "The agent"):
#   1. a token through the agent's socket from a new client process, in one hyperfine run beside
#      `authflow token` from the store, `authflow token` through the agent, and Go's M5 (the harness's
#      go-x-oauth2 reading its token file) and /bin/true (the floor: a process that does nothing); the socket clients are agent-client (C, gcc -O2: the least
#      start-up cost; agent-c-static is the same client linked statically, as a Go program's own code
#      is) and socat; target: the agent path at most 0.5x Go's M5;
#   2. 1,000 concurrent socket requests (scripts/agent-bench/agent-load.c), BENCH_AGENT_REPEAT times,
#      in its three modes: 1,000 client threads released together ("threads"), one epoll thread
#      connecting and asking 1,000 times as fast as it can ("epoll"), and 1,000 connections opened
#      first, then 1,000 lines written at once ("burst"); target: p99 at most 5 ms, 0 errors; also
#      the agent's CPU time per request (/proc/PID/stat);
#      then the same load against scripts/agent-bench/floor-server.c, pinned as the agent is: the
#      least a server of the protocol does per connection (accept, SO_PEERCRED, read, answer,
#      close), so the floor of this machine and this load generator;
#   3. the agent's resident set (VmRSS in /proc/PID/status) idle with 10 providers, after start and
#      again after the runs above; target: at most 20 MiB;
#   4. before each round, how often the machine takes a CPU away from a program that never sleeps
#      (scripts/agent-bench/cpu-pauses.c, 5 s on every CPU at once): the pauses every request in
#      flight carries, whatever the server (the burst's own pauses are in client_pause_ms).
# Each of 1 and 2 runs pinned (the agent on CPU 0, the clients on CPU 1, as the harness pins nginx and
# its clients) and unpinned, BENCH_AGENT_ROUNDS times (default 1).
#
# usage: scripts/bench-agent.sh
# environment:
#   BENCH_BUILD_DIR     SwiftPM scratch path of the release build (scripts/release-build.sh; default
#                       $TMPDIR/oauthflow-bench-build, scripts/bench.sh's); BIN=$BENCH_BUILD_DIR/release/authflow is used
#   BENCH_AGENT_ORDER   1 (default, when valgrind is installed): first add the functions an agent run
#                       uses (start, 10 providers fetched, 200 requests, SIGTERM; scripts/link-order.sh)
#                       to $BENCH_BUILD_DIR/orders/authflow.order (where scripts/bench.sh keeps its
#                       function order of token, status and demo) and link authflow again with it, as
#                       CLI.md's "Installing, and the release build" says to do for the commands one
#                       runs; 0: measure the build as it is
#   BENCH_HARNESS       the harness (default ../shared/bench next to this repository): Go's client
#   BENCH_AGENT_RUNS    hyperfine runs per command (default 100, after 5 warm-up runs)
#   BENCH_AGENT_REPEAT  repeats of the 1,000 concurrent requests (default 5)
#   BENCH_AGENT_ROUNDS  pinned+unpinned rounds (default 1)
#
# Everything runs on loopback and under a temporary directory: a Python token endpoint (10
# client-credentials providers fetch their first token from it when the agent starts; tokens live 300
# days, so nothing is refreshed during the run), the agent with its default socket under a private
# XDG_RUNTIME_DIR, then SIGTERM to the agent and the endpoint (by their pids). RESULT lines go to
# stdout and $WORK/results.txt; a markdown table of the targets' figures follows on stdout.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TMP="${TMPDIR:-/tmp}"
BUILD="${BENCH_BUILD_DIR:-$TMP/oauthflow-bench-build}"
BIN="$BUILD/release/authflow"
HARNESS="${BENCH_HARNESS:-$REPO/../shared/bench}"
GO="$HARNESS/go/bin/go-x-oauth2"
RUNS="${BENCH_AGENT_RUNS:-100}"
REPEAT="${BENCH_AGENT_REPEAT:-5}"
ROUNDS="${BENCH_AGENT_ROUNDS:-1}"
say() { printf 'bench-agent.sh: %s\n' "$*" >&2; }
for tool in gcc hyperfine socat taskset python3; do command -v "$tool" >/dev/null || { say "needs $tool"; exit 2; }; done
[[ -x "$BIN" ]] || { say "no $BIN (scripts/release-build.sh --scratch-path DIR authflow; BENCH_BUILD_DIR=DIR)"; exit 2; }
[[ -x "$GO" ]] || { say "no $GO (the harness's setup.sh builds it)"; exit 2; }

WORK="$(mktemp -d "$TMP/oauthflow-bench-agent.XXXXXX")"
RESULTS="$WORK/results.txt"
AGENT="" SERVER="" FLOOR=""
cleanup() {
  [[ -n "$AGENT" ]] && kill -TERM "$AGENT" 2>/dev/null && wait "$AGENT" 2>/dev/null || true
  [[ -n "$FLOOR" ]] && kill -TERM "$FLOOR" 2>/dev/null && wait "$FLOOR" 2>/dev/null || true
  [[ -n "$SERVER" ]] && kill -TERM "$SERVER" 2>/dev/null && wait "$SERVER" 2>/dev/null || true
}
trap cleanup EXIT
result() { printf 'RESULT %s %s %s\n' "$1" "$2" "$3" | tee -a "$RESULTS"; }

gcc -O2 -o "$WORK/agent-client" "$REPO/scripts/agent-bench/agent-client.c"
gcc -O2 -static -o "$WORK/agent-client-static" "$REPO/scripts/agent-bench/agent-client.c"
gcc -O2 -pthread -o "$WORK/agent-load" "$REPO/scripts/agent-bench/agent-load.c"
gcc -O2 -o "$WORK/floor-server" "$REPO/scripts/agent-bench/floor-server.c"
gcc -O2 -o "$WORK/cpu-pauses" "$REPO/scripts/agent-bench/cpu-pauses.c"

# The token endpoint and the catalog of 10 client-credentials providers.
TOKEN="bench-agent-access-token-$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"
python3 "$REPO/scripts/bench-token-server.py" "$WORK/port" "$TOKEN" &
SERVER=$!
for _ in $(seq 1 100); do [[ -s "$WORK/port" ]] && break; sleep 0.1; done
PORT="$(cat "$WORK/port")"
python3 - "$WORK/providers.json" "$PORT" <<'PY'
import json, sys
path, port = sys.argv[1], sys.argv[2]
json.dump([{"id": f"p{i}", "grant": "client-credentials", "clientID": f"bench-client-{i}", "clientSecret": "bench-secret",
            "tokenURL": f"http://127.0.0.1:{port}/token", "scopes": []} for i in range(1, 11)], open(path, "w"), indent=1)
PY
export XDG_RUNTIME_DIR="$WORK/run" XDG_CONFIG_HOME="$WORK/config" AUTHFLOW_CONFIG="" AUTHFLOW_STORE=""
unset AUTHFLOW_AGENT AUTHFLOW_CONFIG AUTHFLOW_STORE AUTHFLOW_STORE_KEY_FILE
mkdir -m 0700 -p "$XDG_RUNTIME_DIR" "$XDG_CONFIG_HOME/authflow"
cp "$WORK/providers.json" "$XDG_CONFIG_HOME/authflow/providers.json"
SOCK="$XDG_RUNTIME_DIR/authflow/agent.sock"
printf '{"v":1,"token":"p1"}\n' > "$WORK/request"
printf '{"access_token":"%s","token_type":"Bearer","expires_at":%s}\n' "$TOKEN" "$(( $(date +%s) + 86400 ))" > "$WORK/go-token.json"

# True once the agent on socket $1 serves all 10 providers; tries $2 times, 0.1 s apart.
serves_all() {
  for _ in $(seq 1 "$2"); do
    local up=1
    for i in $(seq 1 10); do "$WORK/agent-client" "$1" "p$i" >/dev/null 2>&1 || { up=0; break; }; done
    [[ $up == 1 ]] && return 0
    sleep 0.1
  done
  return 1
}

# The function order of an agent run (BENCH_AGENT_ORDER), appended to the build's order file, then
# authflow linked again with it. valgrind profiles the agent it starts; a background job waits for
# its 10 providers, asks 200 times and stops it with SIGTERM (the agent then exits 0).
if [[ "${BENCH_AGENT_ORDER:-1}" != 0 ]] && command -v valgrind >/dev/null; then
  say "profiling an agent run for the function order (valgrind; about a minute)"
  ORDER="$BUILD/orders/authflow.order"
  mkdir -p "$BUILD/orders"
  PROFILE_SOCK="$WORK/profile.sock"
  (
    serves_all "$PROFILE_SOCK" 1200 || true
    for _ in $(seq 1 200); do "$WORK/agent-client" "$PROFILE_SOCK" p1 >/dev/null 2>&1 || true; done
    pkill -TERM -f -- "callgrind.*agent --socket $PROFILE_SOCK" || true   # valgrind itself, not link-order.sh
  ) &
  PROFILER=$!
  "$REPO/scripts/link-order.sh" "$ORDER" "$BIN" -- "$BIN" --config "$WORK/providers.json" --store "$WORK/profile-store" agent --socket "$PROFILE_SOCK"
  wait "$PROFILER" || true
  say "linking authflow again with $(wc -l < "$ORDER") functions first"
  "$REPO/scripts/release-build.sh" --scratch-path "$BUILD" --order "$ORDER" authflow >/dev/null
fi

# The agent, default socket, its own store.
"$BIN" --config "$WORK/providers.json" --store "$WORK/store" agent >"$WORK/agent.log" 2>&1 &
AGENT=$!
serves_all "$SOCK" 200 || { say "the agent did not serve all 10 providers in 20 s"; cat "$WORK/agent.log" >&2; exit 1; }
# The floor server, on its own socket.
"$WORK/floor-server" "$WORK/floor.sock" "$TOKEN" &
FLOOR=$!
for _ in $(seq 1 100); do "$WORK/agent-client" "$WORK/floor.sock" p1 >/dev/null 2>&1 && break; sleep 0.1; done
sleep 2   # let start-up work settle before the idle reading
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }   # user + system, every thread
rss() { awk -v key="$1:" '$1 == key { print $2 }' "/proc/$AGENT/status"; }
result agent rss_idle_after_start_kb "$(rss VmRSS)"
result agent threads_idle "$(awk '$1 == "Threads:" { print $2 }' "/proc/$AGENT/status")"

# Every command prints the same token.
check() { local got; got="$("$@" 2>&1 | head -1)"; [[ "$got" == "$TOKEN" ]] || { say "$* printed '$got', not the token"; exit 1; }; }
check "$WORK/agent-client" "$SOCK" p1
check "$WORK/agent-client-static" "$SOCK" p1
# socat prints the agent's whole answer line: the token must be in it.
socat "OPEN:$WORK/request!!STDOUT" "UNIX-CONNECT:$SOCK" | grep -q "\"access_token\":\"$TOKEN\"" || { say "socat got no token"; exit 1; }
check "$BIN" token p1
check "$BIN" --config "$WORK/providers.json" --store "$WORK/store" token p1
check env BENCH_TOKEN_FILE="$WORK/go-token.json" "$GO" m5
export BENCH_TOKEN_FILE="$WORK/go-token.json"

for round in $(seq 1 "$ROUNDS"); do
  say "round $round: CPU pauses (5 s on each CPU)"
  probes=()
  for cpu in $(seq 0 $(( $(nproc) - 1 ))); do "$WORK/cpu-pauses" "$cpu" 5 > "$WORK/pauses-$cpu" & probes+=($!); done
  wait "${probes[@]}"
  for cpu in $(seq 0 $(( $(nproc) - 1 ))); do sed "s/^RESULT cpu/RESULT pauses-r$round-cpu/" "$WORK/pauses-$cpu" | tee -a "$RESULTS"; done
  for kind in pinned unpinned; do
    if [[ $kind == pinned ]]; then
      taskset -a -cp 0 "$AGENT" >/dev/null; taskset -a -cp 0 "$FLOOR" >/dev/null; pin=(taskset -c 1)
    else
      taskset -a -cp 0-"$(( $(nproc) - 1 ))" "$AGENT" >/dev/null; taskset -a -cp 0-"$(( $(nproc) - 1 ))" "$FLOOR" >/dev/null; pin=()
    fi
    say "round $round, $kind: hyperfine ($RUNS runs of each)"
    "${pin[@]}" hyperfine -N --style none --warmup 5 --runs "$RUNS" --output null --export-json "$WORK/m5-$round-$kind.json" \
      -n agent-c "$WORK/agent-client $SOCK p1" \
      -n agent-c-static "$WORK/agent-client-static $SOCK p1" \
      -n agent-socat "socat OPEN:$WORK/request!!STDOUT UNIX-CONNECT:$SOCK" \
      -n authflow-via-agent "$BIN token p1" \
      -n authflow-store "$BIN --config $WORK/providers.json --store $WORK/store token p1" \
      -n go-m5 "$GO m5" \
      -n floor-true "$(command -v true)" >/dev/null
    python3 - "$WORK/m5-$round-$kind.json" "$kind" "$round" <<'PY' | tee -a "$RESULTS"
import json, sys
results = {r["command"]: r for r in json.load(open(sys.argv[1]))["results"]}
kind, round_ = sys.argv[2], sys.argv[3]
go = results["go-m5"]["median"]
for name, r in results.items():
    print(f"RESULT {name} r{round_}_{kind}_median_ms {r['median'] * 1e3:.3f}")
    print(f"RESULT {name} r{round_}_{kind}_ratio_to_go_m5 {r['median'] / go:.3f}")
PY
    for mode in threads epoll burst; do
      # The agent, then the floor server: the load, then the server's own CPU time (user + system,
      # every thread) per request of it.
      for server in "agent $AGENT $SOCK load_agent_cpu_us_per_request" "floor $FLOOR $WORK/floor.sock load_server_cpu_us_per_request"; do
        read -r who pid socket key <<< "$server"
        say "round $round, $kind: 1,000 concurrent requests x $REPEAT to the $who ($mode)"
        before=$(cpu_ticks "$pid")
        "${pin[@]}" "$WORK/agent-load" "$socket" p1 1000 "$REPEAT" "$who-r$round-$kind-$mode" "$mode" | tee -a "$RESULTS"
        result "$who-r$round-$kind-$mode" "$key" "$(( ($(cpu_ticks "$pid") - before) * 1000000 / $(getconf CLK_TCK) / (1000 * REPEAT) ))"
      done
    done
  done
done
sleep 2
result agent rss_idle_after_runs_kb "$(rss VmRSS)"
result agent rss_peak_kb "$(rss VmHWM)"
result agent open_fds_after_runs "$(ls "/proc/$AGENT/fd" | wc -l)"
python3 - "$RESULTS" <<'PY'
import collections, sys
r = collections.defaultdict(dict)
for line in open(sys.argv[1]):
    _, name, key, value = line.split()
    r[name][key] = float(value)
rounds = sorted({"_".join(k.split("_")[:2]) for k in r["go-m5"] if k.endswith("_ratio_to_go_m5")})
# The longest pause of the client between two writes over the repeats of a burst; "-" for the other modes.
pause = lambda d: f"{max(v for k, v in d.items() if k.endswith('_client_pause_ms')):.1f}" if any(k.endswith('_client_pause_ms') for k in d) else "-"
print("| round, kind | agent-c / Go M5 | agent-c-static / Go M5 | /bin/true / Go M5 | `authflow token` via agent / Go M5 | from the store / Go M5 |")
print("|---|---:|---:|---:|---:|---:|")
for rk in rounds:
    cells = " | ".join(f"{r[n].get(rk + '_ratio_to_go_m5', float('nan')):.2f}×"
                       for n in ("agent-c", "agent-c-static", "floor-true", "authflow-via-agent", "authflow-store"))
    print(f"| {rk.replace('_', ' ')} | {cells} |")
for rk in rounds:
    round_ = rk.split("_")[0]
    cells = "; ".join(f"{name.split('-')[-1]}: {p['pauses_1ms_per_s']:.1f}/s of 1 ms or more, {p['pauses_5ms_per_s']:.2f}/s of 5 ms or more, "
                      f"{p['paused_percent']:.2f}% of the time, longest {p['longest_pause_ms']:.1f} ms"
                      for name, p in sorted(r.items()) if name.startswith(f"pauses-{round_}-"))
    if rk.endswith("_pinned") and cells: print(f"\nCPU pauses before {round_}: {cells}")
print("\n| round, kind, load mode | agent median ms | agent p99 ms | floor median ms | floor p99 ms | errors | agent CPU µs/req | floor CPU µs/req | longest client pause ms (agent, floor) |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
for rk in rounds:
    round_, kind = rk.split("_")
    for mode in ("threads", "epoll", "burst"):
        agent, floor = r.get(f"agent-{round_}-{kind}-{mode}", {}), r.get(f"floor-{round_}-{kind}-{mode}", {})
        if not agent: continue
        ms = lambda d, k: f"{d.get(k, float('nan')) / 1e3:.2f}"
        print(f"| {round_} {kind} {mode} | {ms(agent, 'load_median_us')} | {ms(agent, 'load_p99_us')} | {ms(floor, 'load_median_us')} "
              f"| {ms(floor, 'load_p99_us')} | {int(agent.get('load_errors', 0) + floor.get('load_errors', 0))} "
              f"| {agent.get('load_agent_cpu_us_per_request', float('nan')):.0f} | {floor.get('load_server_cpu_us_per_request', float('nan')):.0f} "
              f"| {pause(agent)}, {pause(floor)} |")
a = r["agent"]
print(f"\nidle RSS: {a['rss_idle_after_start_kb']:.0f} KiB after start, {a['rss_idle_after_runs_kb']:.0f} KiB after the runs "
      f"(limit 20 480 KiB); open descriptors after the runs: {a['open_fds_after_runs']:.0f}")
PY
say "machine: $(nproc) CPUs, $(uptime)"
say "results: $RESULTS"
