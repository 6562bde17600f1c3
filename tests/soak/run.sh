#!/usr/bin/env bash
# tests/soak/run.sh: OrderHold's soak with an oracle. Not part of the test
# suite; .ci/run runs `--smoke` (45 s of load). Minutes of load at half of the measured maximum
# with a realistic mix, 3 server replicas, one consumer group watching and acking, and faults on a
# schedule; then tests/soak/oracle.py replays what the clients saw and checks the promises.
#
#   tests/soak/run.sh [--mode standalone|sentinel|cluster] [--minutes 10] [--smoke] [--rate N]
#                     [--wait_replicas N] [--out DIR] [--keep]
#
# What runs (every process private, on free ports, data under a temporary directory):
#   Redis       standalone: one redis-server, `appendonly yes`, `appendfsync always`.
#               sentinel: a primary + 2 replicas + 3 sentinels (down-after 1 s), AOF always,
#               servers with --redis_wait_replicas=all (every replica: with 1, a graceful failover
#               loses what the old primary's other replica acknowledged before Sentinel re-pointed
#               it; deploy/README.md "What acknowledged means").
#               cluster: 3 primaries + 3 replicas (cluster-node-timeout 2 s), AOF always, servers
#               with --redis_wait_replicas=1.
#               (--redis_wait_replicas is what a deployment needs so that a failover does not lose
#               an answered hold: replication is asynchronous. --wait_replicas N overrides it.)
#   servers     3 orderhold-server replicas on the same Redis; short lifetimes so the run ends
#               clean: --event_ack_timeout=5s, --outcome_retention and --event_retention of
#               seconds, --max_hold_lifetime=30s (ExtendHold's cap binds within a run).
#   watcher     orderhold-soak-watch: group "soak", 2 consumers, round_robin over the replicas,
#               acking every 100 ms, reconnecting when a stream ends; every event it gets is a
#               line of events.jsonl. Beside them a third consumer of the group that reads and
#               never acks (--stuck_consumers=1): what it is sent must reach an acking consumer
#               after the ack timeout (the oracle counts only the acking ones' events as delivered
#               and prints the redelivery delay).
#   load        orderhold-bench, round_robin over the replicas, --call_log: one line per call.
#               First 10 s closed loop with the mix (the measured maximum, also logged and
#               checked), then open loop at half of it (or --rate) for --minutes:
#               mix place=50,extend=10,get=10,list=10,pay=8,cancel=8,release=4 over 20,000 users
#               drawn zipf(1.1) (the popular ones live at their limit of 3), ttl 10 s, deadline 2 s.
#   scope load  (standalone, sentinel) a second orderhold-bench beside the load, its own 2,000 users
#               ("s0".."s1999", --call_log calls-scope.jsonl): place=60,pay=15,cancel=15,extend=10,
#               every PlaceHold of 2 units in scope event:0 or event:1, whose rule in the servers'
#               --scope_limits file sets total_max_holds 20 and total_max_units 50 (each scope on
#               its own): most places are refused by the total, the rest race for freed places.
#               event:1's rule also sets capacity_units 4 per second of load (held + sold: every
#               Pay sells its 2 units), so event:1 sells out during the run and refuses the rest
#               SCOPE_SOLD_OUT (oracle: scope_over_capacity). event:0 gets a runtime rule instead
#               (PutScopeRule, `orderhold-cli rule-put` on replica 0 before the baseline), which
#               replaces the file's rule for that exact scope: the same totals plus a purchase cap,
#               max_purchased_units 4 + 2 per full 150 s of load (4 in the smoke, 12 in 10
#               minutes; even, so two-unit holds fill it), each user's live units in event:0 plus
#               the units the user paid for there (never given back: the load returns nothing).
#               The users are drawn uniformly, so a user's Pays in event:0 grow with the run (the
#               smoke's uncapped logs: 352 of 1,331 users reached 4 units held + paid, 69 went
#               past 6): the cap grows with it so that some users reach it and are refused
#               USER_PURCHASE_LIMIT (the refusals the servers counted end up in meta.json) while
#               the others still race for event:0's total (at the ~10 Pays a second a scope sees
#               in long runs, 3 per user in 10 minutes, a fixed 4 would stop most users well
#               before the end); oracle: user_over_purchase_cap. Not in cluster mode: a Redis
#               Cluster server refuses totals, capacities and runtime rules (server/README.md).
#   faults      one every 20 s (8 s in the smoke), in turn:
#                 redis_kill9    kill -9 a Redis primary, restart it 1 s later on its AOF
#                 redis_stop     SIGSTOP a Redis primary for 2 s
#                 server_kill9   SIGKILL server replica 1 or 2 (in turn), restart it 1 s later
#                                (replica 0 lives through the run: its RSS and fds are judged)
#                 script_flush   SCRIPT FLUSH on every primary
#                 client_kill    CLIENT KILL TYPE normal on every primary (every server's links)
#                 replica_kill9  (sentinel, cluster) kill -9 a Redis replica, restart it 1 s later
#               and in sentinel and cluster modes a failover every minute instead of the fault
#               due: SENTINEL FAILOVER, or CLUSTER FAILOVER on the replica of a primary in turn.
#   samples     every 5 s: each server's RSS and open descriptors (/proc), Redis used_memory.
# After the load: wait until every hold has expired and the reaper ended it, until the watcher has
# had nothing new for 5 s (3 s in the smoke), then for the retentions to pass; then Redis' keys (names, types, TTLs
# and MEMORY USAGE in keys-baseline.txt / keys-end.txt) and used_memory are compared with the
# baseline taken before the first call, once the watch is open.
#
# Output (--out, default <repo>/build/soak/<mode>): calls.jsonl, events.jsonl, faults.jsonl,
# samples.jsonl, meta.json, server and Redis logs, and the oracle's soak.json + soak.md; the table
# on stdout. Exit status: 0 when every invariant held, 1 when one did not (or the run broke).
# Needs the Release build of tests/run.sh (built here if missing); python3 (Debian's), jq, curl.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# shellcheck source=tests/bench/lib.sh
source "${REPO}/tests/bench/lib.sh"

