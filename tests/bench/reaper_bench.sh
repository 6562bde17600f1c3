#!/usr/bin/env bash
# tests/bench/reaper_bench.sh: the reaper at scale (issue "Hold lifecycle"). Not part of the test
# suite; CI runs only `--smoke` (small sizes, short windows: checks the pipeline and that figures
# come out).
#
#   tests/bench/reaper_bench.sh [--smoke] [--rate 5000] [--window 30] [--backlog 60] [--no-replicas]
#                               [--no-cluster] [--cluster-only] [--drain-only] [--out DIR]
# (--drain-only: phase 4 alone, written to <out>/reaper-drain.md; --cluster-only: phase 5 alone,
# written to <out>/reaper-cluster.md.)
#
# For each size (100,000 users and 1,000,000 users, 3 holds each: 300,000 and 3,000,000 live
# holds), on a fresh private redis-server:
#   1 seed     orderhold-seed writes the holds through the real place_hold.lua, pipelined, with
#              expire times spread so that --rate holds expire every second, starting shortly
#              after seeding ends (--first_expiry): first the holds of the first 100,000 users
#              (both sizes: the same holds, reaped during the measurement window), then, for the
#              large size, those of the other 900,000 users, expiring after them at the same rate
#              (they keep expiries flowing for the replica phases).
#   2 reap     one orderhold-server (default --reap_interval=1s) reaps; once expiries are flowing,
#              /metrics is scraped at the start and end of a --window of seconds; the difference
#              gives the reaper lag percentiles (orderhold_reaper_lag_seconds, interpolated within
#              buckets as PromQL's histogram_quantile does), the mean tick time
#              (orderhold_reaper_tick_duration_seconds: mostly pacing), the mean Redis time per
#              tick (orderhold_reaper_tick_redis_seconds: the sum of its calls' round trips, which
#              includes queueing and the server's threads on a busy machine), Redis' own script
#              time per tick (INFO commandstats FCALL/EVALSHA/EVAL µs over the window / its ticks:
#              no request load runs, so the reaper's calls, heartbeats and trims) and holds reaped
#              per second;
#              the backlog gauge is sampled every second (max reported).
# Then, on the 1,000,000-user Redis (still expiring --rate holds per second):
#   3 replicas two more servers join: each replica's share of the reaping over a window shows the
#              work is divided, not tripled; then two replicas are stopped with SIGTERM (graceful:
#              they hand their partitions over) and the survivor's lag is measured over the next
#              window; then two new replicas join and are killed with SIGKILL (no handover): the
#              survivor's lag over the next window includes the takeover, which waits for
#              --reaper_lease (3s) while standby reaping (partitions 1.5 intervals overdue) covers
#              the dead replicas' partitions; then the same with three fresh replicas at
#              --reap_interval=400ms (lease kept at 3s, as published).
# The Redis-time-per-tick ratios (1,000,000 users / 100,000 users, same expiry rate) show the
# reaper's cost grows with the due holds, not with the users.
# Then, on a fresh redis-server:
#   4 drain    a backlog as after an outage: with no server running, --rate holds per second
#              become due over --backlog seconds (--rate x --backlog holds, 3 per user, seeded with
#              expire times spread over that window; the script waits until the last is due).
#              Then ONE server starts (default flags) with no request load, and the due indexes
#              in Redis are polled every 0.1 s (ZCARD: users with holds left) until empty: time
#              to the first reaped hold and to all reaped (from the server's start), drain rate
#              (holds / the time between), and the server's expired counter as a cross-check.
# Then (unless --no-cluster):
#   5 cluster  phases 1 and 2 for the largest size (1,000,000 users) again, on a Redis Cluster of 3
#              primaries and no replicas (redis-server --cluster-enabled yes on free ports, formed
#              with `redis-cli --cluster create`: 21/22/21 of the 64 partition tags per primary):
#              orderhold-seed and the one server in --redis_mode=cluster with the three nodes as
#              seeds. Same expiry rate and window; its row in the table is "<users> (cluster, 3
#              primaries)", and the lag p99 is compared with the single-Redis row of that size. On
#              this machine the 3 Redis processes share 2 cores with the server: the figure shows
#              that the reaper's 64 calls per tick, routed to 3 nodes, keep up, not a speed-up.
# Output: a table on stdout and <out>/reaper.md (default <repo>/build/bench).
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
RATE=5000
WINDOW=30
BACKLOG_S=60
SIZES=(100000 1000000)
SMOKE=0
REPLICAS=1
CLUSTER=1
CLUSTER_ONLY=0
DRAIN_ONLY=0
OUT="${REPO}/build/bench"
while (($#)); do
  case "$1" in
    --smoke) SMOKE=1 ;;
    --rate) RATE="$2"; shift ;;
    --window) WINDOW="$2"; shift ;;
    --backlog) BACKLOG_S="$2"; shift ;;
    --no-replicas) REPLICAS=0 ;;
    --no-cluster) CLUSTER=0 ;;
    --cluster-only) CLUSTER_ONLY=1 ;;
    --drain-only) DRAIN_ONLY=1 ;;
    --out) OUT="$2"; shift ;;
    *) echo "usage: $0 [--smoke] [--rate N] [--window SECONDS] [--backlog SECONDS] [--no-replicas] [--no-cluster] [--cluster-only] [--drain-only] [--out DIR]" >&2
       exit 64 ;;
  esac
  shift
