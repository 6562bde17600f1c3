#!/usr/bin/env bash
# tests/bench/redis_cost.sh: what each operation costs Redis, beside the minimal design, in one run
# on one fresh redis-server. Not part of the test suite; CI runs `--smoke` (figures only, no
# thresholds).
#
#   tests/bench/redis_cost.sh [--smoke] [--users N] [--memory-users "N ..."] [--idle-seconds S]
#                             [--bin-dir DIR] [--out DIR]
#
# 1 operations  orderhold-redis-cost (tests/bench/redis_cost.cc) drives each operation through the
#               production store (RedisHoldStore: the build's Functions library, 4 connections,
#               32 calls outstanding, pipelined on the client's I/O threads as a loaded server
#               sends them: Redis reads several commands per wake-up), over --users users
#               (default 1,000,000), each user once, in this order: PlaceHold of users drawn at
#               random as the minimal design's below (a fresh set: ~63 % creations, ~37 % retries:
#               the like-for-like comparison); PlaceHold creating one plain
#               hold per user; the same again (a client's retry: already held); a refusal (a second
#               order with max_holds 1); GetHold; ListHolds; ExtendHold; Pay (half the users);
#               CancelHold (the other half); a scoped PlaceHold with quantity 2 (other users: every
#               level checked); and the reaper per ended hold (a tenth as many users get a hold
#               placed in the past, then store Reap calls of 4 users end them all).
#               Before them, when the driver has the flag (not one of an older --bin-dir), the
#               first two as a server with --layout_migration_done runs them ("..., migration
#               over": no look for older shapes on a user's first hold), then a FLUSHALL, so that
#               both pairs start from the same empty store.
#               Then "place, one at a time": first holds of other users (at most 200,000) with
#               the server's default --redis_inline_wait=1ms, as a lightly loaded server sends a
#               lone call: one command per round trip, so Redis wakes up for each (the same
#               script; the CPU per call shows what the wake-ups cost Redis).
#               Per operation, from deltas around its run: script time per call (INFO
#               commandstats: FCALL usec / calls, the time inside the script) and Redis CPU per
#               call (INFO cpu: used_cpu_user + used_cpu_sys, every thread of redis-server,
#               sockets included, / the FCALL calls).
# 2 minimal     the minimal design (tests/bench/minimal_place.lua: TIME, ZCOUNT, ZADD NX,
#               PEXPIRE on one sorted set per user) on the same redis-server after a FLUSHALL,
#               driven by redis-benchmark (32 connections, no pipelining, --users calls on users
#               drawn at random from --users), and the same two figures.
# 3 memory      bytes per live hold (INFO used_memory delta / holds) at 1 and 3 holds per user for
#               each of --memory-users (default "100000 1000000"): OrderHold seeded through its
#               real place_hold (orderhold-seed), the minimal design through minimal_place
#               (redis-cli --pipe); both after a FLUSHALL on the same server.
# 4 idle        an orderhold-server (default flags, one replica) on an empty Redis, no calls, no
#               holds, no watchers: Redis commands per second by kind over --idle-seconds (60:
#               a window that holds one round of the reaper's slow looks and event trims, which
#               come every 30 s and 60 s), after 10 s of warmup (its start-up looks and the layout
#               migration's sweep). Commands run inside scripts are counted too (per kind).
#
# Prints a table and writes <out>/redis-cost.{md,json} (out: build/bench). --bin-dir DIR measures
# another build (the before side of a pair): DIR holds its orderhold-redis-cost, orderhold-seed
# and orderhold-server (the scripts are compiled into each; the driver must be built from a tree
# with tests/bench/redis_cost.cc).
set -euo pipefail

