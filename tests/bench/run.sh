#!/usr/bin/env bash
# tests/bench/run.sh: OrderHold's benchmark, every figure from ONE run on this machine with the same
# load generator (orderhold-bench), so the ratios compare like with like. Not part of the test
# suite; CI runs only `--smoke` (a few seconds, checks the pipeline and that figures come out).
#
#   tests/bench/run.sh [--smoke] [--duration 15] [--concurrency 64] [--out DIR]
#
# Phases (each starts from an empty Redis; servers and Redis are private, on free ports):
#   1 ceiling  orderhold-server --store=noop (same binary and proto, Redis replaced by a no-op
#              store), PlaceHold only, closed loop: what gRPC + our adapter/domain/metrics cost.
#   2 place    the real server, PlaceHold only, 100,000 users (uniform), closed loop.
#     mix      70% PlaceHold / 20% Pay / 10% ListHolds, same population.
#   3 redis    redis-benchmark running place_hold.lua via EVALSHA, same concurrency: what Redis
#              alone does with the same script, one command per round trip per client.
#   4 open     open loop (latency from the intended send time) at half of phase 2's throughput.
#   5 memory   INFO used_memory before/after 1,000,000 holds seeded through the real script:
#              3 holds per user (333,334 users, everyone at the default limit), and 1 per user.
# Output: a table on stdout, and <out>/results.json + <out>/results.md (default <repo>/build/bench).
# Needs the Release build of tests/run.sh (it builds it if missing).
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
DURATION=15
CONCURRENCY=64
USERS=100000
MEMORY_HOLDS=1000000
SMOKE=0
OUT="${REPO}/build/bench"
while (($#)); do
  case "$1" in
    --smoke) SMOKE=1 ;;
    --duration) DURATION="$2"; shift ;;
    --concurrency) CONCURRENCY="$2"; shift ;;
    --out) OUT="$2"; shift ;;
    *) echo "usage: $0 [--smoke] [--duration SECONDS] [--concurrency N] [--out DIR]" >&2; exit 64 ;;
  esac
  shift
done
WARMUP=2
if ((SMOKE)); then
  DURATION=1 WARMUP=0 MEMORY_HOLDS=30000 USERS=1000 CONCURRENCY=16
fi

"${REPO}/deploy/install-deps.sh"
BUILD="${REPO}/build"
if [[ ! -x "${BUILD}/client/orderhold-bench" || ! -x "${BUILD}/tests/bench/orderhold-seed" ]]; then
  cmake -G Ninja -S "${REPO}" -B "${BUILD}" -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=ON >/dev/null
fi
cmake --build "${BUILD}" --target orderhold-server orderhold-bench orderhold-seed -j "$(nproc)" \
  >/dev/null
SERVER="${BUILD}/server/orderhold-server"
BENCH="${BUILD}/client/orderhold-bench"
SEED="${BUILD}/tests/bench/orderhold-seed"

mkdir -p "${OUT}"
WORK="$(mktemp -d)"
PIDS=()
SERVER_PID=""
cleanup() {
  for pid in ${SERVER_PID} "${PIDS[@]}"; do kill "${pid}" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "${WORK}"
}
trap cleanup EXIT

# shellcheck source=tests/bench/lib.sh
source "${REPO}/tests/bench/lib.sh"

REDIS_PORT="$(free_port)"
redis-server --port "${REDIS_PORT}" --bind 127.0.0.1 --save '' --appendonly no \
  --dir "${WORK}" --logfile "${WORK}/redis.log" &
PIDS+=($!)
wait_port "${REDIS_PORT}"
rcli() { redis-cli -p "${REDIS_PORT}" "$@"; }
used_memory() { rcli INFO memory | tr -d '\r' | awk -F: '$1 == "used_memory" { print $2 }'; }

start_server() {  # store mode
  stop_server
  local port metrics
  port="$(free_port)" metrics="$(free_port)"
  "${SERVER}" --store="$1" --grpc_address="127.0.0.1:${port}" \
    --metrics_address="127.0.0.1:${metrics}" --redis_url="redis://127.0.0.1:${REDIS_PORT}" \
    2>"${WORK}/server-$1.log" &
  SERVER_PID=$!
  TARGET="127.0.0.1:${port}"
  wait_port "${port}"
}
stop_server() {
  if [[ -n "${SERVER_PID}" ]]; then
    kill "${SERVER_PID}" 2>/dev/null || true
    wait "${SERVER_PID}" 2>/dev/null || true
    SERVER_PID=""
  fi
}

