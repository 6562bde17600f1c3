#!/usr/bin/env bash
# tests/bench/callgrind.sh: the server's user-space instructions per PlaceHold (callgrind), for the
# no-op store and the Redis store. Unlike CPU time on a shared VM these counts barely move from
# run to run, so a change of a few percent in the server's own work shows (tests/bench/README.md
# "Instructions per call"). On demand; not part of the suite or CI.
#
#   tests/bench/callgrind.sh [--calls 10000] [--server BIN] [--out DIR]
#   tests/bench/callgrind.sh --open-rates 25,50 [--open-seconds 30] [--server BIN] [--out DIR]
#
# Each server runs under `valgrind --tool=callgrind` (~50x slower), gets 500 warm-up calls, then
# its counters are zeroed (callgrind_control -z), h2load sends --calls PlaceHolds (closed loop,
# -c 4 -m 32, one request: user u1, order o1, the "already held" path after the first), and the
# counters are dumped (callgrind_control -d). Prints instructions per call for each store, their
# difference, and the 15 functions whose own (exclusive) instructions differ most between the two.
# --server BIN runs another build's orderhold-server (e.g. the previous commit's). Dumps are left
# in --out (default <repo>/build/bench/callgrind): read them with callgrind_annotate.
#
# --open-rates R1[,R2...] (calls/s, e.g. 25,50) measures the open-loop regime of cpu.sh's
# 1,000/s phase instead, where calls do not batch. Each store's server runs under callgrind once
# with no calls and once per rate (orderhold-bench --rate, PlaceHold over 100,000 users: mostly new
# holds, the path cpu.sh drives; this checkout's orderhold-bench, also with --server), each time
# 15 s of warm-up, then --open-seconds (default 30) between zeroing and dumping the counters. The
# idle run gives the background's instructions per second B (reaper, health, metrics, gRPC's
# timers); a run at rate r gives instructions per call I(r), counted from
# orderhold_grpc_requests_total{method="PlaceHold"} around the window, and the call's own work
# w = I(r) - B / r. Prints, per rate, w for each store and Redis / noop for w and for w + B / 1,000
# (cpu.sh's 1,000/s). w should not depend on r: if it falls as r rises, calls overlap under
# callgrind (~50x slower) and the lower rate is the one to read. Instructions, not time: the work
# a machine with cheap wake-ups and cores of its own would still do (tests/bench/README.md "Server
# CPU at 1,000/s"). The kernel's part is not counted.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
CALLS=10000
SERVER_OVERRIDE=""
OPEN_RATES=""
OPEN_SECONDS=30
OUT="${REPO}/build/bench/callgrind"
while (($#)); do
  case "$1" in
    --calls) CALLS="$2"; shift ;;
    --server) SERVER_OVERRIDE="$2"; shift ;;
    --out) OUT="$2"; shift ;;
    --open-rates) OPEN_RATES="$2"; shift ;;
    --open-seconds) OPEN_SECONDS="$2"; shift ;;
    *)
      echo "usage: $0 [--calls N] [--open-rates R1[,R2...] [--open-seconds N]] [--server BIN]" \
        "[--out DIR]" >&2
      exit 64
      ;;
  esac
  shift
