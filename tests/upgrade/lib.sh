# shellcheck shell=bash
# shellcheck disable=SC2034  # FAILED, PID: read by the scripts that source this file
# tests/upgrade/lib.sh: what the upgrade tests that run one earlier release beside this build share
# (sourced, not run; scope_totals_upgrade.sh, on_sale_upgrade.sh). Sources tests/bench/lib.sh.
#   log MSG...          a line with the seconds since the test started
#   check WHAT RESULT   logs "ok: WHAT" when RESULT is 0, else "FAILED: WHAT" and sets FAILED=1
#   upgrade_main NAME FROM "$@"
#                       the scripts' options ([--from REF] [--build DIR] [--cache DIR] [--keep];
#                       FROM the default of --from, a full commit id), then upgrade_start; exits 64
#                       naming the usage on any other argument
#   upgrade_start NAME FROM BUILD CACHE KEEP
#                       builds FROM's orderhold-server (rolling_upgrade.sh --build-only: its cache,
#                       FROM alone), makes ${WORK} (/tmp/orderhold-NAME.XXXXXX, removed at exit
#                       unless KEEP is 1, with every process in PIDS killed) with copies of both
#                       servers (bin/orderhold-server-old, -new) and BUILD's orderhold-cli (${CLI}),
#                       then starts Redis (REDIS_PORT) with the application's ACL user of
#                       deploy/redis/orderhold.acl and exports ORDERHOLD_REDIS_URL: every release
#                       connects as that user, so a mixed fleet needs no command the ACL lacks
#   start_replica NAME BINARY FLAGS...
#                       starts bin/orderhold-server-BINARY (old or new) on a free gRPC port
#                       (PORT[NAME], PID[NAME]) with FLAGS, logging to ${WORK}/server-NAME.log, and
#                       waits until it answers health (20 s); exits 1 if it does not
# shellcheck source=tests/bench/lib.sh
source "${REPO}/tests/bench/lib.sh"
START=${SECONDS}
FAILED=0
declare -A PORT PID
PIDS=()

log() { printf '[%3ds] %s\n' $((SECONDS - START)) "$*"; }
check() {
  if [[ "$2" == 0 ]]; then log "ok: $1"; else log "FAILED: $1"; FAILED=1; fi
}

upgrade_main() {
  local name="$1" from="$2" build="${REPO}/build" cache="${REPO}/build-upgrade" keep=0
  shift 2
  while (($#)); do
    case "$1" in
      --from) from="$(git -C "${REPO}" rev-parse "${2:?}^{commit}")"; shift 2 ;;
      --build) build="${2:?}"; shift 2 ;;
      --cache) cache="${2:?}"; shift 2 ;;
      --keep) keep=1; shift ;;
      *) echo "usage: $0 [--from REF] [--build DIR] [--cache DIR] [--keep]" >&2; exit 64 ;;
    esac
  done
  upgrade_start "${name}" "${from}" "${build}" "${cache}" "${keep}"
}

upgrade_start() {
  local name="$1" from="$2" build="$3" cache="$4" keep="$5" old
  "${REPO}/tests/upgrade/rolling_upgrade.sh" --from "${from}" --pre-buckets "${from}" \
    --cache "${cache}" --build-only >/dev/null
  old="${cache}/${from}/build/server/orderhold-server"
  [[ -x "${old}" ]] || { echo "${name}: no old server at ${old}" >&2; exit 1; }
  WORK="$(mktemp -d "/tmp/orderhold-${name}.XXXXXX")"
  KEEP_WORK="${keep}"
  trap upgrade_cleanup EXIT
  mkdir -p "${WORK}/bin"
  cp "${old}" "${WORK}/bin/orderhold-server-old"
  cp "${build}/server/orderhold-server" "${WORK}/bin/orderhold-server-new"
  cp "${build}/client/orderhold-cli" "${WORK}/bin/orderhold-cli"
  CLI="${WORK}/bin/orderhold-cli"
  log "old: ${from:0:7} ($(git -C "${REPO}" log -1 --format=%s "${from}" | cut -c1-60))"
  start_redis
  local password="upgrade-$$-${RANDOM}" rules
  read -r -a rules < <(awk 'NR == 1 { for (i = 5; i <= NF; i++) printf "%s ", $i; print "" }' \
    "${REPO}/deploy/redis/orderhold.acl")
  redis-cli -p "${REDIS_PORT}" ACL SETUSER orderhold on ">${password}" "${rules[@]}" >/dev/null
  export ORDERHOLD_REDIS_URL="redis://orderhold:${password}@127.0.0.1:${REDIS_PORT}"
}

# shellcheck disable=SC2317  # run by the EXIT trap
upgrade_cleanup() {
  local pid
  for pid in "${PIDS[@]}"; do kill -9 "${pid}" 2>/dev/null || true; done
  wait 2>/dev/null || true
  if ((KEEP_WORK)); then echo "work directory kept: ${WORK}" >&2; else rm -rf "${WORK}"; fi
}

start_replica() {
  local name="$1" binary="$2"
  shift 2
  PORT[${name}]="$(free_port)"
  "${WORK}/bin/orderhold-server-${binary}" --grpc_address="127.0.0.1:${PORT[${name}]}" \
    --metrics_address=127.0.0.1:0 "$@" >>"${WORK}/server-${name}.log" 2>&1 &
  PID[${name}]=$!
  PIDS+=($!)
  for _ in $(seq 200); do
    "${CLI}" --target="127.0.0.1:${PORT[${name}]}" --timeout=1s health >/dev/null 2>&1 && break
    sleep 0.1
  done
  "${CLI}" --target="127.0.0.1:${PORT[${name}]}" --timeout=1s health >/dev/null ||
    { tail -5 "${WORK}/server-${name}.log" >&2; exit 1; }
  log "${name} replica (${binary}) up on ${PORT[${name}]}"
}
