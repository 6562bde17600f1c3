#!/usr/bin/env bash
# tests/upgrade/rolling_upgrade.sh: a rolling upgrade, for real. The previous release's
# orderhold-server (built here from its commit) and this build's run side by side on one Redis,
# as during a rolling upgrade, and every invariant of unscoped calls must hold across them:
#
#   A  before the upgrade, only the OLD replica runs: holds are placed (some 4 s, some 10 min),
#      some paid, some cancelled;
#   B  the NEW replica starts beside it. Two workers per user drive concurrent unscoped PlaceHold /
#      Pay / CancelHold / ListHolds through either replica at random (max_holds 3, ttls of 1.5 s to
#      60 s, at-cap refusals freeing a slot through either replica, Pay racing Cancel or Pay and
#      PlaceHold racing PlaceHold on both replicas at once, bursts of four PlaceHolds through
#      both); a consumer group watches the events
#      with one consumer on each replica (acking). Meanwhile the holds of phase A are checked
#      through the NEW replica: listed with their expiry, a retry answers created=false, the 4 s
#      ones are ended by a reaper (their users are not touched until their EXPIRED event came),
#      the long ones are payable, the paid and cancelled ones are remembered;
#   S  every hold still live is cancelled (through either replica), and the test waits until every
#      placed order has its event;
#   R  then every order is paid through BOTH replicas and placed again through one: the
#      answers must match its one event (already_paid, or FAILED_PRECONDITION naming the outcome
#      and end time, in both releases);
#   C  the OLD replica is stopped (the upgrade is done): the NEW one alone still reaps.
#
# Redis (a private redis-server on a free port) has the application's ACL user of
# deploy/redis/orderhold.acl, and both releases connect as it.
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
# Not in ctest (building the old release takes minutes). Usage:
#   tests/upgrade/rolling_upgrade.sh [--from REF] [--build DIR] [--cache DIR] [--duration SECONDS]
#                                    [--keep] [--build-only]
#     --from REF      the previous release (default below)
#     --build DIR     where this release's orderhold-server and orderhold-cli are (default
#                     <repo>/build, as tests/run.sh builds it)
#     --cache DIR     where old releases are built, one directory per commit, reused while its
#                     binary exists (default <repo>/build-upgrade)
#     --duration S    length of phase B (default 30)
#     --keep          keep the work directory (logs, ledger, events) for a look afterwards
#     --build-only    build the old release (warm the cache) and exit
# The old release is extracted with `git archive` (no worktree: the repository's state is not
# touched) and built with `nice -n 19`, one job (Release, target orderhold-server only). The
# client is this build's orderhold-cli for both replicas: client/ did not change between the
# releases, and an unscoped call sets no new field, so the bytes sent are the old client's.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
HERE="${REPO}/tests/upgrade"
# The previous release: the commit before 1ae8997 (the commit that brought scopes, quantities
# and labels: the details key, the new stream field `m`, the new script bodies), i.e.
# `git log --format=%H -n1 1ae8997^`.
FROM=d91192cb222de436c421a40e75d3d7fc88664dcc
BUILD="${REPO}/build"
CACHE="${REPO}/build-upgrade"
DURATION=30
KEEP=0
BUILD_ONLY=0
while (($#)); do
  case "$1" in
    --from) FROM="${2:?--from needs a REF}"; shift 2 ;;
    --build) BUILD="${2:?--build needs a DIR}"; shift 2 ;;
    --cache) CACHE="${2:?--cache needs a DIR}"; shift 2 ;;
    --duration) DURATION="${2:?--duration needs seconds}"; shift 2 ;;
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

# --- the old release ---------------------------------------------------------------------------
OLD_SHA="$(git -C "${REPO}" rev-parse --verify --quiet "${FROM}^{commit}")" ||
  die "--from ${FROM}: not a commit of ${REPO}"
OLD_DIR="${CACHE}/${OLD_SHA}"
OLD_SERVER="${OLD_DIR}/build/server/orderhold-server"
build_old() {
  if [[ -x "${OLD_SERVER}" ]]; then
    log "old release ${OLD_SHA:0:7}: cached (${OLD_SERVER})"
    return
  fi
  log "old release ${OLD_SHA:0:7}: building orderhold-server in ${OLD_DIR} (nice 19, -j1; minutes)"
  local began=${SECONDS}
  mkdir -p "${OLD_DIR}"
  # Extracted once (the marker): an interrupted build resumes where ninja stopped.
  if [[ ! -f "${OLD_DIR}/src/.extracted" ]]; then
    rm -rf "${OLD_DIR}/src"
    mkdir -p "${OLD_DIR}/src"
    git -C "${REPO}" archive "${OLD_SHA}" | tar -x -C "${OLD_DIR}/src"
    touch "${OLD_DIR}/src/.extracted"
  fi
  if ! { nice -n 19 cmake -G Ninja -S "${OLD_DIR}/src" -B "${OLD_DIR}/build" \
           -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF &&
         nice -n 19 cmake --build "${OLD_DIR}/build" -j 1 --target orderhold-server; } \
       >"${OLD_DIR}/build.log" 2>&1; then
    tail -30 "${OLD_DIR}/build.log" >&2
    die "building ${OLD_SHA:0:7} failed (whole log: ${OLD_DIR}/build.log)"
  fi
  log "old release ${OLD_SHA:0:7}: built in $((SECONDS - began)) s"
}
build_old
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

