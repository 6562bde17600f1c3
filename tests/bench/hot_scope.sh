#!/usr/bin/env bash
# tests/bench/hot_scope.sh: one hot scope (an on-sale), with and without a total, side by side.
#
# One orderhold-server (the Release build) on one redis-server, orderhold-bench closed loop
# (--concurrency, 4 connections) sending PlaceHold only, every hold in the one scope event:0
# (--scopes=1), ttl 2 s, over --users users (uniform; max_holds 3, so some are refused by the
# user's cap in every variant alike). Variants, each its own server and a flushed Redis, run in
# rounds interleaved A B C A B C ... (--rounds, default 3) so drift of this shared machine hits
# all alike:
#   unscoped  the same load without a scope (no index, no total): the floor
#   no_total  the scope's rule sets per-user limits only: the index is kept, no total checked
#   total     the rule also sets total_max_holds and total_max_units high enough never to refuse
#             (1,000,000,000): what checking a total costs when it does not bind
#   capacity  the rule sets capacity_units (held + sold) high enough never to refuse: the index and
#             the scope's units-sold counter read per PlaceHold (standalone only: a Redis Cluster
#             refuses capacities)
#   binding   total_max_holds 1000: an on-sale at its cap, most PlaceHolds refused by the total
# Per variant, the median over rounds of: PlaceHold/s (the bench's throughput), CPU per call of
# the server and of Redis (/proc and INFO cpu, µs), and Redis' own time per script call
# (INFO commandstats, FCALL usec_per_call); the ratios of `total` and `binding` to `no_total` in
# the same run. Output: a Markdown table on stdout, JSON in ${OUT:-build/bench/hot_scope}.json.
#   tests/bench/hot_scope.sh [--duration 10] [--rounds 3] [--concurrency 64] [--users 100000]
#   tests/bench/hot_scope.sh --smoke     (3 s per variant, 1 round: the script works)
#   tests/bench/hot_scope.sh --cluster   (also a Redis Cluster of 3 primaries, in the same rounds:
#                                        every variant on both, "c_" before the Cluster's names;
#                                        Redis figures summed over the primaries, and
#                                        scope_node_us: all Redis time of the scope's slot's node
#                                        per PlaceHold, the scope protocol's take and settle
#                                        included, against standalone's Redis time per PlaceHold.
#                                        The Cluster has no replicas, so its servers run the totals
#                                        without WAIT (ORDERHOLD_TESTING_TOTALS_WITHOUT_WAIT=1):
#                                        WAIT adds latency, not Redis time)
# What bounds a hot scope: every PlaceHold of one scope runs on one Redis thread (standalone: the
# primary's; Cluster: the scope's slot's, for its take and settle); tests/bench/README.md "A hot
# scope".
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# shellcheck source=tests/bench/lib.sh
source "${REPO}/tests/bench/lib.sh"
DURATION=10
ROUNDS=3
CONCURRENCY=64
USERS=100000
CLUSTER=0
while (($#)); do
  case "$1" in
    --duration) DURATION="$2"; shift 2 ;;
    --rounds) ROUNDS="$2"; shift 2 ;;
    --concurrency) CONCURRENCY="$2"; shift 2 ;;
    --users) USERS="$2"; shift 2 ;;
    --smoke) DURATION=3; ROUNDS=1; shift ;;
    --cluster) CLUSTER=1; shift ;;
    *) echo "usage: $0 [--duration S] [--rounds N] [--concurrency N] [--users N] [--smoke] [--cluster]" >&2
       exit 64 ;;
  esac
done
BUILD="${REPO}/build"
cmake --build "${BUILD}" --target orderhold-server orderhold-bench >/dev/null
SERVER="${BUILD}/server/orderhold-server"
BENCH="${BUILD}/client/orderhold-bench"
OUT="${OUT:-${BUILD}/bench/hot_scope}"
mkdir -p "$(dirname "${OUT}")"

WORK="$(mktemp -d)"
PIDS=()
trap stop_pids_and_work EXIT
VARIANTS=(unscoped no_total total capacity binding)
start_redis
STANDALONE_PORTS=("${REDIS_PORT}")
STANDALONE_URL="redis://127.0.0.1:${REDIS_PORT}"
if ((CLUSTER)); then
  start_cluster "${WORK}/cluster" 3
  PIDS+=("${CLUSTER_PIDS[@]}")
  VARIANTS+=(c_unscoped c_no_total c_total c_binding)
  OUT="${OUT}_cluster"
  # The port of the primary serving the scope event:0's index key (keys.h: its partition is
  # FNV-1a-32 of the scope mod 64).
  part="$(python3 -c '