MODE=standalone
MINUTES=10
SMOKE=0
RATE=""
WAIT_REPLICAS=""
OUT=""
KEEP=0
while (($#)); do
  case "$1" in
    --mode) MODE="$2"; shift ;;
    --minutes) MINUTES="$2"; shift ;;
    --smoke) SMOKE=1 ;;
    --rate) RATE="$2"; shift ;;
    --wait_replicas) WAIT_REPLICAS="$2"; shift ;;
    --out) OUT="$2"; shift ;;
    --keep) KEEP=1 ;;
    *)
      echo "usage: $0 [--mode standalone|sentinel|cluster] [--minutes N] [--smoke] [--rate N]" \
        "[--wait_replicas N] [--out DIR] [--keep]" >&2
      exit 64
      ;;
  esac
  shift
done
[[ "${MODE}" =~ ^(standalone|sentinel|cluster)$ ]] || { echo "soak: bad --mode ${MODE}" >&2; exit 64; }
[[ "${MINUTES}" =~ ^[1-9][0-9]*$ ]] || { echo "soak: --minutes must be a positive number" >&2; exit 64; }
[[ -z "${RATE}" || "${RATE}" =~ ^[1-9][0-9]*$ ]] || { echo "soak: --rate must be calls/s" >&2; exit 64; }
[[ -z "${WAIT_REPLICAS}" || "${WAIT_REPLICAS}" =~ ^([0-9]|all)$ ]] || { echo "soak: bad --wait_replicas" >&2; exit 64; }
OUT="${OUT:-${REPO}/build/soak/${MODE}}"

LOAD_S=$((MINUTES * 60))
MEASURE_S=10
FAULT_EVERY=20
FAILOVER_EVERY=60
TTL_S=10
LIFETIME=30s
OUTCOME_RETENTION_S=20
# Above the longest time the watch cannot read: with --redis_wait_replicas equal to the replicas
# (sentinel), a read waits for every replica, and after a failover one is missing until Sentinel
# has converted the old primary and it has synced (10-40 s measured here); events older than the
# retention are trimmed even if unacked, and the oracle would count them as lost ends.
EVENT_RETENTION_S=120
USERS=20000
# The watcher is drained once it has had nothing new for this long: above the ack timeout (5 s)
# plus a sweep (<= 1 s), so what the stuck consumer got last is redelivered within one poll.
DRAIN_POLL_S=7
if ((SMOKE)); then
  # 45 s of load: the standalone faults (one every 8 s from 8 s) each come once.
  LOAD_S=45 MEASURE_S=3 FAULT_EVERY=8 FAILOVER_EVERY=24 TTL_S=3 LIFETIME=8s
  # Event retention 25 s: the stuck consumer's events reach an acking one after the ack timeout
  # plus the claim scans, which Redis' kill and stop windows hold up: 19.0 s at most measured in a
  # standalone smoke at 3,506 calls/s (865 events trimmed unacked with 15 s), 13.2 s at 2,879.
  OUTCOME_RETENTION_S=5 EVENT_RETENTION_S=25 USERS=2000
  [[ "${MODE}" == standalone ]] || EVENT_RETENTION_S=60
