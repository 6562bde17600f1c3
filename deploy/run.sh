#!/usr/bin/env bash
# run.sh: build OrderHold and run orderhold-server, with a private Redis unless one is given.
#
#   deploy/run.sh [orderhold-server flags...]        e.g. deploy/run.sh --max_holds=5
#
# 1. Installs the Debian 12 packages that are missing (deploy/install-deps.sh --run: apt; needs root
#    only when something is).
# 2. Configures (first time only) and builds Release into <repo>/build; a no-op when up to date.
# 3. Unless --redis_url / ORDERHOLD_REDIS_URL is given, runs a private redis-server on
#    127.0.0.1:${ORDERHOLD_REDIS_PORT:-6390} with AOF persistence in
#    ${ORDERHOLD_DATA_DIR:-<repo>/.data/redis} (log: redis.log there) and passes
#    --redis_url=redis://127.0.0.1:PORT to the server. If that port already answers PING (say a
#    previous run's Redis survived a kill -9), it is reused instead.
# 4. Runs build/server/orderhold-server with all arguments. Ctrl-C / SIGTERM: the server gets
#    SIGTERM and is waited for, then the private Redis is shut down gracefully (AOF kept).
#    Exits with the server's status.
# Open, for development: the server's defaults (plaintext gRPC on 0.0.0.0:50051 with reflection,
# no authorization policy; it warns about the address). --grpc_address=127.0.0.1:50051 keeps it
# local; the TLS and --authz_policy flags close it (deploy/README.md "Security").
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${REPO}/build"
SERVER_BIN="${BUILD_DIR}/server/orderhold-server"
log() { echo "run.sh: $*" >&2; }
die() {
  log "error: $*"
  exit 1
}

install_missing_packages() { "${REPO}/deploy/install-deps.sh" --run; }

build() {
  # Configure only once: later runs keep whatever the tree was configured with, and ninja re-runs
  # cmake by itself when a CMakeLists.txt changes.
  if [[ ! -f "${BUILD_DIR}/build.ninja" ]]; then
    if [[ -f "${BUILD_DIR}/CMakeCache.txt" ]]; then
      die "${BUILD_DIR} was configured with another generator; remove it or use another build dir"
    fi
    cmake -G Ninja -S "${REPO}" -B "${BUILD_DIR}" -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF
  fi
  ninja -C "${BUILD_DIR}" orderhold-server orderhold-cli
  [[ -x "${SERVER_BIN}" ]] || die "build finished but ${SERVER_BIN} is missing"
}

# Private Redis state; REDIS_OWNED=1 means the EXIT trap shuts it down.
REDIS_PORT="${ORDERHOLD_REDIS_PORT:-6390}"
REDIS_DIR="${ORDERHOLD_DATA_DIR:-${REPO}/.data/redis}"
REDIS_PID=""
REDIS_OWNED=0
SERVER_PID=""
STARTED=""

# redis-cli waits forever for a reply, e.g. from a paused Redis or some other listener: bound it.
rcli() { timeout 1 redis-cli -p "${REDIS_PORT}" "$@"; }
redis_ping() { [[ "$(rcli ping 2>/dev/null)" == "PONG" ]]; }