REPO="$(cd "$(dirname "$0")/../.." && pwd)"
SMOKE=0
USERS=1000000
MEMORY_USERS="100000 1000000"
IDLE_SECONDS=60
OUT="${REPO}/build/bench"
BIN_DIR=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --smoke) SMOKE=1; USERS=20000; MEMORY_USERS="20000"; IDLE_SECONDS=5; shift ;;
    --users) USERS="$2"; shift 2 ;;
    --memory-users) MEMORY_USERS="$2"; shift 2 ;;
    --idle-seconds) IDLE_SECONDS="$2"; shift 2 ;;
    --bin-dir) BIN_DIR="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    *) echo "redis_cost.sh: unknown argument $1" >&2; exit 64 ;;
  esac
done
for n in ${USERS} ${MEMORY_USERS} ${IDLE_SECONDS}; do
  [[ "${n}" =~ ^[1-9][0-9]*$ ]] || { echo "redis_cost.sh: counts must be positive numbers" >&2; exit 64; }
done

"${REPO}/deploy/install-deps.sh"
BUILD="${REPO}/build"
[[ -f "${BUILD}/build.ninja" ]] ||
  cmake -G Ninja -S "${REPO}" -B "${BUILD}" -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=ON >/dev/null
cmake --build "${BUILD}" --target orderhold-server orderhold-seed orderhold-redis-cost \
  -j "$(nproc)" >/dev/null
COST="${BIN_DIR:-${BUILD}/tests/bench}/orderhold-redis-cost"
SERVER="${BIN_DIR:-${BUILD}/server}/orderhold-server"
SEED="${BIN_DIR:-${BUILD}/tests/bench}/orderhold-seed"
for bin in "${COST}" "${SERVER}" "${SEED}"; do
  [[ -x "${bin}" ]] || { echo "redis_cost.sh: ${bin} is not an executable" >&2; exit 64; }
done

mkdir -p "${OUT}"
# shellcheck source=tests/bench/lib.sh
source "${REPO}/tests/bench/lib.sh"
bench_redis
URL="redis://127.0.0.1:${REDIS_PORT}"
ROWS="${WORK}/rows.jsonl"
: >"${ROWS}"

# The FCALL calls and µs since the last CONFIG RESETSTAT.
fcall_stats() {
  rcli INFO commandstats | tr -d '\r' |
    awk -F'[:=,]' '$1 == "cmdstat_fcall" { print $3, $5 }'
}

# measure NAME COMMAND...: runs COMMAND between two readings and appends a row.
measure() {
  local name="$1" cpu0 cpu1 line calls usec
  shift
  rcli CONFIG RESETSTAT >/dev/null
  cpu0="$(redis_cpu_s -p "${REDIS_PORT}")"
  line="$("$@")"
  cpu1="$(redis_cpu_s -p "${REDIS_PORT}")"
  read -r calls usec <<<"$(fcall_stats)"
  echo "bench: ${name}: ${line}" >&2
  jq -nc --arg name "${name}" --arg line "${line}" --argjson calls "${calls:-0}" \
    --argjson usec "${usec:-0}" --argjson cpu "$(awk -v a="${cpu0}" -v b="${cpu1}" 'BEGIN { print b - a }')" \
    '{name: $name, calls: $calls, script_us: (if $calls > 0 then $usec / $calls else null end),
      cpu_us: (if $calls > 0 then $cpu * 1e6 / $calls else null end), line: $line}' >>"${ROWS}"
}

cost() { "${COST}" --redis_url="${URL}" --users="${USERS}" "$@"; }

# 1. Each operation through the production store.
HALF=$((USERS / 2))
REAPED=$(((USERS + 9) / 10))
if [[ "$("${COST}" --helpfull 2>&1 || true)" == *-layout_migration_done* ]]; then
  measure "place, drawn at random, migration over" cost --op=place_random --user_prefix=r \
    --calls="${USERS}" --layout_migration_done
  measure "place, migration over" cost --op=place --calls="${USERS}" --layout_migration_done
  rcli FLUSHALL >/dev/null
