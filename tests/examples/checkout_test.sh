#!/usr/bin/env bash
# tests/examples/checkout_test.sh: runs the Python example client/examples/checkout.py against a
# real orderhold-server on a private redis-server, as a ticketing backend written in Python would
# call it:
#   1. the Python stubs are generated from proto/ at test time (protoc and Debian's
#      grpc_python_plugin; nothing generated is checked in), with the google/rpc messages, so the
#      example decodes the details of a refusal;
#   2. --scenario checkout: place, extend (asking 15m of a hold whose lifetime is capped at 10m:
#      capped; counted against --max_extensions=2, a retried request_id counted once), pay (and a
#      retried pay), GetHold says PAID, ExtendHold of the paid hold answers FAILED_PRECONDITION,
#      the user's --max_holds answers RESOURCE_EXHAUSTED with ErrorInfo USER_HOLD_LIMIT and
#      RetryInfo, ReleaseHolds gives the holds back;
#   3. --scenario expired: a 300 ms hold expires; GetHold says EXPIRED at its expire_time, and
#      ExtendHold, Pay and PlaceHold answer FAILED_PRECONDITION naming EXPIRED.
# Run: bash tests/examples/checkout_test.sh SERVER_BINARY (ctest -L examples passes the build's).
# Needs protoc, grpc_python_plugin, redis-server, and a python3 with python3-grpcio and
# python3-protobuf (deploy/install-deps.sh). A few seconds.
set -euo pipefail

SERVER="${1:?usage: checkout_test.sh SERVER_BINARY}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# shellcheck source=tests/bench/lib.sh
source "${ROOT}/tests/bench/lib.sh"

fail() { echo "checkout_test: FAIL: $*" >&2; exit 1; }
for tool in protoc grpc_python_plugin redis-server; do
  command -v "${tool}" >/dev/null || fail "${tool} missing (deploy/install-deps.sh installs it)"
done
# Debian's python3-grpcio and python3-protobuf are /usr/bin/python3's: a python3 found first on
# PATH (a pyenv, a virtualenv) may not have them.
PYTHON=""
for candidate in python3 /usr/bin/python3; do
  if "${candidate}" -c 'import grpc, google.protobuf' 2>/dev/null; then
    PYTHON="${candidate}"
    break
  fi
done
[[ -n "${PYTHON}" ]] || fail "no python3 imports grpc and google.protobuf (deploy/install-deps.sh" \
  "installs python3-grpcio and python3-protobuf)"

WORK="$(mktemp -d)"
PIDS=()
trap stop_pids_and_work EXIT

STUBS="${WORK}/stubs"
mkdir "${STUBS}"
echo "checkout_test: generating the Python stubs into ${STUBS}"
(
  cd "${ROOT}"
  protoc -I proto --python_out="${STUBS}" --grpc_python_out="${STUBS}" \
    --plugin=protoc-gen-grpc_python="$(command -v grpc_python_plugin)" \
    proto/orderhold/v1/orderhold.proto
  protoc -I proto --python_out="${STUBS}" proto/google/rpc/status.proto \
    proto/google/rpc/error_details.proto
)

REDIS_PORT="$(free_port)"
echo "checkout_test: starting redis-server on 127.0.0.1:${REDIS_PORT}"
redis-server --port "${REDIS_PORT}" --bind 127.0.0.1 --save '' --appendonly no \
  --dir "${WORK}" --logfile "${WORK}/redis.log" &
PIDS+=($!)
wait_port "${REDIS_PORT}"

# Short settings: a 10 minute lifetime cap (the example asks 15 minutes), 2 extensions, 3 holds.
GRPC_PORT="$(free_port)"
METRICS_PORT="$(free_port)"
while [[ "${METRICS_PORT}" == "${GRPC_PORT}" ]]; do METRICS_PORT="$(free_port)"; done
SERVER_FLAGS=(--grpc_address="127.0.0.1:${GRPC_PORT}" --metrics_address="127.0.0.1:${METRICS_PORT}"
  --redis_url="redis://127.0.0.1:${REDIS_PORT}" --max_holds=3 --default_ttl=2m
  --max_hold_lifetime=10m --max_extensions=2)
echo "checkout_test: starting ${SERVER} ${SERVER_FLAGS[*]}"
"${SERVER}" "${SERVER_FLAGS[@]}" >"${WORK}/server.log" 2>&1 &
SERVER_PID=$!
PIDS+=("${SERVER_PID}")
# Ready when it listens (checkout.py waits for the channel too); an exit (a flag it does not know)
# fails at once rather than after the wait.
listening=0
for _ in $(seq 200); do
  if (exec 3<>"/dev/tcp/127.0.0.1/${GRPC_PORT}") 2>/dev/null; then listening=1; break; fi
  kill -0 "${SERVER_PID}" 2>/dev/null || fail "the server exited: $(tail -5 "${WORK}/server.log")"
  sleep 0.05
done
((listening)) || fail "the server does not listen after 10 s: $(tail -5 "${WORK}/server.log")"

# example SCENARIO ARGS...: runs checkout.py, its output shown and kept in ${WORK}/SCENARIO.out;
# counts a run that fails in ${failed} (both scenarios run, whatever the first answers).
failed=0
example() {
  local scenario="$1"
  shift
  echo "checkout_test: checkout.py --scenario ${scenario} $*"
  if ! "${PYTHON}" "${ROOT}/client/examples/checkout.py" --target "127.0.0.1:${GRPC_PORT}" \
      --stubs "${STUBS}" --scenario "${scenario}" "$@" 2>&1 | tee "${WORK}/${scenario}.out"; then
    echo "checkout_test: checkout.py --scenario ${scenario} answered something unexpected" >&2
    failed=$((failed + 1))
  fi
}
# has SCENARIO STEP TEXT: the step's line of that run contains TEXT (the server's flags at work).
has() {
  grep -E "^ok +$2 " "${WORK}/$1.out" | grep -F -- "$3" >/dev/null ||
    fail "checkout.py --scenario $1: step $2 does not say '$3'"
}

example checkout --user buyer-1 --order seat-A12
example expired --user buyer-2 --order seat-B7
if ((failed > 0)); then
  echo "checkout_test: the server's log ends:" >&2
  tail -20 "${WORK}/server.log" >&2
  fail "${failed} of 2 scenarios answered something unexpected (their FAIL lines above)"
fi
# The server's flags at work in what the steps printed.
has checkout extend "capped=True"              # 15m asked, --max_hold_lifetime=10m
has checkout extend "extensions_left=1"        # --max_extensions=2, one used
has checkout extend-retry "extensions_left=1"  # the retried request_id is not counted
has checkout limit "after 3 holds"             # --max_holds=3: seat-A12 paid, 3 placed, 4th refused
echo "checkout_test: both scenarios as expected"
