#!/usr/bin/env bash
# callgrind-burst.sh: the instructions `authflow agent` executes per socket request in agent-load's
# burst mode (1,000 connections open, then 1,000 lines written at once), counted by valgrind's
# callgrind over every thread of the agent. An instruction count does not move with the machine's
# load, so it compares builds where latencies on a shared machine cannot (Documentation/Agent.md,
# "Design").
#
# usage: scripts/agent-bench/callgrind-burst.sh BINARY [REQUESTS=1000] [BURSTS=2]
#   BINARY (a release build of authflow, scripts/release-build.sh) serves 10 client-credentials
#   providers from a loopback Python token endpoint, on its own socket and store under a temporary
#   directory, under `valgrind --tool=callgrind --separate-threads=no`. Once all 10 providers
#   answer, the counters are zeroed (callgrind_control -z); then BURSTS bursts of REQUESTS requests
#   for p1 (every answer checked to hold the token); then the counters are dumped. Prints
#   `RESULT callgrind instructions_per_request N` (the dump's total over REQUESTS x BURSTS; accepting
#   the connections counts, as in a real burst) and the total. The agent and the endpoint are
#   stopped by pid and the directory removed when it exits. Takes a minute or two.
#   With CLIENT_UID=N (as root), p1's catalog entry allows uid N (`agentAllow`) and agent-load runs
#   as that uid (setpriv): the path of a peer other than the agent's own uid, which the socket loops
#   never answer from their memo.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BIN="${1:?usage: $0 BINARY [REQUESTS] [BURSTS]}"
REQUESTS="${2:-1000}" BURSTS="${3:-2}"
for tool in gcc valgrind callgrind_control python3; do command -v "$tool" >/dev/null || { echo "needs $tool" >&2; exit 2; }; done
CLIENT_UID="${CLIENT_UID:-}"
W="$(mktemp -d "${TMPDIR:-/tmp}/oauthflow-callgrind-burst.XXXXXX")"
[[ -z "$CLIENT_UID" ]] || chmod 0711 "$W"   # the other uid passes through to the socket
gcc -O2 -pthread -o "$W/agent-load" "$REPO/scripts/agent-bench/agent-load.c"
gcc -O2 -o "$W/agent-client" "$REPO/scripts/agent-bench/agent-client.c"
TOKEN="bench-agent-access-token-$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"
python3 "$REPO/scripts/bench-token-server.py" "$W/port" "$TOKEN" &
PIDS=($!)
trap 'kill "${PIDS[@]}" 2>/dev/null; wait 2>/dev/null; rm -rf "$W"' EXIT
for _ in $(seq 100); do [[ -s "$W/port" ]] && break; sleep 0.1; done
python3 - "$W/providers.json" "$(cat "$W/port")" "$CLIENT_UID" <<'PY'
import json, sys
providers = [{"id": f"p{i}", "grant": "client-credentials", "clientID": f"bench-client-{i}", "clientSecret": "bench-secret",
              "tokenURL": f"http://127.0.0.1:{sys.argv[2]}/token", "scopes": []} for i in range(1, 11)]
if sys.argv[3]: providers[0]["agentAllow"] = [f"uid:{sys.argv[3]}"]
json.dump(providers, open(sys.argv[1], "w"))
PY
SOCK="$W/agent.sock"
# A long client timeout: under callgrind the agent is ~50 times slower, and a connection accepted
# before its line is written must not be dropped while it waits.
valgrind --tool=callgrind --separate-threads=no --callgrind-out-file="$W/callgrind.out" \
  "$BIN" --config "$W/providers.json" --store "$W/store" agent --socket "$SOCK" --client-timeout 120 > "$W/agent.log" 2>&1 &
AGENT=$!
PIDS+=("$AGENT")
up=0
for _ in $(seq 1200); do
  up=1
  for i in $(seq 1 10); do "$W/agent-client" "$SOCK" "p$i" >/dev/null 2>&1 || { up=0; break; }; done
  [[ $up == 1 ]] && break
  sleep 0.1
done
[[ $up == 1 ]] || { echo "the agent did not serve all 10 providers in 2 minutes" >&2; cat "$W/agent.log" >&2; exit 1; }
sleep 1
callgrind_control -z "$AGENT" >/dev/null
as_client=()
[[ -z "$CLIENT_UID" ]] || as_client=(setpriv --reuid="$CLIENT_UID" --regid="$CLIENT_UID" --clear-groups)
"${as_client[@]}" "$W/agent-load" "$SOCK" p1 "$REQUESTS" "$BURSTS" callgrind burst > "$W/load.txt"
errors="$(awk '$1 == "RESULT" && $2 == "callgrind" && $3 == "load_errors" { print $4 }' "$W/load.txt")"
[[ "${errors:-1}" == 0 ]] || { echo "agent-load reported errors:" >&2; cat "$W/load.txt" >&2; exit 1; }
callgrind_control -d "$AGENT" >/dev/null
dump="$(ls "$W"/callgrind.out.* 2>/dev/null | sort -t. -k3 -n | tail -1)"
total="$(awk '/^(summary|totals):/ { print $2; exit }' "$dump")"
echo "RESULT callgrind instructions_total $total"
echo "RESULT callgrind instructions_per_request $(( total / (REQUESTS * BURSTS) ))"