done
# Seconds between the end of seeding and the first expiry: the server starts meanwhile (about 1 s)
# and must not see the first expiries late. The smoke's small seeds need less.
MARGIN=15
if ((SMOKE)); then
  RATE=500 WINDOW=3 BACKLOG_S=3 SIZES=(2000 20000) MARGIN=5
fi
ALL_SIZES=("${SIZES[@]}")
LARGEST="${SIZES[-1]}"
((DRAIN_ONLY)) && SIZES=() CLUSTER=0
((CLUSTER_ONLY)) && SIZES=() CLUSTER=1

"${REPO}/deploy/install-deps.sh"
BUILD="${REPO}/build"
if [[ ! -x "${BUILD}/server/orderhold-server" || ! -x "${BUILD}/tests/bench/orderhold-seed" ]]; then
  cmake -G Ninja -S "${REPO}" -B "${BUILD}" -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=ON >/dev/null
fi
cmake --build "${BUILD}" --target orderhold-server orderhold-seed -j "$(nproc)" >/dev/null
SERVER="${BUILD}/server/orderhold-server"
SEED="${BUILD}/tests/bench/orderhold-seed"

mkdir -p "${OUT}"
WORK="$(mktemp -d)"
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill -9 "${pid}" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "${WORK}"
}
trap cleanup EXIT

# shellcheck source=tests/bench/lib.sh
source "${REPO}/tests/bench/lib.sh"
sleep_until() { local d; d="$(awk -v t="$1" -v n="$(now_s)" 'BEGIN { d = t - n; print (d > 0 ? d : 0) }')"; sleep "${d}"; }