fi
MIX="place=50,extend=10,get=10,list=10,pay=8,cancel=8,release=4"
# The scope load (header): a total per scope, in holds and units; its own users and rate.
SCOPE_TOTAL_HOLDS=20
SCOPE_TOTAL_UNITS=50
# event:1's capacity (held + sold units): sells out during the run (~20 units paid a second).
SCOPE_CAPACITY_PREFIX="event:1"
SCOPE_CAPACITY_UNITS=$((LOAD_S * 4))
# event:0's runtime rule (header): each user's held + bought units there, at most this.
SCOPE_PURCHASE_CAP_SCOPE="event:0"
SCOPE_PURCHASE_CAP_UNITS=$((4 + 2 * (LOAD_S / 150)))
SCOPE_USERS=2000
SCOPE_RATE=200
SCOPE_MIX="place=60,pay=15,cancel=15,extend=10"
SERVERS=3
MAX_HOLDS=3
SAMPLE_EVERY=5

BUILD="${REPO}/build"
if [[ ! -x "${BUILD}/server/orderhold-server" ]]; then
  cmake -G Ninja -S "${REPO}" -B "${BUILD}" -DCMAKE_BUILD_TYPE=Release >/dev/null
fi
cmake --build "${BUILD}" --target orderhold-server orderhold-bench orderhold-cli orderhold-soak-watch \
  >/dev/null
SERVER="${BUILD}/server/orderhold-server"
BENCH="${BUILD}/client/orderhold-bench"
CLI="${BUILD}/client/orderhold-cli"
WATCH="${BUILD}/tests/soak/orderhold-soak-watch"
PYTHON=/usr/bin/python3