# Copies, so a rebuild of ${BUILD} during the run cannot swap a binary under it.
mkdir -p "${WORK}/bin" "${WORK}/ledger" "${WORK}/events"
cp "${NEW_SERVER_SRC}" "${WORK}/bin/orderhold-server-new"
cp "${OLD_SERVER}" "${WORK}/bin/orderhold-server-old"
cp "${CLI_SRC}" "${WORK}/bin/orderhold-cli"
CLI="${WORK}/bin/orderhold-cli"
log "old: ${OLD_SHA:0:7} ($(git -C "${REPO}" log -1 --format=%s "${OLD_SHA}" | cut -c1-60))"
log "new: ${NEW_SERVER_SRC} (built $(date -r "${NEW_SERVER_SRC}" '+%F %T');" \
  "HEAD $(git -C "${REPO}" rev-parse --short HEAD))"

# --- Redis, with the application's ACL user (deploy/redis/orderhold.acl) ------------------------
# Both releases connect as that user: the mixed fleet needs no command the ACL lacks.
REDIS_PORT="$(free_port)"
redis-server --port "${REDIS_PORT}" --bind 127.0.0.1 --save '' --appendonly no \
  --dir "${WORK}" --logfile "${WORK}/redis.log" &
PIDS+=($!)
wait_port "${REDIS_PORT}"
REDIS_PASSWORD="upgrade-$$-${RANDOM}"
read -r -a ACL_RULES < <(awk 'NR == 1 { for (i = 5; i <= NF; i++) printf "%s ", $i; print "" }' \
  "${REPO}/deploy/redis/orderhold.acl")
redis-cli -p "${REDIS_PORT}" ACL SETUSER orderhold on ">${REDIS_PASSWORD}" "${ACL_RULES[@]}" \
  >/dev/null
# The URL holds a password: passed in the environment, not on a command line (ps shows those).
export ORDERHOLD_REDIS_URL="redis://orderhold:${REDIS_PASSWORD}@127.0.0.1:${REDIS_PORT}"

