#!/usr/bin/env bash
# tests/upgrade/rolling_upgrade.sh: a rolling upgrade, for real. Two earlier releases and this
# build's orderhold-server run on one Redis as an upgrade would run them: the release before the
# due-index buckets (PRE_BUCKETS, stopped before this one starts: it cannot run beside it), then
# the previous release (FROM) beside this one, and every invariant of unscoped calls must hold
# across them. The old shapes they wrote (u:<user> sorted sets, the pre-bucket `due` index) must be
# moved into this release's layout by its migration (server/store/lua/migrations/v1_layout.lua):
#
#   A0 only the PRE_BUCKETS release runs: holds are placed for users of their own (some 6 s, some
#      10 min), some paid, some cancelled: u:<user> keys and the old `due` index. It is stopped;
#   A  only the FROM release runs, in its default layout (v1): holds are placed (some 4 s, some
#      10 min), some paid, some cancelled: u:<user> keys and bucket entries. It is restarted with
#      --hold_layout=read_v2 (the rolling flag change server/README.md "Upgrading" asks for before
#      this release may run beside it);
#   B  the NEW replica starts beside it. Two workers per user drive concurrent unscoped PlaceHold /
#      Pay / CancelHold / ListHolds through either replica at random (max_holds 3, ttls of 1.5 s to
#      60 s, at-cap refusals freeing a slot through either replica, Pay racing Cancel or Pay and
#      PlaceHold racing PlaceHold on both replicas at once, bursts of four PlaceHolds through
#      both); a consumer group watches the events
#      with one consumer on each replica (acking). Meanwhile the holds of phases A0 and A are
#      checked through the NEW replica: listed with their expiry, a retry answers created=false,
#      the short ones are ended by a reaper (their users are not touched until their EXPIRED event
#      came), the long ones are payable, the paid and cancelled ones are remembered;
#   S  every hold still live is cancelled (through either replica), and the test waits until every
#      placed order has its event (but the quiet users' holds, below);
#   R  then every order (but the quiet users') is paid through BOTH replicas and placed again
#      through one: the answers must match its one event (already_paid, or FAILED_PRECONDITION
#      naming the outcome and end time, in both releases);
#   C  the OLD replica is stopped (the upgrade is done): the NEW one alone still reaps. Some users
#      of phases A0 and A (the quiet ones) have a 10 min hold that nothing has touched since it was
#      placed: the new replica's migration sweep alone must move them. Within 60 s it owns every
#      partition, has logged "layout migration done in the 64 partitions this replica owns" and
#      its orderhold_layout_migration_users_left is 0; then no <prefix>:*:u:* and no
#      <prefix>:*:due key is left, and the quiet holds are still listed with their expiry and
#      their users' ended orders remembered (then cancelled, so that they have their event too).
#
# Redis (a private redis-server on a free port; with --cluster, a Redis Cluster of 3 primaries)
# has the application's ACL user of deploy/redis/orderhold.acl, and every release connects as it.
# With --cluster, the slots of the partitions still holding old shapes when phase C starts are
# migrated to another primary, slowly (key by key), while the sweep runs.
#
# Then check_upgrade.py reads every call, every event the watchers got and the Redis streams:
#   - exact cap: per user, intervals [expire - ttl, end) on Redis' clock overlap at most 3 deep;
#     no answer (PlaceHold's active_holds, ListHolds) ever shows more than 3;
#   - one end per hold: at most one winning Pay/CancelHold per order; the rest agree with it;
#   - one event per hold: exactly one stream entry and one distinct delivered event per placed
#     order, none for anything else, its outcome the winner's (EXPIRED: at its expire_time);
#   - outcomes remembered: the phase R answers; a retried PlaceHold never extends the expiry.
# Exit status 0 only when nothing was violated; the summary lists what was.
#
# Not in ctest (building the old releases takes minutes). Usage:
#   tests/upgrade/rolling_upgrade.sh [--from REF] [--pre-buckets REF] [--build DIR] [--cache DIR]
#                                    [--duration SECONDS] [--cluster] [--keep] [--build-only]
#     --from REF      the previous release, run beside this one (default below: 619bf43)
#     --pre-buckets REF  the release before the due-index buckets, run before FROM (default below:
#                     the parent of 4f8e00b, which introduced hd:<bucket> and bdue)
#     --build DIR     where this release's orderhold-server and orderhold-cli are (default
#                     <repo>/build, as tests/run.sh builds it)
#     --cache DIR     where old releases are built, one directory per commit, reused while its
#                     binary exists (default <repo>/build-upgrade)
#     --duration S    length of phase B (default 30)
#     --cluster       run against a Redis Cluster (3 primaries, no replicas) with a slot migration
#                     during phase C's sweep
#     --keep          keep the work directory (logs, ledger, events) for a look afterwards
#     --build-only    build the old releases (warm the cache) and exit
# An old release is extracted with `git archive` (no worktree: the repository's state is not
# touched) and built with `nice -n 19`, one job (Release, target orderhold-server only), one
# release after the other. The client is this build's orderhold-cli for every replica: client/
# and proto/ did not change since PRE_BUCKETS, and an unscoped call sets no new field, so the
# bytes sent are the old client's.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
HERE="${REPO}/tests/upgrade"
# The previous release: the one before 161ec5c (one layout; --hold_layout removed), i.e.
# `git rev-parse 619bf43`. It runs beside this one with --hold_layout=read_v2.
# The release before the buckets: the parent of 4f8e00b ("The due index in two levels": hd:<bucket>
# and bdue replace the per-partition `due` index), i.e. `git rev-parse 4f8e00b^`. It writes every
# hold in u:<user> and files its users in `due`; it cannot run beside this release (it reads
# neither the buckets nor the holds bucket), so it runs first, alone.
FROM=619bf43fa2296326a932d5c2d847dff999526b49
PRE_BUCKETS=19be69773277a8101080c79f83b3a3a3e298c860
BUILD="${REPO}/build"
CACHE="${REPO}/build-upgrade"
DURATION=30
KEEP=0
BUILD_ONLY=0
CLUSTER=0
while (($#)); do
  case "$1" in
    --from) FROM="${2:?--from needs a REF}"; shift 2 ;;
    --pre-buckets) PRE_BUCKETS="${2:?--pre-buckets needs a REF}"; shift 2 ;;
    --build) BUILD="${2:?--build needs a DIR}"; shift 2 ;;
    --cache) CACHE="${2:?--cache needs a DIR}"; shift 2 ;;
    --duration) DURATION="${2:?--duration needs seconds}"; shift 2 ;;
    --cluster) CLUSTER=1; shift ;;
    --keep) KEEP=1; shift ;;
    --build-only) BUILD_ONLY=1; shift ;;
    -h | --help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "rolling_upgrade: unknown argument $1 (--help)" >&2; exit 64 ;;
  esac