# start_redis / start_redis_cluster -> REDIS_URL and REDIS_MODE (the servers' and the seeder's
# --redis_url and --redis_mode); start_redis also sets REDIS_PORT.
start_redis() {
  REDIS_PORT="$(free_port)"
  redis-server --port "${REDIS_PORT}" --bind 127.0.0.1 --save '' --appendonly no \
    --dir "${WORK}" --logfile "${WORK}/redis-${REDIS_PORT}.log" &
  REDIS_PID=$!
  PIDS+=("${REDIS_PID}")
  wait_port "${REDIS_PORT}"
  REDIS_URL="redis://127.0.0.1:${REDIS_PORT}" REDIS_MODE=standalone REDIS_PORTS=("${REDIS_PORT}")
}
start_redis_cluster() {
  start_cluster "${WORK}/cluster" 3
  PIDS+=("${CLUSTER_PIDS[@]}")
  REDIS_URL="${CLUSTER_URL}" REDIS_MODE=cluster REDIS_PORTS=("${CLUSTER_PORTS[@]}")
}
# Redis used_memory, summed over the nodes, as "<n>M".
redis_memory() {
  local port
  for port in "${REDIS_PORTS[@]}"; do redis-cli -p "${port}" INFO memory; done | tr -d '\r' |
    awk -F: '$1 == "used_memory" { s += $2 } END { printf "%.2fM\n", s / 1048576 }'
}
# Script execution time so far (µs): FCALL, EVALSHA and EVAL (the scripts go by FCALL with
# --redis_functions, else EVALSHA), summed over the nodes (INFO commandstats: Redis' own time in
# the scripts, without the network, the queue or the server's threads).
redis_script_us() {
  local port
  for port in "${REDIS_PORTS[@]}"; do redis-cli -p "${port}" INFO commandstats; done |
    tr -d '\r' | awk -F'[:=,]' '$1 == "cmdstat_fcall" || $1 == "cmdstat_evalsha" ||
      $1 == "cmdstat_eval" { s += $5 } END { printf "%d\n", s }'
}
start_server() {  # name [extra server flags...] -> sets SRV_PID, SRV_METRICS
  local port name="$1" attempt
  shift
  for attempt in 1 2 3; do  # a port taken between free_port and the bind: try others
    port="$(free_port)" SRV_METRICS="$(free_port)"
    "${SERVER}" --grpc_address="127.0.0.1:${port}" --metrics_address="127.0.0.1:${SRV_METRICS}" \
      --redis_url="${REDIS_URL}" --redis_mode="${REDIS_MODE}" "$@" \
      2>"${WORK}/server-${name}.log" &
    SRV_PID=$!
    PIDS+=("${SRV_PID}")
    wait_port "${SRV_METRICS}" && return 0
    echo "reaper bench: server ${name} did not start (attempt ${attempt}):" >&2
    tail -3 "${WORK}/server-${name}.log" >&2
    kill -9 "${SRV_PID}" 2>/dev/null || true
  done
  return 1
}