start_redis() {
  [[ "${REDIS_PORT}" =~ ^[0-9]+$ ]] || die "ORDERHOLD_REDIS_PORT is not a port: ${REDIS_PORT}"
  mkdir -p "${REDIS_DIR}"
  REDIS_DIR="$(cd "${REDIS_DIR}" && pwd)"
  if redis_ping; then
    # Ours from an earlier run (same data dir): adopt it, so it is stopped on exit like a fresh one.
    # Anything else on that port is used but left running.
    local dir
    dir="$(rcli config get dir 2>/dev/null | sed -n 2p)"
    if [[ "${dir}" == "${REDIS_DIR}" ]]; then
      REDIS_OWNED=1
      STARTED="reusing the redis-server already on 127.0.0.1:${REDIS_PORT} (data ${REDIS_DIR})"
    else
      STARTED="reusing a redis-server already on 127.0.0.1:${REDIS_PORT} (not ours: left running)"
    fi
    return 0
  fi
  # setsid: its own session, so a terminal Ctrl-C reaches only the server and this script, and
  # Redis stops after the server, not during its shutdown. --save "": the AOF is the persistence.
  local log="${REDIS_DIR}/redis.log" log_start
  log_start=1
  if [[ -f "${log}" ]]; then log_start=$(($(wc -l <"${log}") + 1)); fi
  setsid redis-server --port "${REDIS_PORT}" --bind 127.0.0.1 --dir "${REDIS_DIR}" \
    --appendonly yes --save "" --daemonize no </dev/null >>"${log}" 2>&1 &
  REDIS_PID=$!
  REDIS_OWNED=1
  local deadline=$((SECONDS + 30)) # AOF loading included
  until redis_ping; do
    if ! kill -0 "${REDIS_PID}" 2>/dev/null; then
      REDIS_OWNED=0
      tail -n "+${log_start}" "${log}" | tail -n 20 >&2 || true
      die "redis-server on port ${REDIS_PORT} exited during startup (log above)"
    fi
    ((SECONDS < deadline)) || die "redis-server on port ${REDIS_PORT} did not answer PING in 30 s"
    sleep 0.1
  done
  STARTED="started redis-server pid ${REDIS_PID} on 127.0.0.1:${REDIS_PORT} (AOF in ${REDIS_DIR})"
}

# shellcheck disable=SC2317  # called from the EXIT trap
stop_redis() {
  ((REDIS_OWNED)) || return 0
  REDIS_OWNED=0
  # SHUTDOWN fsyncs the AOF before exiting. If Redis is wedged, fall back to SIGTERM (also
  # graceful), then give up after 10 s.
  if ! rcli shutdown >/dev/null 2>&1 && [[ -n "${REDIS_PID}" ]]; then
    kill -TERM "${REDIS_PID}" 2>/dev/null || true
  fi
  local deadline=$((SECONDS + 10))
  while redis_ping || { [[ -n "${REDIS_PID}" ]] && kill -0 "${REDIS_PID}" 2>/dev/null; }; do
    ((SECONDS < deadline)) || {
      log "redis-server on port ${REDIS_PORT} did not stop in 10 s"
      return 0
    }
    sleep 0.1
  done
  log "stopped redis-server on port ${REDIS_PORT}"
}

# shellcheck disable=SC2317  # called from the INT/TERM trap
on_signal() {
  if [[ -z "${SERVER_PID}" ]]; then
    exit 130 # before the server started: just clean up (EXIT trap)
  fi
  # Always SIGTERM: bash starts background jobs with SIGINT ignored, so INT might not arrive.
  kill -TERM "${SERVER_PID}" 2>/dev/null || true
}

main() {
  local arg redis_given=0
  for arg in "$@"; do
    case "${arg}" in
      --redis_url | --redis_url=* | -redis_url | -redis_url=*) redis_given=1 ;;
      -h | --help | --help=* | --helpfull | --helpshort | --version)
        # Nothing to run: no Redis needed.
        install_missing_packages
        build
        exec "${SERVER_BIN}" "$@"
        ;;
    esac
  done
  if [[ -n "${ORDERHOLD_REDIS_URL:-}" ]]; then
    redis_given=1
  fi

  install_missing_packages
  build

  trap stop_redis EXIT
  trap on_signal INT TERM
  local server_args=("$@")
  if ((redis_given)); then
    STARTED="using the Redis from --redis_url / ORDERHOLD_REDIS_URL"
  else
    start_redis
    server_args=("--redis_url=redis://127.0.0.1:${REDIS_PORT}" "$@")
  fi
  log "${STARTED}; running ${SERVER_BIN#"${REPO}/"} ${server_args[*]}"

  "${SERVER_BIN}" "${server_args[@]}" &
  SERVER_PID=$!
  # `wait` returns early (status > 128) whenever a trapped signal arrives; keep waiting until the
  # server has really exited, then report its own status.
  local status=0
  while true; do
    wait "${SERVER_PID}" && status=0 || status=$?
    kill -0 "${SERVER_PID}" 2>/dev/null || break
  done
  SERVER_PID=""
  log "orderhold-server exited with status ${status}"
  exit "${status}"
}

main "$@"