done
if ! [[ "${DURATION}" =~ ^[0-9]+$ ]] || ((DURATION < 5)); then
  echo "rolling_upgrade: --duration must be whole seconds >= 5" >&2
  exit 64
fi

# shellcheck source=tests/bench/lib.sh
source "${REPO}/tests/bench/lib.sh"
START=${SECONDS}
log() { printf '[%3ds] %s\n' $((SECONDS - START)) "$*"; }
die() { echo "rolling_upgrade: $*" >&2; exit 1; }
for tool in redis-server redis-cli python3 jq git cmake ninja; do
  command -v "${tool}" >/dev/null || die "${tool} missing (deploy/install-deps.sh installs it)"
done

# --- the old releases -------------------------------------------------------------------------
FROM_SHA="$(git -C "${REPO}" rev-parse --verify --quiet "${FROM}^{commit}")" ||
  die "--from ${FROM}: not a commit of ${REPO}"
PRE_SHA="$(git -C "${REPO}" rev-parse --verify --quiet "${PRE_BUCKETS}^{commit}")" ||
  die "--pre-buckets ${PRE_BUCKETS}: not a commit of ${REPO}"
old_server() { echo "${CACHE}/$1/build/server/orderhold-server"; }  # old_server SHA
# build_old SHA: builds orderhold-server of commit SHA in ${CACHE}/SHA, unless its binary is there.
build_old() {
  local sha="$1" dir="${CACHE}/$1" server
  server="$(old_server "${sha}")"
  if [[ -x "${server}" ]]; then
    log "old release ${sha:0:7}: cached (${server})"
    return
  fi
  log "old release ${sha:0:7}: building orderhold-server in ${dir} (nice 19, -j1; minutes)"
  local began=${SECONDS}
  mkdir -p "${dir}"
  # Extracted once (the marker): an interrupted build resumes where ninja stopped.
  if [[ ! -f "${dir}/src/.extracted" ]]; then
    rm -rf "${dir}/src"
    mkdir -p "${dir}/src"
    git -C "${REPO}" archive "${sha}" | tar -x -C "${dir}/src"
    touch "${dir}/src/.extracted"
  fi
  if ! { nice -n 19 cmake -G Ninja -S "${dir}/src" -B "${dir}/build" \
           -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF &&
         nice -n 19 cmake --build "${dir}/build" -j 1 --target orderhold-server; } \
       >"${dir}/build.log" 2>&1; then
    tail -30 "${dir}/build.log" >&2
    die "building ${sha:0:7} failed (whole log: ${dir}/build.log)"
  fi
  log "old release ${sha:0:7}: built in $((SECONDS - began)) s"
}
# One after the other: one job at a time on the machine.
build_old "${FROM_SHA}"
build_old "${PRE_SHA}"
((BUILD_ONLY)) && exit 0

NEW_SERVER_SRC="${BUILD}/server/orderhold-server"
CLI_SRC="${BUILD}/client/orderhold-cli"
[[ -x "${NEW_SERVER_SRC}" && -x "${CLI_SRC}" ]] ||
  die "no orderhold-server/orderhold-cli in ${BUILD} (run tests/run.sh, or pass --build DIR)"