fi
measure "place, drawn at random" cost --op=place_random --user_prefix=r --calls="${USERS}"
measure place cost --op=place --calls="${USERS}"
measure place_retry cost --op=place --calls="${USERS}"
measure place_refused cost --op=place_refused --calls="${USERS}"
measure get cost --op=get --calls="${USERS}"
measure list cost --op=list --calls="${USERS}"
measure extend cost --op=extend --calls="${USERS}"
measure pay cost --op=pay --calls="${HALF}"
measure cancel cost --op=cancel --first="${HALF}" --calls="$((USERS - HALF))"
measure place_scoped cost --op=place_scoped --user_prefix=s --calls="${USERS}"
measure pay_scoped cost --op=pay --user_prefix=s --calls="${HALF}"
# A runtime rule with a capacity (and one with a purchase cap too), and the Pay of their holds:
# only a driver built with runtime rules has the operation.
if [[ "$("${COST}" --helpfull 2>&1 || true)" == *-rule_capacity* ]]; then
  measure place_ruled cost --op=place_ruled --user_prefix=c --calls="${USERS}"
  measure pay_ruled cost --op=pay --user_prefix=c --calls="${HALF}"
  measure place_capped cost --op=place_ruled --user_prefix=q --calls="${USERS}" \
    --rule_purchased_units=8
  measure pay_capped cost --op=pay --user_prefix=q --calls="${HALF}"
fi
LONE=$((USERS < 200000 ? USERS : 200000))
measure "place, one at a time" cost --op=place --user_prefix=i --users="${LONE}" --calls="${LONE}" \
  --inline_wait=1ms
cost --op=expired_setup --user_prefix=e --users="${REAPED}" --calls="${REAPED}" >&2
measure reap cost --op=reap
REAP_ENDED="$(jq -r 'select(.name == "reap") | .line' "${ROWS}" | grep -o 'reaped=[0-9]*' | cut -d= -f2)"
[[ "${REAP_ENDED:-0}" == "${REAPED}" ]] || {
  echo "redis_cost.sh: the reaper ended ${REAP_ENDED:-0} holds, not ${REAPED}" >&2
  exit 1
}

# 2. The minimal design on the same server.
rcli FLUSHALL >/dev/null
rcli FUNCTION FLUSH >/dev/null
rcli -x FUNCTION LOAD <"${REPO}/tests/bench/minimal_place.lua" >/dev/null
minimal() {
  redis-benchmark -p "${REDIS_PORT}" -c 32 -n "${USERS}" -r "${USERS}" -q \
    FCALL minimal_place 1 "minimal:__rand_int__" o1 3600000 3 | tr '\r' '\n' | tail -1 |
    sed 's/^.*: /redis-benchmark: /'
}
measure minimal minimal

# 3. Bytes per live hold.
used_memory() { rcli INFO memory | tr -d '\r' | awk -F: '$1 == "used_memory" { print $2 }'; }
MEMORY="${WORK}/memory.jsonl"
: >"${MEMORY}"
for users in ${MEMORY_USERS}; do
  for per_user in 1 3; do
    rcli FLUSHALL >/dev/null
    before="$(used_memory)"
    "${SEED}" --redis_url="${URL}" --users="${users}" --holds_per_user="${per_user}" >&2
    ours="$(used_memory)"
    rcli FLUSHALL >/dev/null
    before_minimal="$(used_memory)"
    awk -v n="${users}" -v k="${per_user}" 'BEGIN {
      for (i = 0; i < n; i++) for (j = 0; j < k; j++) {
        key = "minimal:" i; order = "o" j
        printf "*7\r\n$5\r\nFCALL\r\n$13\r\nminimal_place\r\n$1\r\n1\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n$7\r\n3600000\r\n$1\r\n3\r\n",
          length(key), key, length(order), order
      } }' | rcli --pipe >/dev/null
    minimal="$(used_memory)"
    jq -nc --argjson users "${users}" --argjson per_user "${per_user}" \
      --argjson ours "$(((ours - before) / (users * per_user)))" \
      --argjson minimal "$(((minimal - before_minimal) / (users * per_user)))" \
      '{users: $users, per_user: $per_user, ours: $ours, minimal: $minimal}' >>"${MEMORY}"
    echo "bench: memory ${users} users x ${per_user}: $(tail -1 "${MEMORY}")" >&2
  done