WORK="$(mktemp -d /tmp/orderhold-soak.XXXXXX)"
mkdir -p "${WORK}/pids" "${OUT}"
rm -f "${OUT}"/*.jsonl "${OUT}"/*.log "${OUT}"/soak.json "${OUT}"/soak.md "${OUT}"/meta.json
BG_PIDS=()
cleanup() {
  local pid f
  for pid in "${BG_PIDS[@]}"; do kill "${pid}" 2>/dev/null || true; done
  for f in "${WORK}"/pids/*.pid; do
    [[ -f "${f}" ]] && kill -9 "$(cat "${f}")" 2>/dev/null || true
  done
  for pid in "${BG_PIDS[@]}"; do wait "${pid}" 2>/dev/null || true; done
  cp "${WORK}"/*.log "${OUT}/" 2>/dev/null || true
  if ((KEEP)); then echo "soak: work directory kept: ${WORK}" >&2; else rm -rf "${WORK}"; fi
}
trap cleanup EXIT

now_us() { date +%s%6N; }
log() { echo "soak $(date +%T): $*" >&2; }
pid_of() { cat "${WORK}/pids/$1.pid" 2>/dev/null; }
alive() { local p; p="$(pid_of "$1")" && [[ -n "${p}" ]] && kill -0 "${p}" 2>/dev/null; }

# ---------------------------------------------------------------------------------------------
# Redis. Each node has a config file, so a restart is the same command; roles after failovers
# are whatever Redis (nodes.conf) or Sentinel makes of them.
REDIS_NODES=()   # data ports
SENTINELS=()     # sentinel ports
redis_conf() {  # port, extra config lines...
  local port="$1" dir="${WORK}/redis-$1"
  shift
  mkdir -p "${dir}"
  {
    echo "port ${port}"
    echo "bind 127.0.0.1"
    echo "dir ${dir}"
    echo "pidfile ${WORK}/pids/redis-${port}.pid"
    echo "logfile ${WORK}/redis-${port}.log"
    echo "save \"\""
    echo "appendonly yes"
    echo "appendfsync always"
    printf '%s\n' "$@"
  } >"${dir}/redis.conf"
}
redis_up() {  # port: starts (or restarts) the node from its config file, waits for its port
  rm -f "${WORK}/pids/redis-$1.pid"
  redis-server "${WORK}/redis-$1/redis.conf" >>"${WORK}/redis-$1.log" 2>&1 &
  disown
  wait_port "$1"
  for _ in $(seq 100); do [[ -s "${WORK}/pids/redis-$1.pid" ]] && return 0; sleep 0.05; done
}
rcli() { redis-cli -p "$1" "${@:2}"; }
role_of() { rcli "$1" ROLE 2>/dev/null | head -1; }
primaries() {  # the primaries now: Sentinel's answer in sentinel mode (an old primary restarted
  # after kill -9 says "master" until Sentinel demotes it), else the nodes that say so
  local p
  if [[ "${MODE}" == sentinel ]]; then
    rcli "${SENTINELS[0]}" SENTINEL get-master-addr-by-name soak 2>/dev/null | sed -n 2p
    return
  fi
  for p in "${REDIS_NODES[@]}"; do [[ "$(role_of "${p}")" == master ]] && echo "${p}"; done
}
replicas() {
  local p
  for p in "${REDIS_NODES[@]}"; do [[ "$(role_of "${p}")" == slave ]] && echo "${p}"; done
}

start_standalone() {
  local p
  p="$(free_port)"
  redis_conf "${p}"
  redis_up "${p}"
  REDIS_NODES=("${p}")
  REDIS_URL="redis://127.0.0.1:${p}"
  REDIS_FLAGS=(--redis_mode=standalone "--redis_wait_replicas=${WAIT_REPLICAS:-0}")
}

start_sentinel() {
  local p primary s i
  for i in 0 1 2; do
    p="$(free_port)"
    while [[ " ${REDIS_NODES[*]-} " == *" ${p} "* ]]; do p="$(free_port)"; done
    if ((i == 0)); then redis_conf "${p}"; primary="${p}"; else redis_conf "${p}" "replicaof 127.0.0.1 ${primary}"; fi
    redis_up "${p}"
    REDIS_NODES+=("${p}")
  done
  for p in "${REDIS_NODES[@]:1}"; do wait_replica_up "${p}"; done
  local urls=()
  for i in 0 1 2; do
    s="$(free_port)"
    mkdir -p "${WORK}/sentinel-${s}"
    cat >"${WORK}/sentinel-${s}/sentinel.conf" <<EOF
port ${s}
bind 127.0.0.1
pidfile ${WORK}/pids/sentinel-${s}.pid
logfile ${WORK}/sentinel-${s}.log
dir ${WORK}/sentinel-${s}
sentinel monitor soak 127.0.0.1 ${primary} 2
sentinel down-after-milliseconds soak 1000
sentinel failover-timeout soak 5000
sentinel parallel-syncs soak 1
EOF
    redis-server "${WORK}/sentinel-${s}/sentinel.conf" --sentinel >/dev/null 2>&1 &
    disown
    wait_port "${s}"
    SENTINELS+=("${s}")
    urls+=("127.0.0.1:${s}")
  done
  for _ in $(seq 200); do
    rcli "${SENTINELS[0]}" SENTINEL CKQUORUM soak 2>/dev/null | grep -q '^OK' &&
      [[ "$(rcli "${SENTINELS[0]}" SENTINEL master soak | tr -d '\r' | awk 'p { print; exit } $0 == "num-slaves" { p = 1 }')" == 2 ]] &&
      break
    sleep 0.1
  done
  REDIS_URL="redis://$(IFS=,; echo "${urls[*]}")"
  REDIS_FLAGS=(--redis_mode=sentinel --redis_sentinel_master=soak
    "--redis_wait_replicas=${WAIT_REPLICAS:-all}")
}

start_cluster6() {
  local p bus i addrs=()
  for i in 0 1 2 3 4 5; do
    p="$(free_port)"
    while [[ " ${REDIS_NODES[*]-} " == *" ${p} "* ]]; do p="$(free_port)"; done
    bus="$(free_port)"
    redis_conf "${p}" "cluster-enabled yes" "cluster-port ${bus}" "cluster-config-file nodes.conf" \
      "cluster-node-timeout 2000"
    redis_up "${p}"
    REDIS_NODES+=("${p}")
    addrs+=("127.0.0.1:${p}")
  done
  redis-cli --cluster create "${addrs[@]}" --cluster-replicas 1 --cluster-yes \
    >"${WORK}/cluster-create.log" 2>&1
  for _ in $(seq 300); do
    local ok=0 up=0
    for p in "${REDIS_NODES[@]}"; do
      rcli "${p}" CLUSTER INFO | tr -d '\r' | grep -qx cluster_state:ok && ((++ok))
      rcli "${p}" INFO replication | tr -d '\r' | grep -qx master_link_status:up && ((++up))
    done
    ((ok == 6 && up == 3)) && break
    sleep 0.1
  done
  REDIS_URL="redis://$(IFS=,; echo "${addrs[*]:0:3}" | tr ' ' ',')"
  REDIS_FLAGS=(--redis_mode=cluster "--redis_wait_replicas=${WAIT_REPLICAS:-1}")
}

# ---------------------------------------------------------------------------------------------
# Server replicas: fixed ports per replica, so a restart takes the same address.
GRPC_PORTS=()
METRICS_PORTS=()
server_up() {  # replica index
  local i="$1"
  "${SERVER}" --grpc_address="127.0.0.1:${GRPC_PORTS[i]}" \
    --metrics_address="127.0.0.1:${METRICS_PORTS[i]}" --redis_url="${REDIS_URL}" \
    "${REDIS_FLAGS[@]}" --max_holds="${MAX_HOLDS}" --event_ack_timeout=5s \
    --outcome_retention="${OUTCOME_RETENTION_S}s" --event_retention="${EVENT_RETENTION_S}s" \
    --max_hold_lifetime="${LIFETIME}" --shutdown_grace=1s --log_format=text \
    "${SCOPE_FLAGS[@]}" \
    >>"${WORK}/server-${i}.log" 2>&1 &
  echo $! >"${WORK}/pids/server-${i}.pid"
  disown
  wait_port "${GRPC_PORTS[i]}"
}

# ---------------------------------------------------------------------------------------------
# Faults, run by a background loop; one line per fault in faults.jsonl.
fault_line() {  # name, t0 (µs), detail
  printf '{"fault":"%s","t0":%s,"t1":%s,"detail":"%s"}\n' "$1" "$2" "$(now_us)" "$3" \
    >>"${OUT}/faults.jsonl"
}
kill_and_restart_redis() {  # port
  kill -9 "$(pid_of "redis-$1")" 2>/dev/null || true
  sleep 1
  redis_up "$1"
}
do_fault() {  # name
  local t0 p i
  t0="$(now_us)"
  case "$1" in
    redis_kill9)
      p="$(primaries | shuf -n1)"
      kill_and_restart_redis "${p}"
      fault_line "$1" "${t0}" "port ${p}"
      ;;
    redis_stop)
      p="$(primaries | shuf -n1)"
      kill -STOP "$(pid_of "redis-${p}")"
      sleep 2
      kill -CONT "$(pid_of "redis-${p}")"
      fault_line "$1" "${t0}" "port ${p}"
      ;;
    replica_kill9)
      p="$(replicas | shuf -n1)"
      [[ -n "${p}" ]] && kill_and_restart_redis "${p}"
      fault_line "$1" "${t0}" "port ${p}"
      ;;
    server_kill9)
      i=$((1 + NEXT_SERVER_KILL % (SERVERS - 1)))
      NEXT_SERVER_KILL=$((NEXT_SERVER_KILL + 1))
      kill -9 "$(pid_of "server-${i}")" 2>/dev/null || true
      sleep 1
      server_up "${i}"
      fault_line "$1" "${t0}" "replica ${i}"
      ;;
    script_flush)
      for p in $(primaries); do rcli "${p}" SCRIPT FLUSH >/dev/null; done
      fault_line "$1" "${t0}" "all primaries"
      ;;
    client_kill)
      for p in $(primaries); do rcli "${p}" CLIENT KILL TYPE normal >/dev/null; done
      fault_line "$1" "${t0}" "all primaries"
      ;;
    failover)
      if [[ "${MODE}" == sentinel ]]; then
        rcli "${SENTINELS[0]}" SENTINEL FAILOVER soak >/dev/null || true
        fault_line "$1" "${t0}" "SENTINEL FAILOVER"
      else
        # The replica of the next primary in turn (CLUSTER NODES: "<id> <addr> slave <primary id>").
        local replica
        replica="$(replicas | sed -n "$((1 + NEXT_FAILOVER % 3))p")"
        NEXT_FAILOVER=$((NEXT_FAILOVER + 1))
        [[ -n "${replica}" ]] && rcli "${replica}" CLUSTER FAILOVER >/dev/null || true
        fault_line "$1" "${t0}" "CLUSTER FAILOVER on ${replica}"
      fi
      ;;
  esac
}
fault_loop() {  # until $1 (epoch s)
  set +e  # a fault that fails (a node slow to come back) is logged, and the schedule goes on
  local faults=(redis_kill9 redis_stop server_kill9 script_flush client_kill)
  [[ "${MODE}" != standalone ]] && faults+=(replica_kill9)
  local n=0 last_failover now
  NEXT_SERVER_KILL=0 NEXT_FAILOVER=0
  last_failover="$(date +%s)"
  while :; do
    sleep "${FAULT_EVERY}"
    now="$(date +%s)"
    ((now + FAULT_EVERY / 2 < $1)) || break
    if [[ "${MODE}" != standalone ]] && ((now - last_failover >= FAILOVER_EVERY)); then
      do_fault failover || log "fault failover failed"
      last_failover="${now}"
    else
      do_fault "${faults[n % ${#faults[@]}]}" || log "fault ${faults[n % ${#faults[@]}]} failed"
      n=$((n + 1))
    fi
  done
}

sample_loop() {
  set +e  # a sample taken while a node restarts has holes, and the loop goes on
  local i pid rss fds mem line p m
  while :; do
    line="{\"t\":$(now_us),\"servers\":["
    for ((i = 0; i < SERVERS; i++)); do
      pid="$(pid_of "server-${i}")"
      rss="$(awk '/^VmRSS:/ { print $2 * 1024 }' "/proc/${pid}/status" 2>/dev/null || true)"
      fds="$(ls "/proc/${pid}/fd" 2>/dev/null | wc -l)"
      ((i > 0)) && line+=","
      line+="{\"pid\":${pid:-0},\"rss\":${rss:-null},\"fds\":${fds}}"
    done
    mem=0
    for p in $(primaries); do
      m="$(rcli "${p}" INFO memory | tr -d '\r' | awk -F: '$1 == "used_memory" { print $2 }')"
      mem=$((mem + ${m:-0}))
    done
    echo "${line}],\"redis_used_memory\":${mem}}" >>"${OUT}/samples.jsonl"
    sleep "${SAMPLE_EVERY}"
  done
}

scan_keys() {  # every key of every primary: name, type, TTL (ms), MEMORY USAGE (bytes); sorted
  local p k
  for p in $(primaries); do
    rcli "${p}" --scan | while read -r k; do
      echo "${k} $(rcli "${p}" TYPE "${k}") $(rcli "${p}" PTTL "${k}") $(rcli "${p}" MEMORY USAGE "${k}")"
    done
  done | sort
}
redis_totals() {  # "keys key_bytes used_memory" over the primaries (key_bytes: MEMORY USAGE summed)
  local p m=0 file="$1"
  scan_keys >"${file}"
  for p in $(primaries); do
    m=$((m + $(rcli "${p}" INFO memory | tr -d '\r' | awk -F: '$1 == "used_memory" { print $2 }')))
  done
  echo "$(wc -l <"${file}") $(awk '{ s += $4 } END { print s + 0 }' "${file}") ${m}"
}

# ---------------------------------------------------------------------------------------------
log "mode ${MODE}, ${LOAD_S} s of load, work in ${WORK}, output in ${OUT}"
case "${MODE}" in
  standalone) start_standalone ;;
  sentinel) start_sentinel ;;
  cluster) start_cluster6 ;;
esac
SCOPE_FLAGS=()
if [[ "${MODE}" != cluster ]]; then
  # The longest prefix wins and rules do not merge: event:1's rule repeats the totals.
  printf '{"rules": [{"prefix": "event:", "total_max_holds": %d, "total_max_units": %d},
    {"prefix": "%s", "total_max_holds": %d, "total_max_units": %d, "capacity_units": %d}]}\n' \
    "${SCOPE_TOTAL_HOLDS}" "${SCOPE_TOTAL_UNITS}" "${SCOPE_CAPACITY_PREFIX}" \
    "${SCOPE_TOTAL_HOLDS}" "${SCOPE_TOTAL_UNITS}" "${SCOPE_CAPACITY_UNITS}" >"${WORK}/limits.json"
  SCOPE_FLAGS=(--scope_limits="${WORK}/limits.json")
fi
for ((i = 0; i < SERVERS; i++)); do
  GRPC_PORTS+=("$(free_port)")
  METRICS_PORTS+=("$(free_port)")
done
for ((i = 0; i < SERVERS; i++)); do server_up "${i}"; done
TARGET="ipv4:$(for p in "${GRPC_PORTS[@]}"; do printf '127.0.0.1:%s,' "${p}"; done | sed 's/,$//')"
if ((${#SCOPE_FLAGS[@]})); then
  # event:0's runtime rule, before the baseline (its keys are data that stays) and the scope load.
  # It replaces the file's rule for event:0, so it repeats the totals (scope_over_total judges
  # event:0 by them). The whole rule is written each time: a retry is harmless.
  for attempt in 1 2 3 4 5; do
    if rule="$("${CLI}" --target="127.0.0.1:${GRPC_PORTS[0]}" rule-put "${SCOPE_PURCHASE_CAP_SCOPE}" \
      --total_max_holds="${SCOPE_TOTAL_HOLDS}" --total_max_units="${SCOPE_TOTAL_UNITS}" \
      --max_purchased_units="${SCOPE_PURCHASE_CAP_UNITS}" 2>&1)"; then
      log "runtime rule: ${rule}"
      break
    fi
    ((attempt < 5)) || { echo "soak: rule-put failed: ${rule}" >&2; exit 1; }
    sleep 1
  done
fi

"${WATCH}" --target="${TARGET}" --lb_policy=round_robin --group=soak --consumers=2 --stuck_consumers=1 \
  --out="${OUT}/events.jsonl" 2>"${WORK}/watch.log" &
WATCH_PID=$!
BG_PIDS+=("${WATCH_PID}")
# The group exists once a watch is open: then the baseline (streams and group included).
for _ in $(seq 100); do
  [[ "$(curl -sf "http://127.0.0.1:${METRICS_PORTS[0]}/metrics" "http://127.0.0.1:${METRICS_PORTS[1]}/metrics" "http://127.0.0.1:${METRICS_PORTS[2]}/metrics" |
    awk '$1 == "orderhold_watches" { s += $2 } END { print s + 0 }')" -ge 3 ]] && break
  sleep 0.1
done
# ... and its stream exists on every partition (the group is created partition by partition: a
# baseline taken before the last one counted that stream as a key left over at the end).
for _ in $(seq 100); do
  (($(for p in $(primaries); do rcli "${p}" --scan --pattern '*:events'; done | wc -l) >= 64)) &&
    break
  sleep 0.1
done
read -r BASE_KEYS BASE_BYTES BASE_MEM < <(redis_totals "${OUT}/keys-baseline.txt")
log "Redis baseline: ${BASE_KEYS} keys of ${BASE_BYTES} B, used_memory ${BASE_MEM}"

bench_common=(--target="${TARGET}" --lb_policy=round_robin --connections=4 --mix="${MIX}"
  --users="${USERS}" --distribution=zipf --zipf_exponent=1.1 --ttl="${TTL_S}s" --deadline=2s
  --warmup=0s --progress=false --json)
log "measuring the maximum: ${MEASURE_S} s closed loop, concurrency 64"
"${BENCH}" "${bench_common[@]}" --concurrency=64 --duration="${MEASURE_S}s" \
  --call_log="${OUT}/calls-max.jsonl" >"${OUT}/bench-max.json"
MAX_RATE="$(jq '.throughput' "${OUT}/bench-max.json")"
LOAD_RATE="${RATE:-$(awk -v m="${MAX_RATE}" 'BEGIN { printf "%d", m / 2 }')}"
log "maximum ${MAX_RATE} calls/s; open loop at ${LOAD_RATE} calls/s for ${LOAD_S} s"

sample_loop &
BG_PIDS+=($!)
LOAD_START="$(date +%s)"
fault_loop $((LOAD_START + LOAD_S)) &
FAULT_PID=$!
BG_PIDS+=("${FAULT_PID}")
SCOPE_PID=""
if ((${#SCOPE_FLAGS[@]})); then
  "${BENCH}" --target="${TARGET}" --lb_policy=round_robin --connections=2 --mix="${SCOPE_MIX}" \
    --users="${SCOPE_USERS}" --user_prefix=s --scopes=2 --quantity=2 --ttl="${TTL_S}s" \
    --deadline=2s --warmup=0s --progress=false --json --rate="${SCOPE_RATE}" \
    --duration="${LOAD_S}s" --call_log="${OUT}/calls-scope.jsonl" >"${OUT}/bench-scope.json" &
  SCOPE_PID=$!
fi
"${BENCH}" "${bench_common[@]}" --rate="${LOAD_RATE}" --duration="${LOAD_S}s" \
  --max_in_flight=20000 --call_log="${OUT}/calls.jsonl" >"${OUT}/bench-load.json"
[[ -z "${SCOPE_PID}" ]] || wait "${SCOPE_PID}" || true
LOAD_END_US="$(now_us)"
wait "${FAULT_PID}" || true
# PlaceHolds the servers refused first for event:0's purchase cap, a lower bound: a killed
# replica's counters restart at 0 (a refusal over the total as well says SCOPE_TOTAL_LIMIT).
PURCHASE_CAP_REFUSALS="$(for ((i = 0; i < SERVERS; i++)); do
    curl -sf -m 5 "http://127.0.0.1:${METRICS_PORTS[i]}/metrics" || true
  done | awk '/^orderhold_holds_rejected_total\{.*reason="user_purchase_limit"/ { s += $2 }
    END { printf "%d", s }')"
log "load done: $(jq -c '{sent, throughput, errors}' "${OUT}/bench-load.json" 2>/dev/null)"

# Drain: every hold expires within ttl of the last call (an ExtendHold asks for ttl from now),
# the reaper ends it within a tick or two, the watcher gets it.
sleep $((TTL_S + 3))
last_size=-1
for _ in $(seq 120); do
  size="$(stat -c %s "${OUT}/events.jsonl")"
  [[ "${size}" == "${last_size}" ]] && break
  last_size="${size}"
  sleep "${DRAIN_POLL_S}"
done
DRAINED_US="$(now_us)"
log "events drained; waiting $((EVENT_RETENTION_S > OUTCOME_RETENTION_S ? EVENT_RETENTION_S : OUTCOME_RETENTION_S)) s + a trim for the retentions"
sleep $(( (EVENT_RETENTION_S > OUTCOME_RETENTION_S ? EVENT_RETENTION_S : OUTCOME_RETENTION_S) + 12 ))
read -r END_KEYS END_BYTES END_MEM < <(redis_totals "${OUT}/keys-end.txt")
log "Redis after: ${END_KEYS} keys of ${END_BYTES} B, used_memory ${END_MEM}"
kill -TERM "${WATCH_PID}"
wait "${WATCH_PID}" || true
# What the servers trimmed before the group acked it (--event_retention), from their logs (their
# counters restart with a killed replica; the logs are appended to across restarts).
TRIMMED_UNACKED="$(cat "${WORK}"/server-*.log | sed -n 's/.*--event_retention trimmed \([0-9]*\) hold events that a consumer group had not acked.*/\1/p' | awk '{ s += $1 } END { print s + 0 }')"