ROWS=()
declare -A TICK LAG_P99 EXEC
SMALLEST="${ALL_SIZES[0]}"
# Phases 1 and 2 for USERS users on the Redis started last (start_redis or start_redis_cluster):
# seeds, starts one server (ONE_PID, ONE_METRICS), measures one window and adds a row (LABEL).
seed_and_measure() {
  USERS="$1" LABEL="$2" FILES="$1-${REDIS_MODE}"
  HOLDS=$((USERS * 3))
  # The first SMALLEST users' holds expire first, RATE per second; the other users' holds expire
  # right after them at the same rate. So during the measurement window both sizes reap exactly
  # the same holds (same users, same per-user spacing) and differ only in how many other users
  # and live holds Redis keeps: the comparison isolates the number of users.
  FIRST_USERS="${SMALLEST}"
  SPREAD=$(((FIRST_USERS * 3 + RATE - 1) / RATE))
  # First expiry after seeding plus a margin. Seeding ran at 36-46k holds/s on 2026-11-25 and at
  # 18-23k/s (either layout) on a busier 2026-11-26, when 30k/s made the 1,000,000-user run start
  # with a 22 s backlog: count 15k/s, so that expiries never start before the server does.
  FIRST=$((HOLDS / 15000 + MARGIN))
  echo "reaper bench: seeding ${HOLDS} holds (${USERS} users), ${RATE}/s expiring from +${FIRST}s" >&2
  T0="$(now_s)"
  "${SEED}" --redis_url="${REDIS_URL}" --redis_mode="${REDIS_MODE}" \
    --users="${FIRST_USERS}" \
    --holds_per_user=3 --ttl=1h --first_expiry="${FIRST}s" --expire_spread="${SPREAD}s" \
    >"${WORK}/seed-${FILES}.txt"
  if ((USERS > FIRST_USERS)); then
    REST_HOLDS=$(((USERS - FIRST_USERS) * 3))
    "${SEED}" --redis_url="${REDIS_URL}" --redis_mode="${REDIS_MODE}" \
      --first_user="${FIRST_USERS}" \
      --users="$((USERS - FIRST_USERS))" --holds_per_user=3 --ttl=1h \
      --first_expiry="$(awk -v t="${T0}" -v n="$(now_s)" -v f="${FIRST}" -v s="${SPREAD}" \
                        'BEGIN { printf "%.3f", f + s - (n - t) }')s" \
      --expire_spread="$(((REST_HOLDS + RATE - 1) / RATE))s" >>"${WORK}/seed-${FILES}.txt"
  fi
  cat "${WORK}/seed-${FILES}.txt" >&2
  MEM="$(redis_memory)"
  start_server "${FILES}"
  ONE_METRICS="${SRV_METRICS}" ONE_PID="${SRV_PID}"
  # Steady state: expiries have flowed for a few seconds.
  sleep_until "$(awk -v t="${T0}" -v f="${FIRST}" 'BEGIN { printf "%.3f", t + f + 3 }')"
  scrape "${ONE_METRICS}" >"${WORK}/a-${FILES}.txt"
  TA="$(now_s)"
  local scripts_a
  scripts_a="$(redis_script_us)"
  BACKLOG=0
  for _ in $(seq "${WINDOW}"); do
    sleep 1
    b="$(scrape "${ONE_METRICS}" | awk '$1 == "orderhold_reaper_backlog_seconds" { print $2 }')"
    BACKLOG="$(awk -v x="${b:-0}" -v m="${BACKLOG}" 'BEGIN { print (x > m ? x : m) }')"
  done
  scrape "${ONE_METRICS}" >"${WORK}/b-${FILES}.txt"
  TB="$(now_s)"
  local scripts_b
  scripts_b="$(redis_script_us)"
  read -r N P50 P99 P999 MAXLE < <(hist_stats "${WORK}/a-${FILES}.txt" "${WORK}/b-${FILES}.txt" orderhold_reaper_lag_seconds)
  read -r TICK_MEAN TICKS < <(hist_mean "${WORK}/a-${FILES}.txt" "${WORK}/b-${FILES}.txt" orderhold_reaper_tick_duration_seconds)
  # Redis' own script time per tick: every script call of the window (no request load runs here, so
  # the reaper's calls, its heartbeats and event trims) / the ticks in it.
  EXEC[${LABEL}]="$(awk -v a="${scripts_a}" -v b="${scripts_b}" -v n="${TICKS}" \
    'BEGIN { if (n > 0) printf "%.4f", (b - a) / n / 1e6; else print "-" }')"
  # What a tick costs Redis (sum of its reap calls' round trips); the tick's wall time is mostly
  # pacing now. "-" with a server that predates the metric.
  read -r REDIS_MEAN _ < <(hist_mean "${WORK}/a-${FILES}.txt" "${WORK}/b-${FILES}.txt" orderhold_reaper_tick_redis_seconds)
  TICK[${LABEL}]="${REDIS_MEAN}"
  [[ "${REDIS_MEAN}" == "-" ]] && TICK[${LABEL}]="${TICK_MEAN}"
  LAG_P99[${LABEL}]="${P99}"
  RPS="$(awk -v n="${N}" -v a="${TA}" -v b="${TB}" 'BEGIN { printf "%.0f", n / (b - a) }')"
  ROWS+=("| ${LABEL} | ${HOLDS} | ${MEM} | ${RPS} | ${P50} | ${P99} | ${P999} | ≤ ${MAXLE} | ${TICK_MEAN} | ${REDIS_MEAN} | ${EXEC[${LABEL}]} | ${BACKLOG} |")
}