# --- the replicas ------------------------------------------------------------------------------
declare -A GRPC_PORT METRICS_PORT SERVER_PID
start_replica() {  # start_replica old|new
  local name="$1"
  GRPC_PORT[${name}]="$(free_port)"
  METRICS_PORT[${name}]="$(free_port)"
  "${WORK}/bin/orderhold-server-${name}" --grpc_address="127.0.0.1:${GRPC_PORT[${name}]}" \
    --metrics_address="127.0.0.1:${METRICS_PORT[${name}]}" --max_holds=3 \
    --reap_interval=200ms --redis_connections=2 >"${WORK}/server-${name}.log" 2>&1 &
  SERVER_PID[${name}]=$!
  PIDS+=($!)
  local deadline=$((SECONDS + 20))
  until "${CLI}" --target="127.0.0.1:${GRPC_PORT[${name}]}" --timeout=1s health >/dev/null 2>&1; do
    kill -0 "${SERVER_PID[${name}]}" 2>/dev/null ||
      { tail -20 "${WORK}/server-${name}.log" >&2; die "the ${name} replica exited"; }
    ((SECONDS < deadline)) || die "the ${name} replica is not SERVING after 20 s"
    sleep 0.1
  done
  log "${name} replica up: gRPC 127.0.0.1:${GRPC_PORT[${name}]}, metrics :${METRICS_PORT[${name}]}"
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

# --- phase A: the old release alone --------------------------------------------------------------
A_USERS=(a1 a2 a3)         # touched only by the phase-A checks
B_USERS=(b1 b2 b3 b4)      # also driven by the phase-B workers
start_replica old
log "phase A: holds through the old replica only"
for u in "${A_USERS[@]}"; do
  expect A old place "${u}" "A-${u}-long" 600000 -- 0 '.created and .activeHolds == 1'
  expect A old place "${u}" "A-${u}-paid" 600000 -- 0 '.created and .activeHolds == 2'
  expect A old place "${u}" "A-${u}-cancel" 600000 -- 0 '.created and .activeHolds == 3'
  expect A old place "${u}" "A-${u}-over" 600000 -- 8 'RESOURCE_EXHAUSTED'
  expect A old pay "${u}" "A-${u}-paid" -- 0 '.alreadyPaid == false'
  expect A old cancel "${u}" "A-${u}-cancel" -- 0 '.alreadyCancelled == false'
done
for u in "${B_USERS[@]}"; do
  expect A old place "${u}" "A-${u}-long" 600000 -- 0 '.created and .activeHolds == 1'
done
# Last, so they are still live when the new replica starts.
for u in "${A_USERS[@]}" "${B_USERS[@]}"; do
  expect A old place "${u}" "A-${u}-short" 4000 -- 0 '.created and .activeHolds == 2'
done
A_SHORT_DEADLINE=$(($(date +%s) + 5))

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

# The phase-A holds, through the new replica, while the workers run.
check_phase_a() {
  local u expire left listed
  for u in "${A_USERS[@]}"; do
    expire="$(placed_expire "A-${u}-long")"
    listed="[.holds[] | select(.orderId == \"A-${u}-long\" and .expireTime == \"${expire}\")]"
    expect B new list "${u}" "" -- 0 "${listed} | length == 1"
    expect B old list "${u}" "" -- 0 "${listed} | length == 1"
  done
  # The 4 s holds: ended by a reaper (until their event, these users get only ListHolds, which
  # writes nothing; a PlaceHold, Pay or CancelHold would end them itself), one EXPIRED event each.
  for u in "${A_USERS[@]}"; do
    until has_event "A-${u}-short"; do
      (($(date +%s) < A_SHORT_DEADLINE + 15)) || {
        violation "A-${u}-short: no event 15 s after its expiry (not reaped?)"
        break
      }
      sleep 0.2
    done
  done
  for u in "${A_USERS[@]}"; do
    expect B new list "${u}" "" -- 0 "[.holds[].orderId] | index(\"A-${u}-short\") == null"
    # A retry through the new release: the same hold, not extended, not ALREADY_EXISTS.
    expire="$(placed_expire "A-${u}-long")"
    expect B new place "${u}" "A-${u}-long" 900000 -- 0 \
      ".created == false and .hold.expireTime == \"${expire}\""
    expect B new pay "${u}" "A-${u}-long" -- 0 '.alreadyPaid == false'
    expect B old pay "${u}" "A-${u}-long" -- 0 '.alreadyPaid == true'
    expect B new pay "${u}" "A-${u}-paid" -- 0 '.alreadyPaid == true'
    expect B new cancel "${u}" "A-${u}-paid" -- 9 'already ended: PAID'
    expect B new cancel "${u}" "A-${u}-cancel" -- 0 '.alreadyCancelled == true'
    expect B new pay "${u}" "A-${u}-short" -- 9 'already ended: EXPIRED'
    expect B new place "${u}" "A-${u}-short" 1000 -- 9 'already ended: EXPIRED'
    left="$(placed_expire "A-${u}-over")"
    [[ -z "${left}" ]] || violation "A-${u}-over: placed over the cap"
  done
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
for u in "${A_USERS[@]}" "${B_USERS[@]}"; do
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
scrape "${METRICS_PORT[old]}" >"${WORK}/metrics-old.txt" || true
log "phase C: old replica stopped (SIGTERM); the new one alone"
kill "${WATCH_PID[old]}"
kill -TERM "${SERVER_PID[old]}"
old_rc=0
wait "${SERVER_PID[old]}" || old_rc=$?
((old_rc == 0)) || violation "the old replica exited ${old_rc} on SIGTERM"
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

# --- the verdict ---------------------------------------------------------------------------------
scrape "${METRICS_PORT[new]}" >"${WORK}/metrics-new.txt" || true
kill "${WATCH_PID[new]}"
wait "${WATCH_PID[new]}" 2>/dev/null || true
mkdir -p "${WORK}/streams"
pending=0
while read -r key; do
  redis-cli -p "${REDIS_PORT}" --json XRANGE "${key}" - + \
    >"${WORK}/streams/${key//[^A-Za-z0-9]/_}.json"
  n="$(redis-cli -p "${REDIS_PORT}" --json XPENDING "${key}" upgrade 2>/dev/null |
    jq '.[0] // 0')" || n=0
  pending=$((pending + ${n:-0}))
done < <(redis-cli -p "${REDIS_PORT}" --scan --pattern 'orderhold:*:events')
echo "${pending}" >"${WORK}/pending"
for r in old new; do
  m="${WORK}/metrics-${r}.txt"
  log "${r} replica counted: placed $(counter "${m}" orderhold_holds_placed_total)," \
    "paid $(counter "${m}" orderhold_holds_paid_total)," \
    "cancelled $(counter "${m}" orderhold_holds_cancelled_total)," \
    "expired $(counter "${m}" orderhold_holds_expired_total)"
done
verdict=0
python3 "${HERE}/check_upgrade.py" --work "${WORK}" || verdict=1
log "rolling upgrade ${OLD_SHA:0:7} -> this build: $( ((verdict)) && echo FAILED || echo passed)" \
  "in $((SECONDS - START)) s"
exit "${verdict}"