h = 2166136261
for b in b"event:0":
    h = ((h ^ b) * 16777619) % 2**32
print(h % 64)')"
  # A node that does not serve the key's slot answers "MOVED <slot> <host>:<port>".
  answer="$(redis-cli -p "${CLUSTER_PORTS[0]}" TYPE "orderhold:{${part}}:s:event:0" 2>&1 | tr -d '\r')"
  SCOPE_PORT="${CLUSTER_PORTS[0]}"
  [[ "${answer}" == *MOVED* ]] && SCOPE_PORT="${answer##*:}"
fi
# Per variant: the Redis ports it uses, its URL and flags.
use_redis() {
  if [[ "$1" == c_* ]]; then
    REDIS_PORTS=("${CLUSTER_PORTS[@]}")
    REDIS_URL="${CLUSTER_URL}"
    REDIS_FLAGS=(--redis_mode=cluster)
    SERVER_ENV=(ORDERHOLD_TESTING_TOTALS_WITHOUT_WAIT=1)
    NODE_PORT="${SCOPE_PORT}"
  else
    REDIS_PORTS=("${STANDALONE_PORTS[@]}")
    REDIS_URL="${STANDALONE_URL}"
    REDIS_FLAGS=()
    SERVER_ENV=()
    NODE_PORT="${STANDALONE_PORTS[0]}"
  fi
}
rcli_all() { local p; for p in "${REDIS_PORTS[@]}"; do redis-cli -p "${p}" "$@" >/dev/null; done; }
redis_cpu_all() {
  local p sum=0
  for p in "${REDIS_PORTS[@]}"; do sum="$(awk -v a="${sum}" -v b="$(redis_cpu_s -p "${p}")" 'BEGIN { print a + b }')"; done
  echo "${sum}"
}
limits_for() {
  case "${1#c_}" in
    unscoped | no_total) echo '{"rules": [{"prefix": "event:", "max_holds": 3}]}' ;;
    total) echo '{"rules": [{"prefix": "event:", "max_holds": 3, "total_max_holds": 1000000000, "total_max_units": 1000000000}]}' ;;
    capacity) echo '{"rules": [{"prefix": "event:", "max_holds": 3, "capacity_units": 1000000000}]}' ;;
    binding) echo '{"rules": [{"prefix": "event:", "max_holds": 3, "total_max_holds": 1000}]}' ;;
  esac
}
node_usec() {  # all Redis time of one node so far, us (INFO commandstats)
  redis-cli -p "$1" INFO commandstats | tr -d '\r' |
    awk -F'[=,:]' '/^cmdstat_/ { u += $5 } END { printf "%d\n", u }'
}
fcall_stats() {  # "calls usec_per_call" over the primaries
  local p
  for p in "${REDIS_PORTS[@]}"; do redis-cli -p "${p}" INFO commandstats; done | tr -d '\r' |
    awk -F'[=,:]' '/^cmdstat_fcall:/ { c += $3; u += $5 } END { printf "%d %.2f\n", c, c ? u / c : 0 }'
}