for USERS in "${SIZES[@]}"; do
  start_redis
  seed_and_measure "${USERS}" "${USERS}"

  if ((REPLICAS)) && [[ "${USERS}" == "${SIZES[-1]}" ]]; then
    # 3. replicas: two more join; then two die without handing over.
    start_server "${USERS}-r2"; R2_PID="${SRV_PID}" R2_METRICS="${SRV_METRICS}"
    start_server "${USERS}-r3"; R3_PID="${SRV_PID}" R3_METRICS="${SRV_METRICS}"
    sleep 5  # membership settles (ownership moves within a tick or two)
    for m in "${ONE_METRICS}" "${R2_METRICS}" "${R3_METRICS}"; do scrape "${m}" >"${WORK}/ra-${m}.txt"; done
    sleep "${WINDOW}"
    SHARES=()
    TOTAL_REAPED=0
    for m in "${ONE_METRICS}" "${R2_METRICS}" "${R3_METRICS}"; do
      scrape "${m}" >"${WORK}/rb-${m}.txt"
      r="$(awk -v a="$(counter "${WORK}/ra-${m}.txt" orderhold_holds_expired_total)" \
               -v b="$(counter "${WORK}/rb-${m}.txt" orderhold_holds_expired_total)" 'BEGIN { printf "%.0f", b - a }')"
      o="$(counter "${WORK}/rb-${m}.txt" orderhold_reaper_owned_partitions)"
      SHARES+=("${r} holds / ${o} partitions")
      TOTAL_REAPED=$((TOTAL_REAPED + r))
    done
    read -r _ R_P50 R_P99 _ _ < <(hist_stats "${WORK}/ra-${ONE_METRICS}.txt" "${WORK}/rb-${ONE_METRICS}.txt" orderhold_reaper_lag_seconds)
    # kill_two SIGNAL -> K_OWNED (s until the survivor owns all 64), K_N K_P50 K_P99 K_P999 K_MAX
    kill_two() {
      scrape "${ONE_METRICS}" >"${WORK}/ka-$1.txt"
      kill "-$1" "${R2_PID}" "${R3_PID}"
      local killed_at
      killed_at="$(now_s)"
      K_OWNED="?"
      for _ in $(seq 100); do
        if [[ "$(scrape "${ONE_METRICS}" | awk '$1 == "orderhold_reaper_owned_partitions" { print $2 }')" == "64" ]]; then
          K_OWNED="$(awk -v k="${killed_at}" -v n="$(now_s)" 'BEGIN { printf "%.1f", n - k }')"
          break
        fi
        sleep 0.1
      done
      wait "${R2_PID}" "${R3_PID}" 2>/dev/null || true
      sleep "${WINDOW}"
      scrape "${ONE_METRICS}" >"${WORK}/kb-$1.txt"
      read -r K_N K_P50 K_P99 K_P999 K_MAX < <(hist_stats "${WORK}/ka-$1.txt" "${WORK}/kb-$1.txt" orderhold_reaper_lag_seconds)
    }
    kill_two TERM
    KILLS=("SIGTERM (graceful: leases released, replicas unregistered): the survivor owned all 64 partitions after ${K_OWNED} s; its lag over the next ${WINDOW} s: p50 ${K_P50} s, p99 ${K_P99} s, p99.9 ${K_P999} s, max ≤ ${K_MAX} s (${K_N} holds)")
    start_server "${USERS}-r4"; R2_PID="${SRV_PID}"
    start_server "${USERS}-r5"; R3_PID="${SRV_PID}"
    sleep 5
    kill_two KILL
    KILLS+=("SIGKILL (no handover: takeover after --reaper_lease=3s; meanwhile standby reaping of partitions 1.5 s overdue): the survivor owned all 64 partitions after ${K_OWNED} s; its lag over the next ${WINDOW} s, takeover included: p50 ${K_P50} s, p99 ${K_P99} s, p99.9 ${K_P999} s, max ≤ ${K_MAX} s (${K_N} holds)")
    # The same with --reap_interval=400ms on all three (standby after 0.6 s).
    kill -9 "${ONE_PID}"
    wait "${ONE_PID}" 2>/dev/null || true
    start_server "${USERS}-f1" --reap_interval=400ms --reaper_lease=3s; ONE_PID="${SRV_PID}" ONE_METRICS="${SRV_METRICS}"
    start_server "${USERS}-f2" --reap_interval=400ms --reaper_lease=3s; R2_PID="${SRV_PID}"
    start_server "${USERS}-f3" --reap_interval=400ms --reaper_lease=3s; R3_PID="${SRV_PID}"
    sleep 5
    kill_two KILL
    KILLS+=("SIGKILL with --reap_interval=400ms (standby reaping after 0.6 s): the survivor owned all 64 partitions after ${K_OWNED} s; its lag over the next ${WINDOW} s, takeover included: p50 ${K_P50} s, p99 ${K_P99} s, p99.9 ${K_P999} s, max ≤ ${K_MAX} s (${K_N} holds)")
  fi
  for pid in "${PIDS[@]}"; do kill -9 "${pid}" 2>/dev/null || true; done
  wait 2>/dev/null || true
  PIDS=()