jq -n --arg mode "${MODE}" --argjson smoke "${SMOKE}" --argjson load_s "${LOAD_S}" \
  --argjson max_rate "${MAX_RATE}" --argjson rate "${LOAD_RATE}" --argjson servers "${SERVERS}" \
  --argjson max_holds "${MAX_HOLDS}" --arg mix "${MIX}" --argjson users "${USERS}" \
  --argjson ttl_s "${TTL_S}" --argjson fault_every "${FAULT_EVERY}" \
  --argjson load_start_us "${LOAD_START}000000" --argjson load_end_us "${LOAD_END_US}" \
  --argjson drained_us "${DRAINED_US}" --arg redis_flags "${REDIS_FLAGS[*]}" \
  --argjson trimmed_unacked "${TRIMMED_UNACKED}" --argjson event_retention_s "${EVENT_RETENTION_S}" \
  --argjson event_ack_timeout_s 5 \
  --argjson scope_totals "$(if ((${#SCOPE_FLAGS[@]})); then
      printf '{"prefix":"event:","holds":%d,"units":%d}' "${SCOPE_TOTAL_HOLDS}" "${SCOPE_TOTAL_UNITS}"
    else echo null; fi)" \
  --argjson scope_capacity "$(if ((${#SCOPE_FLAGS[@]})); then
      printf '{"prefix":"%s","units":%d}' "${SCOPE_CAPACITY_PREFIX}" "${SCOPE_CAPACITY_UNITS}"
    else echo null; fi)" \
  --argjson purchase_cap "$(if ((${#SCOPE_FLAGS[@]})); then
      printf '{"scope":"%s","units":%d,"refusals_seen":%d}' "${SCOPE_PURCHASE_CAP_SCOPE}" \
        "${SCOPE_PURCHASE_CAP_UNITS}" "${PURCHASE_CAP_REFUSALS}"
    else echo null; fi)" \
  --argjson base "{\"keys\":${BASE_KEYS},\"key_bytes\":${BASE_BYTES},\"used_memory\":${BASE_MEM}}" \
  --argjson fin "{\"keys\":${END_KEYS},\"key_bytes\":${END_BYTES},\"used_memory\":${END_MEM}}" \
  --arg machine "$(nproc) cores, $(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo)" \
  '{mode: $mode, smoke: ($smoke == 1), load_s: $load_s, max_rate: $max_rate, rate: $rate,
    servers: $servers, max_holds: $max_holds, mix: $mix, users: $users, ttl_s: $ttl_s,
    fault_every_s: $fault_every, load_start_us: $load_start_us, load_end_us: $load_end_us,
    drained_us: $drained_us, redis_flags: $redis_flags, trimmed_unacked: $trimmed_unacked,
    event_retention_s: $event_retention_s, event_ack_timeout_s: $event_ack_timeout_s, scope_totals: $scope_totals,
    scope_capacity: $scope_capacity, purchase_cap: $purchase_cap, redis_baseline: $base,
    redis_end: $fin, machine: $machine}' \
  >"${OUT}/meta.json"
"${PYTHON}" "${REPO}/tests/soak/oracle.py" "${OUT}"