RESULTS="${WORK}/results.tsv"
: >"${RESULTS}"
for ((round = 1; round <= ROUNDS; round++)); do
  for v in "${VARIANTS[@]}"; do
    use_redis "${v}"
    rcli_all FLUSHALL
    rcli_all CONFIG RESETSTAT
    limits_for "${v}" >"${WORK}/limits.json"
    port="$(free_port)"
    env "${SERVER_ENV[@]}" "${SERVER}" --grpc_address="127.0.0.1:${port}" --metrics_address=127.0.0.1:0 \
      --redis_url="${REDIS_URL}" "${REDIS_FLAGS[@]}" --max_holds=3 \
      --scope_limits="${WORK}/limits.json" --log_format=text >"${WORK}/server-${v}.log" 2>&1 &
    spid=$!
    PIDS+=("${spid}")
    wait_port "${port}"
    scoped=(--scopes=1)
    [[ "${v#c_}" == unscoped ]] && scoped=()
    # A short warm-up, then the measured run; CPU and Redis stats over the measured run only.
    "${BENCH}" --target="127.0.0.1:${port}" --connections=4 --concurrency="${CONCURRENCY}" \
      --duration=1s --warmup=0s --users="${USERS}" --ttl=2s "${scoped[@]}" --progress=false \
      --json >/dev/null
    rcli_all CONFIG RESETSTAT
    n0="$(node_usec "${NODE_PORT}")"
    s0="$(proc_cpu_s "${spid}")"
    r0="$(redis_cpu_all)"
    "${BENCH}" --target="127.0.0.1:${port}" --connections=4 --concurrency="${CONCURRENCY}" \
      --duration="${DURATION}s" --warmup=0s --users="${USERS}" --ttl=2s "${scoped[@]}" \
      --progress=false --json >"${WORK}/bench-${v}-${round}.json"
    s1="$(proc_cpu_s "${spid}")"
    r1="$(redis_cpu_all)"
    read -r fcalls fusec < <(fcall_stats)
    n1="$(node_usec "${NODE_PORT}")"
    kill -TERM "${spid}"
    wait "${spid}" || true
    tput="$(jq '.throughput' "${WORK}/bench-${v}-${round}.json")"
    sent="$(jq '.sent' "${WORK}/bench-${v}-${round}.json")"
    created="$(jq '[.codes // {} | to_entries[] | select(.key == "OK") | .value] | add // 0' \
      "${WORK}/bench-${v}-${round}.json")"
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "${v}" "${round}" "${tput}" "${sent}" \
      "${s0}" "${s1}" "${r0}" "${r1}" "${fusec:-0}" "$((n1 - n0))" >>"${RESULTS}"
    echo "hot_scope: round ${round} ${v}: ${tput} PlaceHold/s, OK ${created}" >&2
  done
done

# Medians per variant, and the ratios to no_total.
python3 - "${RESULTS}" "${OUT}.json" "${DURATION}" "${ROUNDS}" "${CONCURRENCY}" "${USERS}" <<'PY'
import json, statistics, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip()]
by = {}
for v, rnd, tput, sent, s0, s1, r0, r1, fusec, node in rows:
    sent = float(sent) or 1
    d = by.setdefault(v, {"tput": [], "server_us": [], "redis_us": [], "fcall_us": [],
                          "scope_node_us": []})
    d["scope_node_us"].append(float(node) / sent)
    d["tput"].append(float(tput))
    d["server_us"].append((float(s1) - float(s0)) * 1e6 / sent)
    d["redis_us"].append((float(r1) - float(r0)) * 1e6 / sent)
    d["fcall_us"].append(float(fusec))
med = {v: {k: statistics.median(x) for k, x in d.items()} for v, d in by.items()}
base = med["no_total"]["tput"]
out = {"duration_s": int(sys.argv[3]), "rounds": int(sys.argv[4]), "concurrency": int(sys.argv[5]),
       "users": int(sys.argv[6]), "variants": med}
if "total" in med:
    out["ratio_total_to_no_total"] = med["total"]["tput"] / base
    out["ratio_binding_to_no_total"] = med["binding"]["tput"] / base
if "capacity" in med and "total" in med:
    out["ratio_capacity_fcall_us_to_total"] = med["capacity"]["fcall_us"] / med["total"]["fcall_us"]
for v in ("no_total", "total", "binding"):
    if "c_" + v in med:
        out[f"ratio_cluster_scope_node_us_{v}"] = (med["c_" + v]["scope_node_us"] /
                                                   med[v]["scope_node_us"])
json.dump(out, open(sys.argv[2], "w"), indent=1)
print(f"| variant (one scope, closed loop {out['concurrency']}, {out['rounds']} rounds of "
      f"{out['duration_s']} s) | PlaceHold/s | x no_total | server CPU us/call | Redis CPU us/call "
      f"| FCALL us/call | scope node us/call |")
print("|---|---:|---:|---:|---:|---:|---:|")
names = ("unscoped", "no_total", "total", "capacity", "binding")
for v in [v for v in names + tuple("c_" + n for n in names) if v in med]:
    m = med[v]
    print(f"| {v} | {m['tput']:.0f} | {m['tput'] / base:.2f} | {m['server_us']:.1f} | "
          f"{m['redis_us']:.1f} | {m['fcall_us']:.1f} | {m['scope_node_us']:.1f} |")
for k, r in out.items():
    if k.startswith("ratio_cluster") or k == "ratio_capacity_fcall_us_to_total":
        print(f"\n{k}: {r:.2f}")
PY