done

# 5. cluster: the largest size on a 3-primary Redis Cluster, one server in --redis_mode=cluster.
if ((CLUSTER)); then
  start_redis_cluster
  CLUSTER_LABEL="${LARGEST} (cluster, 3 primaries)"
  seed_and_measure "${LARGEST}" "${CLUSTER_LABEL}"
  CLUSTER_REDIRECTS="$(awk '/^orderhold_redis_redirects_total\{/ { n += $2 } END { printf "%d", n }' \
    "${WORK}/b-${FILES}.txt")"
  for pid in "${PIDS[@]}"; do kill -9 "${pid}" 2>/dev/null || true; done
  wait 2>/dev/null || true
  PIDS=()
fi
# The per-size table: mean Redis time per tick = the sum of its reap calls' round trips
# (orderhold_reaper_tick_redis_seconds); Redis script time per tick = Redis' own script time.
rows_md() {
  echo "| users | live holds | Redis used_memory | reaped/s | lag p50 s | lag p99 s | lag p99.9 s | lag max | mean tick s | mean Redis time per tick s | Redis script time per tick s | max backlog s |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
  printf '%s\n' "${ROWS[@]}"
}
cluster_md() {
  echo "Reaper lag p99 at ${LARGEST} users: single Redis ${LAG_P99[${LARGEST}]:--} s, Redis Cluster of 3 primaries (no replicas, same machine) ${LAG_P99[${CLUSTER_LABEL}]} s; Redis time per tick ${TICK[${LARGEST}]:--} s vs ${TICK[${CLUSTER_LABEL}]} s (the cluster's 64 reap calls per tick go to 3 nodes); MOVED/ASK redirects counted by the cluster's server: ${CLUSTER_REDIRECTS}."
}
if ((CLUSTER_ONLY)); then
  {
    echo "## Reaper benchmark on a Redis Cluster ($(nproc) cores, $(date -u +%Y-%m-%d), ${RATE} holds expiring per second, ${WINDOW} s window)"
    echo
    rows_md
    echo
    cluster_md
  } | tee "${OUT}/reaper-cluster.md"
  [[ "${ROWS[0]}" != *"| 0 |"* ]] || { echo "reaper bench: nothing reaped on the cluster" >&2; exit 1; }
  exit 0
fi