bench() {  # name, extra flags...
  local name="$1"
  shift
  echo "bench: ${name}" >&2
  "${BENCH}" --target="${TARGET}" --duration="${DURATION}s" --warmup="${WARMUP}s" \
    --users="${USERS}" --json --progress=false "$@" >"${WORK}/${name}.json"
}
value() { jq -r "$2" "${WORK}/$1.json"; }

# 1. gRPC ceiling: the same server with the no-op store.
rcli FLUSHALL >/dev/null
start_server noop
bench ceiling --concurrency="${CONCURRENCY}" --mix=place=100

# 2. The real thing, PlaceHold only, then the mix. A 10 s ttl keeps most PlaceHolds creating (each
# user is hit every few seconds); refusals at the limit are reported, not hidden.
rcli FLUSHALL >/dev/null
start_server redis
bench place --concurrency="${CONCURRENCY}" --mix=place=100 --ttl=10s
rcli FLUSHALL >/dev/null
bench mix --concurrency="${CONCURRENCY}" --mix=place=70,pay=20,list=10 --ttl=10s

# 4. Open loop at half of the PlaceHold maximum.
PLACE_TPUT="$(value place .throughput)"
HALF_RATE="$(awk -v t="${PLACE_TPUT}" 'BEGIN { printf "%d", t / 2 }')"
rcli FLUSHALL >/dev/null
bench open --rate="${HALF_RATE}" --mix=place=100 --ttl=10s
stop_server

# 3. Redis alone: the embedded script (prelude + place_hold.lua), EVALSHA, same concurrency.
rcli FLUSHALL >/dev/null
SHA="$(cat "${REPO}/server/store/lua/prelude.lua" "${REPO}/server/store/lua/place_hold.lua" |
  rcli -x SCRIPT LOAD)"
REDIS_REQUESTS="$(awk -v t="${PLACE_TPUT}" -v d="${DURATION}" 'BEGIN { n = t * d * 2; if (n < 20000) n = 20000; printf "%d", n }')"
echo "bench: redis-benchmark EVALSHA (${REDIS_REQUESTS} requests)" >&2
redis-benchmark -p "${REDIS_PORT}" -c "${CONCURRENCY}" -n "${REDIS_REQUESTS}" -r "${USERS}" --csv \
  EVALSHA "${SHA}" 5 "orderhold:{0}:u:__rand_int__" "orderhold:{0}:due" \
  "orderhold:{0}:x:__rand_int__" "orderhold:{0}:xt:__rand_int__" "orderhold:{0}:events" \
  "u__rand_int__" "o__rand_int__" 10000 3 "" 86400000 1000 >"${WORK}/redis.csv"
REDIS_RPS="$(awk -F'"' 'NR == 2 { printf "%d", $4 }' "${WORK}/redis.csv")"
REDIS_P99="$(awk -F'"' 'NR == 2 { print $14 }' "${WORK}/redis.csv")"

# 5. Memory per live hold.
memory_per_hold() {  # users, holds per user
  rcli FLUSHALL >/dev/null
  local before after
  before="$(used_memory)"
  "${SEED}" --redis_url="redis://127.0.0.1:${REDIS_PORT}" --users="$1" --holds_per_user="$2" \
    >&2
  after="$(used_memory)"
  awk -v a="${after}" -v b="${before}" -v n="$(($1 * $2))" 'BEGIN { printf "%.1f", (a - b) / n }'
}
MEM3="$(memory_per_hold "$(((MEMORY_HOLDS + 2) / 3))" 3)"
MEM1="$(memory_per_hold "${MEMORY_HOLDS}" 1)"

