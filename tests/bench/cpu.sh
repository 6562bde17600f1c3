#!/usr/bin/env bash
# tests/bench/cpu.sh: server CPU per call, every figure from one run on this machine.
# Not part of the test suite; tests/bench/run.sh runs it as its last phase (cpu), and CI runs
# `--smoke` through run.sh's smoke.
#
#   tests/bench/cpu.sh [--smoke] [--rates 1000,3000,6000] [--seconds 10] [--rounds 3]
#                      [--h2load-seconds 10] [--out DIR] [--server BIN]
#
# --server BIN runs BIN (another build's orderhold-server, e.g. the previous commit's) as the noop,
# redis and queued servers, so a change is measured against its parent on the same machine.
#
# Part 1, cpu: open-loop PlaceHold (orderhold-bench --rate, 100,000 users, ttl 10m) at each rate
# against three servers, each fresh, in --rounds rounds whose order alternates (forward, then
# backward), so slow drift on a shared box falls on all three alike:
#   bare   orderhold-bare-server: a gRPC callback server of the same gRPC build, nothing of ours;
#   noop   orderhold-server --store=noop: our adapter, domain and metrics, no Redis;
#   redis  orderhold-server on a fresh redis-server (its default flags: --redis_inline_wait=1ms);
#   queued the same with --redis_inline_wait=0: every call through the Redis I/O threads, as
#          before lone calls ran their round trip on the gRPC thread (the change measured in the
#          same run).
# Per run, over the measured window (after a 3 s warmup): the server's user+system CPU from
# /proc/<pid>/stat and its context switches (every thread's /proc/<pid>/task/*/status) per call,
# and redis-server's CPU per call (INFO cpu). Medians over the rounds; ratios of the medians:
# noop/bare (target <= 1.2) and redis/noop (target <= 1.3). These figures do not depend on the
# generator sharing the cores the way throughput does.
# Part 2, h2load: closed-loop PlaceHold with h2load (nghttp2-client) as the generator: one request
# (user u1, order o1; after the first call it is the idempotent "already held" path, which runs the
# whole script), -c 4 -m 32, for --h2load-seconds, against noop and redis, --rounds alternating;
# calls/s medians and the ratio redis/noop (target >= 0.7), and the server's (and redis-server's)
# CPU per call at that saturation: mostly work, few wake-ups (tests/bench/README.md "Idle reaper").
# From those, the throughput ratio on paper for cores of their own: the lower of the server-bound
# ratio (no-op ÷ PlaceHold server CPU per call) and the Redis-bound one (one primary at
# 1 ÷ redis-server CPU per call, against a no-op ceiling of 2 server cores). And the most this
# machine can show, where h2load, the server and Redis share the cores: h2load's CPU per call is
# read too (children_cpu_s), and the bound is (no-op server + h2load CPU per call) ÷ (the same +
# redis-server CPU per PlaceHold). It assumes the PlaceHold run keeps the cores no busier than the
# no-op run (both print their busy cores: calls/s × the three processes' CPU per call) and that a
# PlaceHold costs the server and h2load at least what a no-op call does; it holds for this much
# Redis work per PlaceHold. Context switches are
# reported voluntary (a thread slept) and in all (with preemptions by the processes sharing the
# cores).
# Output: tables on stdout, <out>/cpu.json and <out>/cpu.md (default <repo>/build/bench).
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
RATES="1000,3000,6000"
SECONDS_PER_RUN=10
ROUNDS=3
H2LOAD_SECONDS=10
SMOKE=0
OUT="${REPO}/build/bench"
WARMUP=3
SERVER_OVERRIDE=""
while (($#)); do
  case "$1" in
    --smoke) SMOKE=1 ;;
    --rates) RATES="$2"; shift ;;
    --seconds) SECONDS_PER_RUN="$2"; shift ;;
    --rounds) ROUNDS="$2"; shift ;;
    --h2load-seconds) H2LOAD_SECONDS="$2"; shift ;;
    --out) OUT="$2"; shift ;;
    --server) SERVER_OVERRIDE="$2"; shift ;;
    *)
      echo "usage: $0 [--smoke] [--rates R1,R2,...] [--seconds N] [--rounds N]" \
        "[--h2load-seconds N] [--out DIR] [--server BIN]" >&2
      exit 64
      ;;
  esac
  shift