# 4. drain: a --backlog seconds backlog, all due, then one server and no request load. Watched
# from Redis (the buckets' due indexes `<prefix>:{<p>}:hd:<bucket>`: one member per user with
# holds), because the server's counters may
# move only at the end of a tick, and one tick can drain the whole backlog.
DRAIN_USERS=$(((RATE * BACKLOG_S + 2) / 3))
DRAIN_HOLDS=$((DRAIN_USERS * 3))
start_redis
echo "reaper bench: drain: seeding ${DRAIN_HOLDS} holds due over ${BACKLOG_S} s, no server running" >&2
T0="$(now_s)"
"${SEED}" --redis_url="redis://127.0.0.1:${REDIS_PORT}" \
  --users="${DRAIN_USERS}" \
  --holds_per_user=3 --ttl=1h --first_expiry=1ms --expire_spread="${BACKLOG_S}s" >&2
mapfile -t DUE_KEYS < <(redis-cli -p "${REDIS_PORT}" --scan --pattern '*:hd:*')
# Users with holds left, summed over the due indexes in one script call (a ZCARD round trip per
# bucket, 16,384 of them, took seconds on a busy machine and hid the drain's start).
due_users() {
  redis-cli -p "${REDIS_PORT}" EVAL \
    "local n = 0 for _, k in ipairs(KEYS) do n = n + redis.call('ZCARD', k) end return n" \
    "${#DUE_KEYS[@]}" "${DUE_KEYS[@]}"
}
# The last expire time is < the seed's start + BACKLOG_S; the seed started after T0 (a few ms).
sleep_until "$(awk -v t="${T0}" -v b="${BACKLOG_S}" 'BEGIN { printf "%.3f", t + b + 0.5 }')"
DUE0="$(due_users)"
# Age of the oldest due hold when the server starts (Redis clock): about BACKLOG_S + 0.5 s.
DRAIN_AGE="$(redis-cli -p "${REDIS_PORT}" --scan --pattern '*:bdue' | sed 's/^/ZRANGE /; s/$/ 0 0 WITHSCORES/' |
  redis-cli -p "${REDIS_PORT}" |
  awk -v now="$(redis-cli -p "${REDIS_PORT}" TIME | head -1)" \
    'NR % 2 == 0 && (min == "" || $1 < min) { min = $1 } END { printf "%.1f", now - min / 1000 }')"
TS="$(now_s)"
start_server drain
DEADLINE="$(awk -v t="${TS}" -v b="${BACKLOG_S}" 'BEGIN { printf "%.3f", t + 5 * b + 30 }')"
DRAIN_FIRST="" DRAIN_TIME="" LEFT="${DUE0}"
while :; do
  LEFT="$(due_users)"
  NOW="$(now_s)"
  if [[ -z "${DRAIN_FIRST}" ]] && ((LEFT < DUE0)); then
    DRAIN_FIRST="$(awk -v t="${TS}" -v n="${NOW}" 'BEGIN { printf "%.2f", n - t }')"
  fi
  if ((LEFT == 0)); then
    DRAIN_TIME="$(awk -v t="${TS}" -v n="${NOW}" 'BEGIN { printf "%.2f", n - t }')"
    break
  fi
  [[ "$(awk -v n="${NOW}" -v d="${DEADLINE}" 'BEGIN { print (n > d) }')" == 0 ]] || break
  sleep 0.1
done
# Cross-check with the server: its expired counter reaches the seeded count (within a tick or two).
DRAIN_REAPED=0
for _ in $(seq 50); do
  DRAIN_REAPED="$(scrape "${SRV_METRICS}" | awk '$1 == "orderhold_holds_expired_total" { printf "%d", $2 }')"
  ((${DRAIN_REAPED:-0} >= DRAIN_HOLDS)) && break
  sleep 0.1
done
if [[ -n "${DRAIN_TIME}" ]]; then
  DRAIN_ROW="| ${BACKLOG_S} s at ${RATE}/s | ${DRAIN_HOLDS} (${DUE0} users) | ${DRAIN_AGE} | ${DRAIN_FIRST} | ${DRAIN_TIME} | **$(awk -v n="${DRAIN_HOLDS}" -v a="${DRAIN_FIRST}" -v b="${DRAIN_TIME}" 'BEGIN { printf "%.0f", n / (b - a > 0.1 ? b - a : 0.1) }')** | $(awk -v n="${DRAIN_HOLDS}" -v b="${DRAIN_TIME}" 'BEGIN { printf "%.0f", n / b }') | ${DRAIN_REAPED} |"
