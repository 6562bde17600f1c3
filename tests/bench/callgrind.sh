#!/usr/bin/env bash
# tests/bench/callgrind.sh: the server's user-space instructions per PlaceHold (callgrind), for the
# no-op store and the Redis store. Unlike CPU time on a shared VM these counts barely move from
# run to run, so a change of a few percent in the server's own work shows (tests/bench/README.md
# "Instructions per call"). On demand; not part of the suite or CI.
#
#   tests/bench/callgrind.sh [--calls 10000] [--server BIN] [--out DIR]
#
# Each server runs under `valgrind --tool=callgrind` (~50x slower), gets 500 warm-up calls, then
# its counters are zeroed (callgrind_control -z), h2load sends --calls PlaceHolds (closed loop,
# -c 4 -m 32, one request: user u1, order o1, the "already held" path after the first), and the
# counters are dumped (callgrind_control -d). Prints instructions per call for each store, their
# difference, and the 15 functions whose own (exclusive) instructions differ most between the two.
# --server BIN runs another build's orderhold-server (e.g. the previous commit's). Dumps are left
# in --out (default <repo>/build/bench/callgrind): read them with callgrind_annotate.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
CALLS=10000
SERVER_OVERRIDE=""
OUT="${REPO}/build/bench/callgrind"
while (($#)); do
  case "$1" in
    --calls) CALLS="$2"; shift ;;
    --server) SERVER_OVERRIDE="$2"; shift ;;
    --out) OUT="$2"; shift ;;
    *) echo "usage: $0 [--calls N] [--server BIN] [--out DIR]" >&2; exit 64 ;;
  esac
  shift
done
[[ "${CALLS}" =~ ^[1-9][0-9]*$ ]] || { echo "callgrind.sh: --calls must be a positive number" >&2; exit 64; }

"${REPO}/deploy/install-deps.sh"
BUILD="${REPO}/build"
if [[ -z "${SERVER_OVERRIDE}" ]]; then
  [[ -f "${BUILD}/build.ninja" ]] ||
    cmake -G Ninja -S "${REPO}" -B "${BUILD}" -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=ON >/dev/null
  cmake --build "${BUILD}" --target orderhold-server -j "$(nproc)" >/dev/null
fi
SERVER="${SERVER_OVERRIDE:-${BUILD}/server/orderhold-server}"
[[ -x "${SERVER}" ]] || { echo "callgrind.sh: ${SERVER} is not an executable" >&2; exit 64; }

mkdir -p "${OUT}"
WORK="$(mktemp -d)"
PIDS=()
# shellcheck source=tests/bench/lib.sh
source "${REPO}/tests/bench/lib.sh"
trap stop_pids_and_work EXIT
start_redis

place() {  # port, calls
  h2load_place "$1" "${WORK}/h2load.log" -n "$2" -c 4 -m 32 || true
  grep -q "succeeded, 0 failed, 0 errored" "${WORK}/h2load.log" || {
    echo "callgrind.sh: h2load calls failed" >&2
    cat "${WORK}/h2load.log" >&2
    exit 1
  }
}

run() {  # store (noop | redis): leaves ${OUT}/<store>.out
  local store="$1" port metrics pid
  port="$(free_port)"
  metrics="$(free_port)"
  while [[ "${metrics}" == "${port}" ]]; do metrics="$(free_port)"; done
  redis-cli -p "${REDIS_PORT}" FLUSHALL >/dev/null
  rm -f "${OUT}/${store}.out"*
  valgrind --tool=callgrind --callgrind-out-file="${OUT}/${store}.out" \
    "${SERVER}" --store="${store}" --grpc_address="127.0.0.1:${port}" \
    --metrics_address="127.0.0.1:${metrics}" --redis_url="redis://127.0.0.1:${REDIS_PORT}" \
    2>"${WORK}/${store}.log" &
  pid=$!
  PIDS+=("${pid}")
  wait_port "${port}"
  place "${port}" 500
  callgrind_control -z "${pid}" >/dev/null 2>&1
  place "${port}" "${CALLS}"
  callgrind_control -d "${pid}" >/dev/null 2>&1
  kill "${pid}"
  wait "${pid}" 2>/dev/null || true
  mv "${OUT}/${store}.out.1" "${OUT}/${store}.calls"
  rm -f "${OUT}/${store}.out"
}

run noop
run redis
python3 - "${OUT}/noop.calls" "${OUT}/redis.calls" "${CALLS}" <<'EOF'
import re, subprocess, sys

def exclusive(path):
    out = subprocess.run(["callgrind_annotate", "--threshold=100", path],
                         capture_output=True, text=True, check=True).stdout
    costs = {}
    for line in out.splitlines():
        m = re.match(r"^\s*([\d,]+) \([ \d.]+%\)\s+(.*)$", line)
        if m:
            name = re.sub(r"\s*\[clone[^\]]*\]", "", m.group(2))
            costs[name] = costs.get(name, 0) + int(m.group(1).replace(",", ""))
    return costs

noop, redis, calls = exclusive(sys.argv[1]), exclusive(sys.argv[2]), int(sys.argv[3])
total_noop, total_redis = noop["PROGRAM TOTALS"] / calls, redis["PROGRAM TOTALS"] / calls
print(f"server instructions per PlaceHold ({calls} calls): noop {total_noop:,.0f}, "
      f"Redis {total_redis:,.0f}: +{total_redis - total_noop:,.0f} ({total_redis / total_noop:.2f}x)")
print("functions whose own instructions per call differ most (Redis - noop; thread entry points "
      "and callgrind's inclusive totals left out):")
skip = re.compile(r"PROGRAM TOTALS|start_thread|clone\.S|_State_impl|0x0000")
rows = sorted((k for k in set(noop) | set(redis) if not skip.search(k)),
              key=lambda k: -abs(redis.get(k, 0) - noop.get(k, 0)))
for name in rows[:15]:
    print(f"  {(redis.get(name, 0) - noop.get(name, 0)) / calls:+8,.0f}  {name[:110]}")
EOF