# --- the work directory and cleanup ------------------------------------------------------------
WORK="$(mktemp -d "${TMPDIR:-/tmp}/rolling-upgrade.XXXXXX")"
PIDS=() # every background process started here (Redis first), stopped by cleanup
# shellcheck disable=SC2317  # run by the EXIT trap
cleanup() {
  local rc=$? pid i
  # Newest first (Redis last), each with its children (a worker's orderhold-cli call in flight).
  for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do
    pid="${PIDS[i]}"
    pkill -P "${pid}" 2>/dev/null || true
    kill "${pid}" 2>/dev/null || true
    wait "${pid}" 2>/dev/null || true
  done
  if ((KEEP)); then echo "rolling_upgrade: work directory kept: ${WORK}"; else rm -rf "${WORK}"; fi
  exit "${rc}"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
# A process stopped and waited for here leaves PIDS (its id may be reused by then).
forget_pid() {
  local i
  for i in "${!PIDS[@]}"; do [[ "${PIDS[i]}" == "$1" ]] && unset 'PIDS[i]'; done
  PIDS=("${PIDS[@]}")
}

# Copies, so a rebuild of ${BUILD} during the run cannot swap a binary under it.
mkdir -p "${WORK}/bin" "${WORK}/ledger" "${WORK}/events"
cp "${NEW_SERVER_SRC}" "${WORK}/bin/orderhold-server-new"
cp "$(old_server "${FROM_SHA}")" "${WORK}/bin/orderhold-server-old"
cp "$(old_server "${PRE_SHA}")" "${WORK}/bin/orderhold-server-pre"
cp "${CLI_SRC}" "${WORK}/bin/orderhold-cli"
CLI="${WORK}/bin/orderhold-cli"
log "pre: ${PRE_SHA:0:7} ($(git -C "${REPO}" log -1 --format=%s "${PRE_SHA}" | cut -c1-60))"
log "old: ${FROM_SHA:0:7} ($(git -C "${REPO}" log -1 --format=%s "${FROM_SHA}" | cut -c1-60))"
log "new: ${NEW_SERVER_SRC} (built $(date -r "${NEW_SERVER_SRC}" '+%F %T');" \
  "HEAD $(git -C "${REPO}" rev-parse --short HEAD))"

# --- Redis, with the application's ACL user (deploy/redis/orderhold.acl) ------------------------
# Every release connects as that user: the mixed fleet needs no command the ACL lacks.
REDIS_PASSWORD="upgrade-$$-${RANDOM}"
read -r -a ACL_RULES < <(awk 'NR == 1 { for (i = 5; i <= NF; i++) printf "%s ", $i; print "" }' \
  "${REPO}/deploy/redis/orderhold.acl")
REDIS_FLAGS=()
if ((CLUSTER)); then
  # 3 primaries (lib.sh start_cluster); a cluster client needs a few commands more
  # (tests/testing/redis_cluster.h, kClusterAppAclRules).
  start_cluster "${WORK}/cluster" 3 || die "no Redis Cluster"
  PIDS+=("${CLUSTER_PIDS[@]}")
  REDIS_PORTS=("${CLUSTER_PORTS[@]}")
  ACL_RULES+=(+cluster\|shards +cluster\|slots +asking +client\|setname)
  REDIS_FLAGS=(--redis_mode=cluster)
else
  REDIS_PORT="$(free_port)"
  redis-server --port "${REDIS_PORT}" --bind 127.0.0.1 --save '' --appendonly no \
    --dir "${WORK}" --logfile "${WORK}/redis.log" &
  PIDS+=($!)
  wait_port "${REDIS_PORT}"
  REDIS_PORTS=("${REDIS_PORT}")
fi
addrs=()
for p in "${REDIS_PORTS[@]}"; do
  redis-cli -p "${p}" ACL SETUSER orderhold on ">${REDIS_PASSWORD}" "${ACL_RULES[@]}" >/dev/null
  addrs+=("127.0.0.1:${p}")
done
# The URL holds a password: passed in the environment, not on a command line (ps shows those).
ORDERHOLD_REDIS_URL="redis://orderhold:${REDIS_PASSWORD}@$(IFS=,; echo "${addrs[*]}")"
export ORDERHOLD_REDIS_URL
# The keys matching PATTERN, on every primary (the admin user: no password).
scan_keys() {
  local p
  for p in "${REDIS_PORTS[@]}"; do redis-cli -p "${p}" --scan --pattern "$1"; done
}
# Keys of the older shapes (v1_layout.lua's header): users' u:<user> sets, the pre-bucket `due`.
count_keys() { scan_keys "$1" | wc -l; }
old_shapes() {
  echo "$(count_keys 'orderhold:*:u:*') u: keys, $(count_keys 'orderhold:*:due') due keys," \
    "$(count_keys 'orderhold:*:hd:*') hd: keys, $(count_keys 'orderhold:*:h:*') h: keys"
}

# --- the replicas ------------------------------------------------------------------------------
declare -A GRPC_PORT METRICS_PORT SERVER_PID
start_replica() {  # start_replica pre|old|new [FLAG...]: the release's binary, FLAGs added
  local name="$1"
  shift
  GRPC_PORT[${name}]="$(free_port)"
  METRICS_PORT[${name}]="$(free_port)"
  "${WORK}/bin/orderhold-server-${name}" --grpc_address="127.0.0.1:${GRPC_PORT[${name}]}" \
    --metrics_address="127.0.0.1:${METRICS_PORT[${name}]}" --max_holds=3 \
    --reap_interval=200ms --redis_connections=2 "${REDIS_FLAGS[@]}" "$@" \
    >>"${WORK}/server-${name}.log" 2>&1 &
  SERVER_PID[${name}]=$!
  PIDS+=($!)
  local deadline=$((SECONDS + 20))
  until "${CLI}" --target="127.0.0.1:${GRPC_PORT[${name}]}" --timeout=1s health >/dev/null 2>&1; do
    kill -0 "${SERVER_PID[${name}]}" 2>/dev/null ||
      { tail -20 "${WORK}/server-${name}.log" >&2; die "the ${name} replica exited"; }
    ((SECONDS < deadline)) || die "the ${name} replica is not SERVING after 20 s"
    sleep 0.1
  done
  log "${name} replica up${*:+ ($*)}: gRPC 127.0.0.1:${GRPC_PORT[${name}]}," \
    "metrics :${METRICS_PORT[${name}]}"
}
# stop_replica NAME TAG: its metrics to metrics-TAG.txt, then SIGTERM; it must exit 0.
stop_replica() {
  local name="$1" rc=0
  scrape "${METRICS_PORT[${name}]}" >"${WORK}/metrics-$2.txt" || true
  kill -TERM "${SERVER_PID[${name}]}"
  wait "${SERVER_PID[${name}]}" || rc=$?
  forget_pid "${SERVER_PID[${name}]}"
  ((rc == 0)) || violation "the ${name} replica ($2) exited ${rc} on SIGTERM"
  log "${name} replica stopped (SIGTERM)"
}

# --- calls, recorded -----------------------------------------------------------------------------
# call PHASE REPLICA OP USER [ORDER [TTL]]: one orderhold-cli call (OP: place, pay, cancel, list);
# one line in the ledger per attempt (a file per process, so concurrent callers never interleave):
#   phase replica op user order ttl_ms rc t_start t_end stdout(JSON, one line) stderr
# UNAVAILABLE (14) and DEADLINE_EXCEEDED (4) are retried (up to 5 attempts), as the API tells
# callers to. Sets RC, OUT (stdout) and ERR (stderr, one line) for the caller.
call() {
  local phase="$1" replica="$2" op="$3" user="$4" order="${5:-}" ttl="${6:-}" t0 t1
  local errf="${WORK}/ledger/err.${BASHPID}"
  local args=(--target="127.0.0.1:${GRPC_PORT[${replica}]}" --json --timeout=5s "${op}" "${user}")
  [[ -n "${order}" ]] && args+=("${order}")
  [[ -n "${ttl}" ]] && args+=(--ttl="${ttl}ms")
  for _ in 1 2 3 4 5; do
    t0="${EPOCHREALTIME}"
    RC=0
    OUT="$("${CLI}" "${args[@]}" 2>"${errf}")" || RC=$?
    t1="${EPOCHREALTIME}"
    ERR="$(tr '\t\n' '  ' <"${errf}")"
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "${phase}" "${replica}" "${op}" \
      "${user}" "${order}" "${ttl}" "${RC}" "${t0}" "${t1}" "${OUT//$'\n'/ }" "${ERR}" \
      >>"${WORK}/ledger/${BASHPID}.tsv"
    [[ "${RC}" == 14 || "${RC}" == 4 ]] || return 0
    sleep 0.2
  done
}

VIOLATIONS="${WORK}/violations"
: >"${VIOLATIONS}"
violation() { echo "$*" >>"${VIOLATIONS}"; echo "VIOLATION: $*" >&2; }

# expect PHASE REPLICA OP USER ORDER [TTL] -- WANT_RC [JQ_FILTER]: a call whose exit status must be
# WANT_RC and, when given, whose JSON answer must satisfy the jq filter (or, for a failure, whose
# stderr must contain JQ_FILTER as text).
expect() {
  local phase="$1" replica="$2" op="$3" user="$4" order="$5" ttl=""
  shift 5
  [[ "$1" != -- ]] && { ttl="$1"; shift; }
  shift
  local want_rc="$1" filter="${2:-}"
  call "${phase}" "${replica}" "${op}" "${user}" "${order}" "${ttl}"
  if [[ "${RC}" != "${want_rc}" ]]; then
    violation "${phase}: ${op} ${user} ${order} via ${replica}: exit ${RC} (${ERR}${OUT})," \
      "want ${want_rc}"
  elif [[ -n "${filter}" && "${want_rc}" == 0 ]] && ! jq -e "${filter}" >/dev/null <<<"${OUT}"; then
    violation "${phase}: ${op} ${user} ${order} via ${replica}: ${OUT} fails ${filter}"
  elif [[ -n "${filter}" && "${want_rc}" != 0 && "${ERR}" != *"${filter}"* ]]; then
    violation "${phase}: ${op} ${user} ${order} via ${replica}: '${ERR}' lacks '${filter}'"
  fi
  return 0
}

# Expire time (JSON string) of ORDER in the ledger's last created=true answer for it.
placed_expire() {
  cat "${WORK}"/ledger/*.tsv | awk -F'\t' -v o="$1" '$3 == "place" && $5 == o && $7 == 0' |
    cut -f10 | jq -r 'select(.created) | .hold.expireTime' | head -1
}

# Whether ORDER's event has arrived at any watcher (the CLI prints compact JSON; ids here need no
# escaping).
has_event() { grep -qF "\"orderId\":\"$1\"," "${WORK}"/events/*.jsonl 2>/dev/null; }

# --- phase A0: the release before the buckets, alone ---------------------------------------------
P_USERS=(p1 p2 p3)           # checked through the new replica in phase B, as A_USERS
Q0_USERS=(q01 q02 q03 q04 q05)  # quiet: one long hold nobody touches until phase C's sweep
A_USERS=(a1 a2 a3)           # touched only by the phase-A checks
QA_USERS=(qa1 qa2 qa3 qa4 qa5)  # quiet, as Q0_USERS
B_USERS=(b1 b2 b3 b4)        # also driven by the phase-B workers
QUIET="${WORK}/quiet"        # the quiet holds: check_upgrade.py leaves them out until phase C
: >"${QUIET}"

# The checked users' holds: long, paid, cancelled, one refused over the cap, and a short one last.
old_holds() {  # old_holds PHASE REPLICA SHORT_TTL_MS USER...
  local phase="$1" r="$2" short="$3" u
  shift 3
  for u in "$@"; do
    expect "${phase}" "${r}" place "${u}" "${phase}-${u}-long" 600000 -- 0 \
      '.created and .activeHolds == 1'
    expect "${phase}" "${r}" place "${u}" "${phase}-${u}-paid" 600000 -- 0 \
      '.created and .activeHolds == 2'
    expect "${phase}" "${r}" place "${u}" "${phase}-${u}-cancel" 600000 -- 0 \
      '.created and .activeHolds == 3'
    expect "${phase}" "${r}" place "${u}" "${phase}-${u}-over" 600000 -- 8 'RESOURCE_EXHAUSTED'
    expect "${phase}" "${r}" pay "${u}" "${phase}-${u}-paid" -- 0 '.alreadyPaid == false'
    expect "${phase}" "${r}" cancel "${u}" "${phase}-${u}-cancel" -- 0 \
      '.alreadyCancelled == false'
  done
  # Last, so they are still live when the next release starts.
  for u in "$@"; do
    expect "${phase}" "${r}" place "${u}" "${phase}-${u}-short" "${short}" -- 0 \
      '.created and .activeHolds == 2'
  done
}
# The quiet users' holds: one ended (PAY or CANCEL), then the quiet one, 10 min.
quiet_holds() {  # quiet_holds PHASE REPLICA pay|cancel USER...
  local phase="$1" r="$2" end="$3" u
  shift 3
  for u in "$@"; do
    expect "${phase}" "${r}" place "${u}" "${phase}-${u}-${end}" 600000 -- 0 \
      '.created and .activeHolds == 1'
    expect "${phase}" "${r}" "${end}" "${u}" "${phase}-${u}-${end}" -- 0
    expect "${phase}" "${r}" place "${u}" "${phase}-${u}-quiet" 600000 -- 0 \
      '.created and .activeHolds == 1'
    echo "${u} ${phase}-${u}-quiet" >>"${QUIET}"
  done
}

start_replica pre
log "phase A0: holds through the release before the buckets only"
old_holds A0 pre 6000 "${P_USERS[@]}"
A0_SHORT_DEADLINE=$(($(date +%s) + 7))
quiet_holds A0 pre pay "${Q0_USERS[@]}"
# What this test stands on: that release wrote its users' holds in u: keys and filed them in the
# old due index, not in buckets.
n_u="$(count_keys 'orderhold:*:u:*')"
want_u=$((${#P_USERS[@]} + ${#Q0_USERS[@]}))
log "phase A0: $(old_shapes)"
((n_u == want_u)) || violation "A0: ${n_u} u: keys, want ${want_u} (one per user)"
(($(count_keys 'orderhold:*:due') > 0)) || violation "A0: no old due index written"
(($(count_keys 'orderhold:*:hd:*') == 0)) || violation "A0: the pre-bucket release wrote hd: keys"
stop_replica pre pre

# --- phase A: the previous release alone, in its default layout (v1) -----------------------------
start_replica old
log "phase A: holds through the old replica only (layout v1)"
old_holds A old 4000 "${A_USERS[@]}"
# (the short ones of A_USERS are placed last by old_holds; those of B_USERS after them)
for u in "${B_USERS[@]}"; do
  expect A old place "${u}" "A-${u}-long" 600000 -- 0 '.created and .activeHolds == 1'
  expect A old place "${u}" "A-${u}-short" 4000 -- 0 '.created and .activeHolds == 2'
done
A_SHORT_DEADLINE=$(($(date +%s) + 5))
quiet_holds A old cancel "${QA_USERS[@]}"
n_u="$(count_keys 'orderhold:*:u:*')"
want_u=$((want_u + ${#A_USERS[@]} + ${#QA_USERS[@]} + ${#B_USERS[@]}))
log "phase A: $(old_shapes)"
((n_u == want_u)) || violation "A: ${n_u} u: keys, want ${want_u} (one per user)"
(($(count_keys 'orderhold:*:h:*') == 0)) || violation "A: the old release in v1 wrote h: keys"
# The rolling flag change the upgrade asks for first: every old replica reads the new layout.
stop_replica old old-v1
start_replica old --hold_layout=read_v2

# --- phase B: old and new side by side -----------------------------------------------------------
start_replica new
# One consumer group, a consumer on each replica; each event acked once printed.
declare -A WATCH_PID
for r in old new; do
  "${CLI}" --target="127.0.0.1:${GRPC_PORT[${r}]}" watch --group=upgrade --consumer="c-${r}" \
    --ack --start=earliest >"${WORK}/events/${r}.jsonl" 2>"${WORK}/watch-${r}.log" &
  PIDS+=($!)
  WATCH_PID[${r}]=$!
done

# Random choices without a subshell each (subshells of bash 5.2 reseed RANDOM, so every worker
# draws its own sequence).
REPLICAS=(old new)
ENDS=(pay cancel)
TTLS=(1500 2500 2500 60000)

# One worker: places, pays, cancels and lists for USER through either replica until DEADLINE.
worker() {
  local user="$1" w="$2" deadline="$3" i=0 order r rest
  while (($(date +%s) < deadline)); do
    i=$((i + 1))
    order="B-${user}-${w}-${i}"
    r="${REPLICAS[RANDOM % 2]}"
    if ((RANDOM % 12 == 0)); then
      # The same order placed through both at once: one created, one retry (same expiry).
      call B old place "${user}" "${order}" 2500 &
      call B new place "${user}" "${order}" 2500 &
      wait
      continue
    fi
    if ((RANDOM % 12 == 0)); then
      # A burst: four orders at once, two through each release, for the last free slots.
      call B old place "${user}" "${order}a" 2500 &
      call B new place "${user}" "${order}b" 2500 &
      call B old place "${user}" "${order}c" 2500 &
      call B new place "${user}" "${order}d" 2500 &
      wait
      continue
    fi
    call B "${r}" place "${user}" "${order}" "${TTLS[RANDOM % 4]}"
    if [[ "${RC}" == 0 ]]; then
      case $((RANDOM % 10)) in
        0 | 1 | 2) call B "${REPLICAS[RANDOM % 2]}" pay "${user}" "${order}" ;;
        3 | 4) call B "${REPLICAS[RANDOM % 2]}" cancel "${user}" "${order}" ;;
        5)  # ending races across releases: exactly one wins
          call B old "${ENDS[RANDOM % 2]}" "${user}" "${order}" &
          call B new "${ENDS[RANDOM % 2]}" "${user}" "${order}" &
          wait ;;
        *) ;;  # left to expire (or to be freed below)
      esac
    elif [[ "${RC}" == 8 ]]; then
      # At the cap: free a slot held by anyone (the other worker may race for the same one).
      call B "${REPLICAS[RANDOM % 2]}" list "${user}"
      if [[ "${RC}" == 0 ]]; then
        rest="$(jq -r '.holds[].orderId' <<<"${OUT}" | shuf -n1)" || rest=""
        if [[ -n "${rest}" ]]; then
          call B "${REPLICAS[RANDOM % 2]}" "${ENDS[RANDOM % 2]}" "${user}" "${rest}"
        fi
      fi
    fi
    if ((RANDOM % 3 == 0)); then call B "${REPLICAS[RANDOM % 2]}" list "${user}"; fi
  done
}

# The holds of phase PHASE (A0 or A), through the new replica, while the workers run.
check_old_holds() {  # check_old_holds PHASE SHORT_DEADLINE USER...
  local phase="$1" short_deadline="$2" u expire left listed
  shift 2
  for u in "$@"; do
    expire="$(placed_expire "${phase}-${u}-long")"
    listed="[.holds[] | select(.orderId == \"${phase}-${u}-long\" and"
    listed+=" .expireTime == \"${expire}\")]"
    expect B new list "${u}" "" -- 0 "${listed} | length == 1"
    expect B old list "${u}" "" -- 0 "${listed} | length == 1"
  done
  # The short holds: ended by a reaper (until their event, these users get only ListHolds, which
  # writes nothing; a PlaceHold, Pay or CancelHold would end them itself), one EXPIRED event each.
  for u in "$@"; do
    until has_event "${phase}-${u}-short"; do
      (($(date +%s) < short_deadline + 15)) || {
        violation "${phase}-${u}-short: no event 15 s after its expiry (not reaped?)"
        break
      }
      sleep 0.2
    done
  done
  for u in "$@"; do
    expect B new list "${u}" "" -- 0 "[.holds[].orderId] | index(\"${phase}-${u}-short\") == null"
    # A retry through the new release: the same hold, not extended, not ALREADY_EXISTS.
    expire="$(placed_expire "${phase}-${u}-long")"
    expect B new place "${u}" "${phase}-${u}-long" 900000 -- 0 \
      ".created == false and .hold.expireTime == \"${expire}\""
    expect B new pay "${u}" "${phase}-${u}-long" -- 0 '.alreadyPaid == false'
    expect B old pay "${u}" "${phase}-${u}-long" -- 0 '.alreadyPaid == true'
    expect B new pay "${u}" "${phase}-${u}-paid" -- 0 '.alreadyPaid == true'
    expect B new cancel "${u}" "${phase}-${u}-paid" -- 9 'already ended: PAID'
    expect B new cancel "${u}" "${phase}-${u}-cancel" -- 0 '.alreadyCancelled == true'
    expect B new pay "${u}" "${phase}-${u}-short" -- 9 'already ended: EXPIRED'
    expect B new place "${u}" "${phase}-${u}-short" 1000 -- 9 'already ended: EXPIRED'
    left="$(placed_expire "${phase}-${u}-over")"
    [[ -z "${left}" ]] || violation "${phase}-${u}-over: placed over the cap"
  done
}
check_phase_a() {
  check_old_holds A0 "${A0_SHORT_DEADLINE}" "${P_USERS[@]}"
  check_old_holds A "${A_SHORT_DEADLINE}" "${A_USERS[@]}"
}

log "phase B: ${DURATION} s of concurrent calls through both replicas," \
  "users ${B_USERS[*]} (2 workers each)"
B_DEADLINE=$(($(date +%s) + DURATION))
WORKERS=()
for u in "${B_USERS[@]}"; do
  for w in 1 2; do
    worker "${u}" "${w}" "${B_DEADLINE}" &
    WORKERS+=($!)
  done
done
check_phase_a &
WORKERS+=($!)
PIDS+=("${WORKERS[@]}")
for pid in "${WORKERS[@]}"; do wait "${pid}" || violation "a phase-B worker failed (exit $?)"; done
log "phase B: done ($(cat "${WORK}"/ledger/*.tsv | wc -l) calls so far)"

# Every hold still live is cancelled (alternating replicas), so every placed hold has ended.
n=0
for u in "${P_USERS[@]}" "${A_USERS[@]}" "${B_USERS[@]}"; do
  call S new list "${u}"
  [[ "${RC}" == 0 ]] || { violation "S: ListHolds ${u} exit ${RC}: ${ERR}"; continue; }
  for o in $(jq -r '.holds[].orderId' <<<"${OUT}"); do
    call S "$( ((n++ % 2)) && echo old || echo new)" cancel "${u}" "${o}"
  done
done

# Wait for one event per placed order (any watcher).
python3 "${HERE}/check_upgrade.py" --work "${WORK}" --wait 30 ||
  violation "events missing after 30 s (listed above)"
log "phase S: every hold ended, $(cat "${WORK}"/events/*.jsonl | wc -l) events delivered"

# --- phase R: every outcome remembered, through both releases ------------------------------------
log "phase R: every order paid through both replicas, placed again through one"
recheck() {  # recheck SLICE: orders whose index mod 4 == SLICE
  local i=0 user order
  while read -r user order; do
    ((i++ % 4 == $1)) || continue
    call R old pay "${user}" "${order}"
    call R new pay "${user}" "${order}"
    call R "$( ((i % 2)) && echo old || echo new)" place "${user}" "${order}" 1000
  done < <(python3 "${HERE}/check_upgrade.py" --work "${WORK}" --orders)
}
RECHECKS=()
for s in 0 1 2 3; do recheck "${s}" & RECHECKS+=($!); done
PIDS+=("${RECHECKS[@]}")
for pid in "${RECHECKS[@]}"; do
  wait "${pid}" || violation "a phase-R checker failed (exit $?)"
done

# --- phase C: the upgrade done, the old replica gone ---------------------------------------------
# The value of unlabelled metric M on the new replica's /metrics, as an integer ("" if none).
new_metric() {
  scrape "${METRICS_PORT[new]}" 2>/dev/null | awk -v m="$1" '$1 == m { printf "%d\n", $2 }'
}
log "phase C: before: $(old_shapes); the new replica's users left to sweep:" \
  "$(new_metric orderhold_layout_migration_users_left), owned partitions:" \
  "$(new_metric orderhold_reaper_owned_partitions)"
log "phase C: quiet users still in an older shape: $(scan_keys 'orderhold:*:u:q*' |
  sed 's/.*:u://' | sort | tr '\n' ' ')"

# --cluster: the slots that still hold older shapes move to the next primary while the sweep runs
# (a step on a slot being migrated is refused and retried: migration_sweep.h). Each is marked
# MIGRATING/IMPORTING before the old replica stops (so the new one's first steps there meet the
# migration), then its keys move one by one, 0.3 s apart, and the slot is assigned.
declare -A SLOT_FROM SLOT_TO
mark_slot() {  # mark_slot SLOT FROM_PORT TO_PORT
  redis-cli -p "$3" CLUSTER SETSLOT "$1" IMPORTING "$(redis-cli -p "$2" CLUSTER MYID)" >/dev/null
  redis-cli -p "$2" CLUSTER SETSLOT "$1" MIGRATING "$(redis-cli -p "$3" CLUSTER MYID)" >/dev/null
}
move_slot() {  # move_slot SLOT FROM_PORT TO_PORT
  local slot="$1" from="$2" to="$3" to_id key p n=0
  to_id="$(redis-cli -p "${to}" CLUSTER MYID)"
  while key="$(redis-cli -p "${from}" CLUSTER GETKEYSINSLOT "${slot}" 1)" && [[ -n "${key}" ]]; do
    redis-cli -p "${from}" MIGRATE 127.0.0.1 "${to}" "" 0 5000 KEYS "${key}" >/dev/null
    n=$((n + 1))
    sleep 0.3
  done
  for p in "${REDIS_PORTS[@]}"; do
    redis-cli -p "${p}" CLUSTER SETSLOT "${slot}" NODE "${to_id}" >/dev/null
  done
  echo "$(date +%T.%N | cut -c1-12) slot ${slot}: ${n} keys 127.0.0.1:${from} -> 127.0.0.1:${to}"
}
MIGRATOR=""
if ((CLUSTER)); then
  for i in "${!REDIS_PORTS[@]}"; do
    p="${REDIS_PORTS[i]}"
    while read -r key; do
      slot="$(redis-cli -p "${p}" CLUSTER KEYSLOT "${key}")"
      SLOT_FROM[${slot}]="${p}"
      SLOT_TO[${slot}]="${REDIS_PORTS[(i + 1) % ${#REDIS_PORTS[@]}]}"
    done < <(redis-cli -p "${p}" --scan --pattern 'orderhold:*:u:*'
             redis-cli -p "${p}" --scan --pattern 'orderhold:*:due')
  done
  for slot in "${!SLOT_FROM[@]}"; do
    mark_slot "${slot}" "${SLOT_FROM[${slot}]}" "${SLOT_TO[${slot}]}"
  done
  log "phase C: slots ${!SLOT_FROM[*]} (those of the older shapes left) marked migrating"
fi

NEW_LOG_AT="$(wc -l <"${WORK}/server-new.log")"  # the new replica's log lines so far
kill "${WATCH_PID[old]}"
wait "${WATCH_PID[old]}" 2>/dev/null || true
forget_pid "${WATCH_PID[old]}"
stop_replica old old-read_v2
sweep_began=${SECONDS}
if ((CLUSTER)); then
  (
    for slot in "${!SLOT_FROM[@]}"; do
      move_slot "${slot}" "${SLOT_FROM[${slot}]}" "${SLOT_TO[${slot}]}"
    done
  ) >"${WORK}/slot-migrations.log" 2>&1 &
  MIGRATOR=$!
  PIDS+=("${MIGRATOR}")
fi
log "phase C: the new replica alone"
for i in 1 2 3; do
  expect C new place c1 "C-c1-${i}" 1000 -- 0 '.created'
done
C_DEADLINE=$((SECONDS + 15))
for i in 1 2 3; do
  until has_event "C-c1-${i}"; do
    if ((SECONDS >= C_DEADLINE)); then
      violation "C-c1-${i}: no event 15 s after (new replica alone)"
      break
    fi
    sleep 0.2
  done
done

# The sweep: nobody touches the quiet users; the new replica must own every partition, have swept
# each (its log line: "layout migration done in the 64 partitions this replica owns", or one
# "layout migration of partition N done" per partition as the first builds of this release logged
# it) and count no user left.
sweep_done() {
  tail -n "+$((NEW_LOG_AT + 1))" "${WORK}/server-new.log" |
    grep -q 'layout migration done in the 64 partitions' ||
    (($(grep -o 'layout migration of partition [0-9]* done' "${WORK}/server-new.log" |
      sort -u | wc -l) == 64))
}
SWEEP_WAIT=$((CLUSTER ? 120 : 60))
log "phase C: the new replica's migration sweep (${SWEEP_WAIT} s at most since the old stopped)"
max_left=0
while :; do
  owned="$(new_metric orderhold_reaper_owned_partitions)"
  left="$(new_metric orderhold_layout_migration_users_left)"
  ((${left:-0} > max_left)) && max_left=${left}
  sweep_s=$((SECONDS - sweep_began))
  [[ "${owned}" == 64 && "${left}" == 0 ]] && sweep_done && break
  if ((sweep_s >= SWEEP_WAIT)); then
    violation "C: the migration sweep not done after ${SWEEP_WAIT} s: owned partitions" \
      "${owned:-?}, users left ${left:-?}, $(sweep_done && echo 'its log says done' ||
        echo 'no log line saying done')"
    break
  fi
  sleep 0.5
done
if [[ -n "${MIGRATOR}" ]]; then
  wait "${MIGRATOR}" || violation "C: a slot migration failed (slot-migrations.log)"
  forget_pid "${MIGRATOR}"
  log "phase C: $(wc -l <"${WORK}/slot-migrations.log") slot(s) migrated," \
    "the last at $(tail -1 "${WORK}/slot-migrations.log" | cut -d' ' -f1)"
fi
moved="$(tail -n "+$((NEW_LOG_AT + 1))" "${WORK}/server-new.log" |
  grep -o 'layout migration of partition [0-9]* done: [0-9]* users moved' |
  awk '{ n++; u += $7 } END { printf "%d users in %d partitions", u, n }')"
log "phase C: sweep done ${sweep_s} s after the old replica stopped (moved since: ${moved};" \
  "users left: at most ${max_left} seen); $(old_shapes)"
for pattern in 'orderhold:*:u:*' 'orderhold:*:due'; do
  keys="$(scan_keys "${pattern}" | sort | head -20 | tr '\n' ' ')"
  [[ -z "${keys}" ]] || violation "C: keys ${pattern} left after the sweep: ${keys}"
done
# The quiet holds, moved by the sweep alone: still listed with their expiry, their user's ended
# order remembered (phase R left these users alone). Then cancelled, so each has its one event.
while read -r u o; do
  expire="$(placed_expire "${o}")"
  expect C new list "${u}" "" -- 0 \
    "[.holds[] | select(.orderId == \"${o}\" and .expireTime == \"${expire}\")] | length == 1"
  case "${o}" in
    A0-*)
      expect C new pay "${u}" "A0-${u}-pay" -- 0 '.alreadyPaid == true'
      expect C new cancel "${u}" "A0-${u}-pay" -- 9 'already ended: PAID' ;;
    *)
      expect C new cancel "${u}" "A-${u}-cancel" -- 0 '.alreadyCancelled == true'
      expect C new pay "${u}" "A-${u}-cancel" -- 9 'already ended: CANCELLED' ;;
  esac
  expect C new cancel "${u}" "${o}" -- 0 '.alreadyCancelled == false'
done <"${QUIET}"
C_DEADLINE=$((SECONDS + 15))
while read -r u o; do
  until has_event "${o}"; do
    if ((SECONDS >= C_DEADLINE)); then
      violation "${o}: no event 15 s after its cancel"
      break
    fi
    sleep 0.2
  done
done <"${QUIET}"

# --- the verdict ---------------------------------------------------------------------------------
scrape "${METRICS_PORT[new]}" >"${WORK}/metrics-new.txt" || true
kill "${WATCH_PID[new]}"
wait "${WATCH_PID[new]}" 2>/dev/null || true
mkdir -p "${WORK}/streams"
pending=0
for p in "${REDIS_PORTS[@]}"; do
  while read -r key; do
    redis-cli -p "${p}" --json XRANGE "${key}" - + \
      >"${WORK}/streams/${key//[^A-Za-z0-9]/_}.json"
    n="$(redis-cli -p "${p}" --json XPENDING "${key}" upgrade 2>/dev/null |
      jq '.[0] // 0')" || n=0
    pending=$((pending + ${n:-0}))
  done < <(redis-cli -p "${p}" --scan --pattern 'orderhold:*:events')
done
echo "${pending}" >"${WORK}/pending"
# How late the new replica alone reaped the C-c1 holds (the stream entry's id is its append time):
# with --cluster they expire while slots migrate, in a partition whose slot does not.
c_lag="$(cat "${WORK}"/streams/*.json | jq -r '.[]? | . as [$id, $f] |
  ([range(0; $f | length; 2) as $i | {($f[$i]): $f[$i + 1]}] | add) as $m |
  select($m.o | startswith("C-c1-")) | ($id | split("-")[0] | tonumber) - ($m.e | tonumber)' |
  sort -n | tail -1)"
log "phase C: the C-c1 holds were reaped at most ${c_lag:-?} ms after their expiry"
for r in pre old-v1 old-read_v2 new; do
  m="${WORK}/metrics-${r}.txt"
  log "${r} replica counted: placed $(counter "${m}" orderhold_holds_placed_total)," \
    "paid $(counter "${m}" orderhold_holds_paid_total)," \
    "cancelled $(counter "${m}" orderhold_holds_cancelled_total)," \
    "expired $(counter "${m}" orderhold_holds_expired_total)"
done
verdict=0
python3 "${HERE}/check_upgrade.py" --work "${WORK}" || verdict=1
log "rolling upgrade ${PRE_SHA:0:7} (stopped) + ${FROM_SHA:0:7} -> this build$( ((CLUSTER)) &&
  echo ' (Redis Cluster)'): $( ((verdict)) && echo FAILED || echo passed) in $((SECONDS - START)) s"
exit "${verdict}"