else
  DRAIN_ROW="| ${BACKLOG_S} s at ${RATE}/s | ${DRAIN_HOLDS} (${DUE0} users) | ${DRAIN_AGE} | ${DRAIN_FIRST:--} | NOT DRAINED: ${LEFT} users left | - | - | ${DRAIN_REAPED} |"
fi
for pid in "${PIDS[@]}"; do kill -9 "${pid}" 2>/dev/null || true; done
wait 2>/dev/null || true
PIDS=()

drain_md() {
  echo "Drain after a backlog: holds became due at ${RATE}/s over ${BACKLOG_S} s while no server ran (the last 0.5 s before the server started); then one server, default flags, no request load. Watched from Redis every 0.1 s (± 0.1 s): the users left in the due indexes. Times from the server's start; drain rate = holds / (all reaped - first reaped); the server's orderhold_holds_expired_total afterwards as a cross-check."
  echo
  echo "| backlog | holds | oldest due hold's age at server start s | first reaped after s | all reaped after s | drain rate holds/s | holds / time from server start | server's expired counter |"
  echo "|---|---|---|---|---|---|---|---|"
  echo "${DRAIN_ROW}"
}
if ((DRAIN_ONLY)); then
  { echo "## Reaper drain ($(nproc) cores, $(date -u +%Y-%m-%d))"; echo; drain_md; } | tee "${OUT}/reaper-drain.md"
  [[ -n "${DRAIN_TIME}" ]] || { echo "reaper bench: the drain backlog was not reaped" >&2; exit 1; }
  exit 0
fi
SMALL="${SIZES[0]}" LARGE="${SIZES[-1]}"
RATIO="$(awk -v a="${TICK[${SMALL}]}" -v b="${TICK[${LARGE}]}" 'BEGIN { if (a > 0) printf "%.2f", b / a; else print "-" }')"
EXEC_RATIO="$(awk -v a="${EXEC[${SMALL}]}" -v b="${EXEC[${LARGE}]}" 'BEGIN { if (a > 0) printf "%.2f", b / a; else print "-" }')"
{
  echo "## Reaper benchmark ($(nproc) cores, $(date -u +%Y-%m-%d), ${RATE} holds expiring per second, ${WINDOW} s windows)"
  echo
  rows_md
  echo
  echo "Redis time per tick ratio ${LARGE} / ${SMALL} users at the same expiry rate: ${RATIO} (the tick's wall time where the server has no orderhold_reaper_tick_redis_seconds); Redis' own script time per tick (INFO commandstats FCALL + EVALSHA + EVAL): ${EXEC_RATIO}"
  echo
  if ((CLUSTER)); then
    cluster_md
    echo
  fi
  if ((REPLICAS)); then
    echo "3 replicas on the ${LARGE}-user Redis, one ${WINDOW} s window: reaped per replica: ${SHARES[*]} (total ${TOTAL_REAPED}); replica 1 lag p50 ${R_P50} s, p99 ${R_P99} s"
    echo
    for k in "${KILLS[@]}"; do echo "2 of 3 killed with ${k}"; echo; done
  fi
  drain_md
} | tee "${OUT}/reaper.md"
if ((SMOKE)); then
  # The pipeline must produce figures: something was reaped in every phase.
  for row in "${ROWS[@]}"; do [[ "${row}" != *"| 0 |"* ]] || { echo "reaper bench: nothing reaped" >&2; exit 1; }; done
  [[ -n "${DRAIN_TIME}" ]] || { echo "reaper bench: the drain backlog was not reaped" >&2; exit 1; }
fi