# The table.
CEILING="$(value ceiling .throughput)"
MIX_TPUT="$(value mix .throughput)"
jq -n \
  --arg machine "$(nproc) cores, $(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo)" \
  --argjson smoke "${SMOKE}" --argjson duration "${DURATION}" --argjson concurrency "${CONCURRENCY}" \
  --argjson users "${USERS}" \
  --slurpfile ceiling "${WORK}/ceiling.json" --slurpfile place "${WORK}/place.json" \
  --slurpfile mix "${WORK}/mix.json" --slurpfile open "${WORK}/open.json" \
  --argjson redis_rps "${REDIS_RPS}" --argjson redis_p99 "${REDIS_P99:-0}" \
  --argjson mem3 "${MEM3}" --argjson mem1 "${MEM1}" --argjson memory_holds "${MEMORY_HOLDS}" \
  '{machine: $machine, date: (now | todate), smoke: ($smoke == 1), duration_s: $duration,
    concurrency: $concurrency, users: $users,
    ceiling: $ceiling[0], place: $place[0], mix: $mix[0], open: $open[0],
    redis_evalsha: {throughput: $redis_rps, p99_ms: $redis_p99},
    memory: {holds: $memory_holds, bytes_per_hold_3_per_user: $mem3,
             bytes_per_hold_1_per_user: $mem1},
    ratios: {place_vs_ceiling: ($place[0].throughput / $ceiling[0].throughput),
             mix_vs_ceiling: ($mix[0].throughput / $ceiling[0].throughput),
             place_vs_redis_evalsha: ($place[0].throughput / $redis_rps)},
    targets: {place_vs_ceiling_ge_0_7: ($place[0].throughput / $ceiling[0].throughput >= 0.7),
              open_p99_le_2ms: ($open[0].latency_ms.p99 <= 2),
              memory_le_120_bytes_per_hold: ($mem3 <= 120)}}' >"${OUT}/results.json"

jq -r '
  def f0: . * 1 | floor | tostring;
  def f2: (. * 100 | round / 100) | tostring;
  def codes: [.codes | to_entries[] | "\(.key) \(.value)"] | join(", ");
  "# OrderHold benchmark (\(.date))",
  "",
  "Machine: \(.machine). Closed loop: \(.concurrency) concurrent calls, \(.duration_s) s per phase, \(.users) users (uniform)." + (if .smoke then " SMOKE RUN: figures are not meaningful." else "" end),
  "",
  "| phase | calls/s | p50 ms | p99 ms | p99.9 ms | max ms | status codes |",
  "|---|---:|---:|---:|---:|---:|---|",
  (["ceiling (noop store), PlaceHold", .ceiling], ["PlaceHold", .place],
   ["mix 70/20/10", .mix], ["open loop PlaceHold @ \(.open.rate | f0)/s", .open]
   | "| \(.[0]) | \(.[1].throughput | f0) | \(.[1].latency_ms.p50 | f2) | \(.[1].latency_ms.p99 | f2) | \(.[1].latency_ms.p999 | f2) | \(.[1].latency_ms.max | f2) | \(.[1] | codes) |"),
  "| redis-benchmark EVALSHA place_hold.lua (-c \(.concurrency)) | \(.redis_evalsha.throughput) | | \(.redis_evalsha.p99_ms) | | | |",
  "",
  "| ratio / figure | value | target |",
  "|---|---:|---|",
  "| PlaceHold / ceiling | \(.ratios.place_vs_ceiling | f2) | >= 0.7: \(.targets.place_vs_ceiling_ge_0_7) |",
  "| mix / ceiling | \(.ratios.mix_vs_ceiling | f2) | |",
  "| PlaceHold / Redis EVALSHA alone | \(.ratios.place_vs_redis_evalsha | f2) | |",
  "| open-loop PlaceHold p99 at half max | \(.open.latency_ms.p99 | f2) ms | <= 2 ms: \(.targets.open_p99_le_2ms) |",
  "| Redis bytes per live hold, 3 holds/user (\(.memory.holds) holds) | \(.memory.bytes_per_hold_3_per_user) | <= 120: \(.targets.memory_le_120_bytes_per_hold) |",
  "| Redis bytes per live hold, 1 hold/user (\(.memory.holds) holds) | \(.memory.bytes_per_hold_1_per_user) | |"
' "${OUT}/results.json" | tee "${OUT}/results.md"

# Sanity (what the CI smoke checks): every phase produced calls and no service errors.
jq -e '[.ceiling, .place, .mix, .open] | all(.completed > 0 and .errors == 0)' \
  "${OUT}/results.json" >/dev/null || {
  echo "bench: a phase completed no calls or had service errors (UNAVAILABLE, DEADLINE_EXCEEDED, ...)" >&2
  exit 1
}
jq -e '.redis_evalsha.throughput > 0 and .memory.bytes_per_hold_3_per_user > 0' \
  "${OUT}/results.json" >/dev/null || { echo "bench: redis-benchmark or memory phase gave nothing" >&2; exit 1; }
echo "bench: wrote ${OUT}/results.json and ${OUT}/results.md" >&2