done
if ((SMOKE)); then
  RATES="200" SECONDS_PER_RUN=1 ROUNDS=1 H2LOAD_SECONDS=1 WARMUP=1
fi
for n in "${SECONDS_PER_RUN}" "${ROUNDS}" "${H2LOAD_SECONDS}"; do
  [[ "${n}" =~ ^[1-9][0-9]*$ ]] || { echo "cpu.sh: counts must be positive numbers" >&2; exit 64; }
done
[[ "${RATES}" =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] || {
  echo "cpu.sh: --rates is a comma-separated list of calls/s" >&2
  exit 64
}

"${REPO}/deploy/install-deps.sh"
BUILD="${REPO}/build"
[[ -f "${BUILD}/build.ninja" ]] ||
  cmake -G Ninja -S "${REPO}" -B "${BUILD}" -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=ON >/dev/null
cmake --build "${BUILD}" --target orderhold-server orderhold-bench orderhold-bare-server \
  -j "$(nproc)" >/dev/null
SERVER="${SERVER_OVERRIDE:-${BUILD}/server/orderhold-server}"
[[ -x "${SERVER}" ]] || { echo "cpu.sh: ${SERVER} is not an executable" >&2; exit 64; }
BARE="${BUILD}/tests/bench/orderhold-bare-server"
BENCH="${BUILD}/client/orderhold-bench"

mkdir -p "${OUT}"
WORK="$(mktemp -d)"
PIDS=()
# shellcheck source=tests/bench/lib.sh
source "${REPO}/tests/bench/lib.sh"
trap stop_pids_and_work EXIT

start_redis
rcli() { redis-cli -p "${REDIS_PORT}" "$@"; }
switches() {  # "voluntary involuntary" context switches of every thread of process $1
  cat /proc/"$1"/task/*/status 2>/dev/null |
    awk '/^voluntary_ctxt/ { v += $2 } /^nonvoluntary_ctxt/ { n += $2 } END { print v + 0, n + 0 }'
}

SERVER_PID=""
start() {  # kind (bare | noop | redis | queued) -> SERVER_PID, PORT
  local kind="$1" metrics
  PORT="$(free_port)"
  if [[ "${kind}" == bare ]]; then
    "${BARE}" --grpc_address="127.0.0.1:${PORT}" 2>"${WORK}/${kind}.log" &
  else
    metrics="$(free_port)"
    while [[ "${metrics}" == "${PORT}" ]]; do metrics="$(free_port)"; done
    rcli FLUSHALL >/dev/null
    "${SERVER}" --store="$([[ "${kind}" == noop ]] && echo noop || echo redis)" \
      --grpc_address="127.0.0.1:${PORT}" --metrics_address="127.0.0.1:${metrics}" \
      --redis_url="redis://127.0.0.1:${REDIS_PORT}" \
      --redis_inline_wait="$([[ "${kind}" == queued ]] && echo 0 || echo 1ms)" \
      2>"${WORK}/${kind}.log" &
  fi
  SERVER_PID=$!
  wait_port "${PORT}"
}
stop() {
  kill "${SERVER_PID}" 2>/dev/null || true
  wait "${SERVER_PID}" 2>/dev/null || true
  SERVER_PID=""
}

# One open-loop run: prints a JSON object.
cpu_run() {  # kind, rate, round
  local kind="$1" rate="$2" round="$3" c0 c1 v0 v1 n0 n1 r0 r1 t0 t1 bench_pid
  start "${kind}"
  "${BENCH}" --target="127.0.0.1:${PORT}" --rate="${rate}" --mix=place=100 --users=100000 \
    --ttl=10m --warmup="${WARMUP}s" --duration="$((SECONDS_PER_RUN + 1))s" \
    --json --progress=false >"${WORK}/bench.json" 2>"${WORK}/bench.log" &
  bench_pid=$!
  sleep "${WARMUP}"
  c0="$(proc_cpu_s "${SERVER_PID}")"
  read -r v0 n0 < <(switches "${SERVER_PID}")
  r0="$(redis_cpu_s -p "${REDIS_PORT}")" t0="$(now_s)"
  sleep "${SECONDS_PER_RUN}"
  c1="$(proc_cpu_s "${SERVER_PID}")"
  read -r v1 n1 < <(switches "${SERVER_PID}")
  r1="$(redis_cpu_s -p "${REDIS_PORT}")" t1="$(now_s)"
  wait "${bench_pid}" || { echo "cpu.sh: orderhold-bench failed against ${kind}" >&2; cat "${WORK}/bench.log" >&2; exit 1; }
  stop
  jq -n --arg kind "${kind}" --argjson rate "${rate}" --argjson round "${round}" \
    --argjson c0 "${c0}" --argjson c1 "${c1}" --argjson v "$((v1 - v0))" --argjson n "$((n1 - n0))" \
    --argjson r0 "${r0}" \
    --argjson r1 "${r1}" --argjson t0 "${t0}" --argjson t1 "${t1}" \
    --slurpfile bench "${WORK}/bench.json" \
    '($rate * ($t1 - $t0)) as $calls
     | {kind: $kind, rate: $rate, round: $round,
        server_cpu_us_per_call: (($c1 - $c0) * 1e6 / $calls),
        switches_per_call: (($v + $n) / $calls), voluntary_switches_per_call: ($v / $calls),
        redis_cpu_us_per_call: (if $kind == "redis" or $kind == "queued" then ($r1 - $r0) * 1e6 / $calls else 0 end),
        errors: $bench[0].errors, p99_ms: $bench[0].latency_ms.p99}'
}

# One h2load run: prints a JSON object.
h2load_run() {  # kind, round
  local kind="$1" round="$2" rps c0 c1 v0 v1 n0 n1 r0 r1 g0 g1
  start "${kind}"
  c0="$(proc_cpu_s "${SERVER_PID}")" r0="$(redis_cpu_s -p "${REDIS_PORT}")"
  read -r v0 n0 < <(switches "${SERVER_PID}")
  g0="$(children_cpu_s)"
  h2load_place "${PORT}" "${WORK}/h2load.log" -D "${H2LOAD_SECONDS}" --warm-up-time=1 -c 4 \
    -m 32 || {
    echo "cpu.sh: h2load failed against ${kind}" >&2
    cat "${WORK}/h2load.log" >&2
    exit 1
  }
  g1="$(children_cpu_s)"
  c1="$(proc_cpu_s "${SERVER_PID}")" r1="$(redis_cpu_s -p "${REDIS_PORT}")"
  read -r v1 n1 < <(switches "${SERVER_PID}")
  stop
  rps="$(awk '/^finished in/ { for (i = 1; i <= NF; i++) if ($(i + 1) == "req/s,") print $i }' \
    "${WORK}/h2load.log")"
  if ! [[ "${rps}" =~ ^[0-9.]+$ ]] || ! awk -v r="${rps}" 'BEGIN { exit !(r > 0) }'; then
    echo "cpu.sh: h2load completed no calls against ${kind}" >&2
    cat "${WORK}/h2load.log" >&2
    exit 1
  fi
  grep -q '^requests: .* 0 errored' "${WORK}/h2load.log" || {
    echo "cpu.sh: h2load saw errors against ${kind}" >&2
    cat "${WORK}/h2load.log" >&2
    exit 1
  }
  # CPU per call at saturation, where few calls sleep, so what is left is work rather than
  # wake-ups. The CPU is read around the whole run (1 s warm-up + the measured seconds), so the
  # calls are taken as the measured rate over that whole time.
  jq -n --arg kind "${kind}" --argjson round "${round}" --argjson rps "${rps}" \
    --argjson seconds "$((H2LOAD_SECONDS + 1))" --argjson c0 "${c0}" --argjson c1 "${c1}" \
    --argjson r0 "${r0}" --argjson r1 "${r1}" --argjson v "$((v1 - v0))" --argjson n "$((n1 - n0))" \
    --argjson g0 "${g0}" --argjson g1 "${g1}" \
    '($rps * $seconds) as $calls
     | {kind: $kind, round: $round, calls_per_s: $rps,
      server_cpu_us_per_call: (($c1 - $c0) * 1e6 / $calls),
      switches_per_call: (($v + $n) / $calls), voluntary_switches_per_call: ($v / $calls),
      redis_cpu_us_per_call: (if $kind == "redis" then ($r1 - $r0) * 1e6 / $calls else 0 end),
      generator_cpu_us_per_call: (($g1 - $g0) * 1e6 / $calls)}'
}

: >"${WORK}/cpu.jsonl"
IFS=, read -r -a rate_list <<<"${RATES}"
for rate in "${rate_list[@]}"; do
  for ((r = 1; r <= ROUNDS; r++)); do
    order=(bare noop redis queued)
    ((r % 2 == 0)) && order=(queued redis noop bare)
    for kind in "${order[@]}"; do
      echo "cpu.sh: ${kind} at ${rate}/s, round ${r}" >&2
      cpu_run "${kind}" "${rate}" "${r}" >>"${WORK}/cpu.jsonl"
    done
  done
done
: >"${WORK}/h2load.jsonl"
for ((r = 1; r <= ROUNDS; r++)); do
  order=(noop redis)
  ((r % 2 == 0)) && order=(redis noop)
  for kind in "${order[@]}"; do
    echo "cpu.sh: h2load against ${kind}, round ${r}" >&2
    h2load_run "${kind}" "${r}" >>"${WORK}/h2load.jsonl"
  done
done

jq -n --argjson smoke "${SMOKE}" --argjson seconds "${SECONDS_PER_RUN}" --argjson rounds "${ROUNDS}" \
  --arg machine "$(nproc) cores, $(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo), $(uname -r)" \
  --slurpfile cpu "${WORK}/cpu.jsonl" --slurpfile h2 "${WORK}/h2load.jsonl" '
  def median: sort | if length == 0 then null elif length % 2 == 1 then .[length / 2 | floor]
                     else (.[length / 2 - 1] + .[length / 2]) / 2 end;
  def med($runs; $kind; $field): [$runs[] | select(.kind == $kind) | .[$field]] | median;
  ({noop_calls_per_s: med($h2; "noop"; "calls_per_s"),
    redis_calls_per_s: med($h2; "redis"; "calls_per_s"),
    noop_us: med($h2; "noop"; "server_cpu_us_per_call"),
    redis_us: med($h2; "redis"; "server_cpu_us_per_call"),
    redis_server_us: med($h2; "redis"; "redis_cpu_us_per_call"),
    noop_generator_us: med($h2; "noop"; "generator_cpu_us_per_call"),
    redis_generator_us: med($h2; "redis"; "generator_cpu_us_per_call"),
    noop_switches: med($h2; "noop"; "switches_per_call"),
    redis_switches: med($h2; "redis"; "switches_per_call"), runs: $h2}
   | .redis_vs_noop = (.redis_calls_per_s / .noop_calls_per_s)
   | .targets = {redis_vs_noop_ge_0_7: (.redis_vs_noop >= 0.7)}
   # On paper, cores of its own: the server-bound ratio (CPU per call at saturation), and the
   # Redis-bound one of one primary against a server on 2 cores; the lower binds.
   | .paper = {server_bound: (.noop_us / .redis_us),
               redis_bound_2_cores: (.noop_us / (2 * .redis_server_us))}
   | .paper.ratio = ([.paper.server_bound, .paper.redis_bound_2_cores] | min)
   # The most this machine can show, where h2load, the server and Redis share the cores: at
   # saturation calls/s ~ busy cores ÷ the CPU all three spend per call, so a PlaceHold that cost
   # the server and h2load no more than a no-op call, with the cores no busier, would still add
   # the CPU redis-server spends per PlaceHold to the total of a no-op call.
   | .noop_busy_cores = (.noop_calls_per_s * (.noop_us + .noop_generator_us) / 1e6)
   | .redis_busy_cores = (.redis_calls_per_s
                          * (.redis_us + .redis_server_us + .redis_generator_us) / 1e6)
   | .shared_cores_bound = ((.noop_us + .noop_generator_us)
                            / (.noop_us + .noop_generator_us + .redis_server_us))) as $h2o
  | {machine: $machine, date: (now | todate), smoke: ($smoke == 1), seconds: $seconds, rounds: $rounds,
   cpu: ([$cpu | group_by(.rate)[] | . as $runs
         | {rate: .[0].rate,
            bare_us: med($runs; "bare"; "server_cpu_us_per_call"),
            noop_us: med($runs; "noop"; "server_cpu_us_per_call"),
            redis_us: med($runs; "redis"; "server_cpu_us_per_call"),
            redis_server_us: med($runs; "redis"; "redis_cpu_us_per_call"),
            queued_us: med($runs; "queued"; "server_cpu_us_per_call"),
            queued_redis_server_us: med($runs; "queued"; "redis_cpu_us_per_call"),
            queued_switches: med($runs; "queued"; "switches_per_call"),
            bare_switches: med($runs; "bare"; "switches_per_call"),
            noop_switches: med($runs; "noop"; "switches_per_call"),
            redis_switches: med($runs; "redis"; "switches_per_call"),
            noop_voluntary: med($runs; "noop"; "voluntary_switches_per_call"),
            redis_voluntary: med($runs; "redis"; "voluntary_switches_per_call"),
            errors: ([$runs[].errors] | add), runs: $runs}
         | .noop_vs_bare = (.noop_us / .bare_us) | .redis_vs_noop = (.redis_us / .noop_us)
         | .queued_vs_noop = (.queued_us / .noop_us)
         | .targets = {noop_vs_bare_le_1_2: (.noop_vs_bare <= 1.2),
                       redis_vs_noop_le_1_3: (.redis_vs_noop <= 1.3)}]),
   h2load: $h2o}' >"${OUT}/cpu.json"

jq -r 'def f1: . * 10 | round / 10; def f2: . * 100 | round / 100;
  "## Server CPU per PlaceHold, open loop (\(.date); \(.machine); \(.seconds) s x \(.rounds) rounds, medians)" + (if .smoke then " SMOKE RUN: figures are not meaningful." else "" end),
  "",
  "| rate | bare gRPC µs | noop µs | Redis µs (+ redis-server µs) | Redis, inline off µs (+ redis-server µs) | context switches bare / noop / Redis / inline off | noop / bare (<= 1.2) | Redis / noop (<= 1.3) | inline off / noop |",
  "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
  (.cpu[] | "| \(.rate)/s | \(.bare_us | f1) | \(.noop_us | f1) | \(.redis_us | f1) (+ \(.redis_server_us | f1)) | \(.queued_us | f1) (+ \(.queued_redis_server_us | f1)) | \(.bare_switches | f2) / \(.noop_switches | f2) / \(.redis_switches | f2) / \(.queued_switches | f2) | \(.noop_vs_bare | f2): \(.targets.noop_vs_bare_le_1_2) | \(.redis_vs_noop | f2): \(.targets.redis_vs_noop_le_1_3) | \(.queued_vs_noop | f2) |"),
  "",
  "h2load (closed loop, -c 4 -m 32, one PlaceHold request): noop \(.h2load.noop_calls_per_s | round)/s, Redis \(.h2load.redis_calls_per_s | round)/s: ratio \(.h2load.redis_vs_noop | f2) (>= 0.7: \(.h2load.targets.redis_vs_noop_ge_0_7)); server CPU per call there: noop \(.h2load.noop_us | f1) µs, Redis \(.h2load.redis_us | f1) µs (+ redis-server \(.h2load.redis_server_us | f1) µs)",
  "",
  "Throughput on paper, cores of their own: \(.h2load.paper.ratio | f2), the lower of server-bound \(.h2load.paper.server_bound | f2) (no-op ÷ PlaceHold server CPU per call at saturation) and Redis-bound \(.h2load.paper.redis_bound_2_cores | f2) (one primary at 1 ÷ redis-server µs per call, against a no-op ceiling of 2 server cores). On this machine, where h2load, the server and Redis share the cores, the measured ratio can be at most \(.h2load.shared_cores_bound | f2): (no-op server + h2load CPU per call) ÷ (the same + redis-server CPU per PlaceHold), what a PlaceHold that cost the server and h2load no more than a no-op call would reach with the cores no busier (busy cores: noop \(.h2load.noop_busy_cores | f2), Redis \(.h2load.redis_busy_cores | f2); h2load CPU per call: noop \(.h2load.noop_generator_us | f1) µs, Redis \(.h2load.redis_generator_us | f1) µs). Voluntary / all context switches per call: open loop noop \([.cpu[] | "\(.noop_voluntary | f2) / \(.noop_switches | f2)"] | join(", ")), Redis \([.cpu[] | "\(.redis_voluntary | f2) / \(.redis_switches | f2)"] | join(", ")); h2load noop \(.h2load.noop_switches | f2), Redis \(.h2load.redis_switches | f2)."' \
  "${OUT}/cpu.json" | tee "${OUT}/cpu.md"
jq -e '[.cpu[].errors] | add == 0' "${OUT}/cpu.json" >/dev/null || {
  echo "cpu.sh: calls failed (see ${OUT}/cpu.json)" >&2
  exit 1
}
echo "cpu.sh: wrote ${OUT}/cpu.json and ${OUT}/cpu.md" >&2