done

# 4. An idle replica.
rcli FLUSHALL >/dev/null
rcli FUNCTION FLUSH >/dev/null
METRICS_PORT="$(free_port)"
"${SERVER}" --redis_url="${URL}" --grpc_address=127.0.0.1:0 \
  --metrics_address="127.0.0.1:${METRICS_PORT}" >"${WORK}/server.log" 2>&1 &
SERVER_PID=$!
PIDS+=("${SERVER_PID}")
wait_port "${METRICS_PORT}"
sleep 10
rcli CONFIG RESETSTAT >/dev/null
sleep "${IDLE_SECONDS}"
IDLE="$(rcli INFO commandstats | tr -d '\r' | awk -F'[:=,]' -v s="${IDLE_SECONDS}" '
  /^cmdstat_/ && $1 != "cmdstat_config|resetstat" && $1 != "cmdstat_info" {
    printf "%s{\"command\": \"%s\", \"per_s\": %.2f}", sep, substr($1, 9), $3 / s; sep = ","
  }')"
kill "${SERVER_PID}"

jq -n --slurpfile rows "${ROWS}" --slurpfile memory "${MEMORY}" --argjson idle "[${IDLE}]" \
  --argjson users "${USERS}" --argjson smoke "${SMOKE}" --argjson seconds "${IDLE_SECONDS}" \
  --arg machine "$(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), redis $(redis-server --version | grep -o 'v=[0-9.]*' | cut -d= -f2)" \
  '($rows | map(select(.name == "minimal"))[0]) as $m
   | {machine: $machine, smoke: ($smoke == 1), users: $users, idle_seconds: $seconds,
      operations: [$rows[] | (if .name == "reap" then
                    (.line | capture("reaped=(?<n>[0-9]+)").n | tonumber) as $n
                    | . + {name: "reap, per ended hold", script_us: (.script_us * .calls / $n),
                           cpu_us: (.cpu_us * .calls / $n)}
                  else . end)
                  | . + {script_vs_minimal: (if .script_us then .script_us / $m.script_us else null end),
                                  cpu_vs_minimal: (if .cpu_us then .cpu_us / $m.cpu_us else null end)}],
      memory: [$memory[] | . + {ratio: (.ours / .minimal)}],
      idle: $idle, idle_calls_per_s: ([$idle[].per_s] | add)}' >"${OUT}/redis-cost.json"

jq -r '
  "# What each operation costs Redis (" + .machine + (if .smoke then "; SMOKE: figures mean nothing" else "" end) + ")",
  "",
  "\(.users) users, each once per operation; script = INFO commandstats FCALL µs per call; CPU = redis-server CPU µs per FCALL call.",
  "",
  "| operation | calls | script µs | × minimal | Redis CPU µs | × minimal | outcomes |",
  "|---|---:|---:|---:|---:|---:|---|",
  (.operations[] | "| \(.name) | \(.calls) | \(.script_us * 100 | round / 100) | \(.script_vs_minimal * 100 | round / 100) | \(.cpu_us * 100 | round / 100) | \(.cpu_vs_minimal * 100 | round / 100) | \(.line | sub("^[a-z_]+ "; "") | sub(" seconds=.*"; "")) |"),
  "",
  "| bytes per live hold | OrderHold | minimal | ratio |",
  "|---|---:|---:|---:|",
  (.memory[] | "| \(.users) users × \(.per_user) | \(.ours) | \(.minimal) | \(.ratio * 100 | round / 100) |"),
  "",
  "Idle replica (no calls, no holds, no watchers), Redis commands per second over \(.idle_seconds) s: \(.idle_calls_per_s * 100 | round / 100) in all",
  "",
  "| command | per s |",
  "|---|---:|",
  (.idle[] | "| \(.command) | \(.per_s) |")' "${OUT}/redis-cost.json" | tee "${OUT}/redis-cost.md"