done
[[ "${CALLS}" =~ ^[1-9][0-9]*$ ]] || { echo "callgrind.sh: --calls must be a positive number" >&2; exit 64; }
[[ "${OPEN_SECONDS}" =~ ^[1-9][0-9]*$ ]] || {
  echo "callgrind.sh: --open-seconds must be a positive number" >&2
  exit 64
}
if [[ -n "${OPEN_RATES}" ]]; then
  [[ "${OPEN_RATES}" =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] || {
    echo "callgrind.sh: --open-rates is a comma-separated list of calls/s (e.g. 25,50)" >&2
    exit 64
  }
fi

"${REPO}/deploy/install-deps.sh"
BUILD="${REPO}/build"
BENCH="${BUILD}/client/orderhold-bench"
targets=()  # this checkout's server unless --server, and its orderhold-bench for --open-rates
if [[ -z "${SERVER_OVERRIDE}" ]]; then targets+=(orderhold-server); fi
if [[ -n "${OPEN_RATES}" ]]; then targets+=(orderhold-bench); fi
if ((${#targets[@]} > 0)); then
  [[ -f "${BUILD}/build.ninja" ]] ||
    cmake -G Ninja -S "${REPO}" -B "${BUILD}" -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=ON >/dev/null
  cmake --build "${BUILD}" --target "${targets[@]}" -j "$(nproc)" >/dev/null
fi
SERVER="${SERVER_OVERRIDE:-${BUILD}/server/orderhold-server}"
[[ -x "${SERVER}" ]] || { echo "callgrind.sh: ${SERVER} is not an executable" >&2; exit 64; }
if [[ -n "${OPEN_RATES}" && ! -x "${BENCH}" ]]; then
  echo "callgrind.sh: ${BENCH} is not an executable" >&2
  exit 64
fi

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

# Starts the server of store $1 (noop | redis) under callgrind, dumping to $2: sets PORT, METRICS
# and PID.
start_callgrind() {
  PORT="$(free_port)"
  METRICS="$(free_port)"
  while [[ "${METRICS}" == "${PORT}" ]]; do METRICS="$(free_port)"; done
  redis-cli -p "${REDIS_PORT}" FLUSHALL >/dev/null
  rm -f "$2"*
  valgrind --tool=callgrind --callgrind-out-file="$2" \
    "${SERVER}" --store="$1" --grpc_address="127.0.0.1:${PORT}" \
    --metrics_address="127.0.0.1:${METRICS}" --redis_url="redis://127.0.0.1:${REDIS_PORT}" \
    2>"${WORK}/$1.log" &
  PID=$!
  PIDS+=("${PID}")
  wait_port "${PORT}"
}

forget_pid() {  # pid: an ended process; a later one with its number is not the exit trap's to kill
  local kept=() p
  for p in "${PIDS[@]}"; do [[ "${p}" == "$1" ]] || kept+=("${p}"); done
  PIDS=("${kept[@]}")
}

stop_callgrind() {
  kill "${PID}"
  wait "${PID}" 2>/dev/null || true
  forget_pid "${PID}"
}

program_total() {  # callgrind dump: its total instructions
  local total
  total="$(callgrind_annotate --threshold=100 "$1" | awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1 }')"
  [[ "${total}" =~ ^[0-9]+$ ]] || { echo "callgrind.sh: no total in $1" >&2; exit 1; }
  echo "${total}"
}

run() {  # store (noop | redis): leaves ${OUT}/<store>.calls
  local store="$1"
  start_callgrind "${store}" "${OUT}/${store}.out"
  place "${PORT}" 500
  callgrind_control -z "${PID}" >/dev/null 2>&1
  place "${PORT}" "${CALLS}"
  callgrind_control -d "${PID}" >/dev/null 2>&1
  stop_callgrind
  mv "${OUT}/${store}.out.1" "${OUT}/${store}.calls"
  rm -f "${OUT}/${store}.out"
}

# PlaceHold calls the server has finished (any status), from its metrics.
placed_calls() {  # metrics port
  scrape "$1" | awk '/^orderhold_grpc_requests_total\{/ && /method="PlaceHold"/ { n += $2 }
    END { printf "%d", n }'
}

idle_run() {  # store: sets PER_SECOND to the idle server's instructions per second
  local store="$1" t0 t1 total
  start_callgrind "${store}" "${OUT}/${store}-idle.out"
  sleep 15
  callgrind_control -z "${PID}" >/dev/null 2>&1
  t0="$(now_s)"
  sleep "${OPEN_SECONDS}"
  callgrind_control -d "${PID}" >/dev/null 2>&1
  t1="$(now_s)"
  stop_callgrind
  total="$(program_total "${OUT}/${store}-idle.out.1")"
  PER_SECOND="$(python3 -c "print(round(${total} / (${t1} - ${t0})))")"
}

open_run() {  # store, rate: sets PER_CALL to the server's instructions per PlaceHold at that rate
  local store="$1" rate="$2" bench_pid n0 n1 total
  start_callgrind "${store}" "${OUT}/${store}-${rate}.out"
  "${BENCH}" --target="127.0.0.1:${PORT}" --rate="${rate}" \
    --mix=place=100 --users=100000 --ttl=10m --warmup=0s --duration="$((OPEN_SECONDS + 25))s" \
    --json --progress=false >"${WORK}/bench.json" 2>"${WORK}/bench.log" &
  bench_pid=$!
  PIDS+=("${bench_pid}")
  sleep 15
  n0="$(placed_calls "${METRICS}")"
  callgrind_control -z "${PID}" >/dev/null 2>&1
  sleep "${OPEN_SECONDS}"
  callgrind_control -d "${PID}" >/dev/null 2>&1
  n1="$(placed_calls "${METRICS}")"
  wait "${bench_pid}" || {
    echo "callgrind.sh: orderhold-bench failed against ${store}" >&2
    cat "${WORK}/bench.log" >&2
    exit 1
  }
  forget_pid "${bench_pid}"
  stop_callgrind
  total="$(program_total "${OUT}/${store}-${rate}.out.1")"
  ((n1 > n0)) || { echo "callgrind.sh: no PlaceHold finished at ${rate}/s (${store})" >&2; exit 1; }
  PER_CALL=$((total / (n1 - n0)))
}

if [[ -n "${OPEN_RATES}" ]]; then
  IFS=, read -r -a rates <<<"${OPEN_RATES}"
  figures=()  # store:idle:B, then store:rate:I(r)
  for store in noop redis; do
    echo "callgrind.sh: ${store}, idle" >&2
    idle_run "${store}"  # in this shell, so the exit trap stops its server
    figures+=("${store}:idle:${PER_SECOND}")
    for rate in "${rates[@]}"; do
      echo "callgrind.sh: ${store} at ${rate}/s" >&2
      open_run "${store}" "${rate}"
      figures+=("${store}:${rate}:${PER_CALL}")
    done
  done
  python3 - "${figures[@]}" <<'EOF'
import sys

idle, per_call = {}, {}
for figure in sys.argv[1:]:
    store, rate, value = figure.split(":")
    if rate == "idle":
        idle[store] = float(value)
    else:
        per_call[(store, int(rate))] = float(value)
print("server instructions per PlaceHold, open loop (user space; mostly new holds)")
print(f"  idle: noop {idle['noop']:,.0f}, Redis {idle['redis']:,.0f} per second (B)")
print("  rate/s | per call I(r) noop, Redis | own work w = I(r) - B/r: noop, Redis, ratio | "
      "at 1,000/s (w + B/1000): ratio")
for rate in sorted({r for _, r in per_call}):
    i_n, i_r = per_call[("noop", rate)], per_call[("redis", rate)]
    w_n, w_r = i_n - idle["noop"] / rate, i_r - idle["redis"] / rate
    at_n, at_r = w_n + idle["noop"] / 1000, w_r + idle["redis"] / 1000
    print(f"  {rate:6d} | {i_n:,.0f}, {i_r:,.0f} | {w_n:,.0f}, {w_r:,.0f}, {w_r / w_n:.2f}x | "
          f"{at_r / at_n:.2f}x (cpu.sh's target for CPU time: <= 1.3)")
EOF
  exit 0
fi

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
