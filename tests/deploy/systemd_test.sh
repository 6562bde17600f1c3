#!/usr/bin/env bash
# tests/deploy/systemd_test.sh: proves deploy/systemd/orderhold.service is a unit systemd accepts
# and that its settings fit the server:
#   1. `systemd-analyze verify` passes without a single warning (it exits 0 on unknown or
#      unparsable settings, so any output fails the test). It also checks that ExecStart exists:
#      a copy of the unit with ExecStart pointing at the built server is verified.
#   2. `systemd-analyze security --offline` rates its exposure at most 2.0 ("OK"; the score is
#      printed), so a dropped hardening setting fails.
#   3. The server runs from deploy/systemd/orderhold.env.example (every variable in it is a flag's,
#      and parses), and after SIGTERM exits 0 within the unit's TimeoutStopSec, which exceeds the
#      server's drain (server/main.cc).
# Both systemd-analyze commands work offline: no systemd needs to run (none does in a container),
# and no root. Not proven here: that the sandbox lets the server run, which needs systemd as PID 1
# (the README says how it was checked instead).
# Run: bash tests/deploy/systemd_test.sh /path/to/orderhold-server (ctest -L deploy runs it).
# Takes about 2 seconds.
set -euo pipefail
server="${1:?usage: systemd_test.sh /path/to/orderhold-server}"
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# shellcheck source=tests/bench/lib.sh
source "${repo}/tests/bench/lib.sh"
# shellcheck source=tests/deploy/server_facts.sh
source "${repo}/tests/deploy/server_facts.sh"
unit_file="${repo}/deploy/systemd/orderhold.service"
env_file="${repo}/deploy/systemd/orderhold.env.example"
max_exposure=20  # systemd-analyze's --threshold is in tenths: 2.0

fail() { echo "systemd_test: FAIL: $*" >&2; exit 1; }
command -v systemd-analyze >/dev/null || fail "systemd-analyze missing (deploy/install-deps.sh)"

tmp="$(mktemp -d)"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "${pid}" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "${tmp}"
}
trap cleanup EXIT

# 1. verify, on a copy whose ExecStart is the built binary.
unit="${tmp}/orderhold.service"
grep -qx 'ExecStart=/usr/local/bin/orderhold-server' "${unit_file}" ||
  fail "ExecStart is not /usr/local/bin/orderhold-server (this test rewrites that line)"
sed "s#^ExecStart=/usr/local/bin/orderhold-server\$#ExecStart=${server}#" "${unit_file}" >"${unit}"
verify_out="$(systemd-analyze verify "${unit}" 2>&1)" ||
  fail "systemd-analyze verify: ${verify_out}"
[[ -z "${verify_out}" ]] || fail "systemd-analyze verify warns: ${verify_out}"

# 2. security exposure.
security_out="$(systemd-analyze security --offline=true --threshold="${max_exposure}" "${unit}" \
  2>&1)" ||
  fail "exposure above $((max_exposure / 10)).$((max_exposure % 10)) (a setting dropped?):
$(grep -v '^✓' <<<"${security_out}")"
echo "systemd_test: $(grep 'Overall exposure level' <<<"${security_out}")"

# 3. The example environment, and the stop timeout against the drain.
timeout_stop="$(grep -oP '^TimeoutStopSec=\K[0-9]+(?=s?$)' "${unit_file}")" ||
  fail "no TimeoutStopSec=<seconds> in the unit"
drain_s="$(server_drain_seconds "${repo}")"
((timeout_stop > drain_s + 1)) ||
  fail "TimeoutStopSec=${timeout_stop} leaves no room after the ${drain_s} s drain and reaper stop"
grep -q '^KillSignal=SIGTERM$' "${unit_file}" ||
  fail "KillSignal is not SIGTERM (the drain's signal)"

# systemd's EnvironmentFile: KEY=VALUE lines, # comments; the example needs no quoting.
known="$(server_flags "${repo}" | sed 's/.*/ORDERHOLD_\U&/')"
variables=()
while IFS= read -r line; do
  [[ -z "${line}" || "${line}" == \#* ]] && continue
  name="${line%%=*}"
  grep -qx "${name}" <<<"${known}" ||
    fail "${env_file}: ${name} is not a server flag's variable"
  variables+=("${line}")
done <"${env_file}"
# The commented-out examples too.
while IFS= read -r name; do
  grep -qx "${name}" <<<"${known}" ||
    fail "${env_file}: ${name} (commented) is not a server flag's variable"
done < <(grep -oP '^#\s*\KORDERHOLD_[A-Z0-9_]+(?==)' "${env_file}")

# The password file the unit's credential would be (the example points into /run/credentials).
redis_password="systemd-test-password"
printf '%s' "${redis_password}" >"${tmp}/redis-password"
redis_port="$(free_port)"
redis-server --port "${redis_port}" --bind 127.0.0.1 --save '' --appendonly no \
  --requirepass "${redis_password}" >"${tmp}/redis.log" 2>&1 &
pids+=($!)
wait_port "${redis_port}"
grpc_port="$(free_port)"
metrics_port="$(free_port)"
# The example's values, with the test's Redis, its password file and ports (the command line
# wins over the variables).
env "${variables[@]}" ORDERHOLD_REDIS_URL="redis://127.0.0.1:${redis_port}" \
  ORDERHOLD_REDIS_PASSWORD_FILE="${tmp}/redis-password" "${server}" \
  --grpc_address="127.0.0.1:${grpc_port}" --metrics_address="127.0.0.1:${metrics_port}" \
  >"${tmp}/server.log" 2>&1 &
server_pid=$!
pids+=("${server_pid}")
wait_port "${grpc_port}" || fail "the server did not start: $(cat "${tmp}/server.log")"
wait_port "${metrics_port}"
grep -q '^orderhold_' <<<"$(scrape "${metrics_port}")" || fail "no orderhold_ metrics"

start="$(now_s)"
kill -TERM "${server_pid}"
for _ in $(seq $((timeout_stop * 20))); do
  kill -0 "${server_pid}" 2>/dev/null || break
  sleep 0.05
done
kill -0 "${server_pid}" 2>/dev/null && fail "still running ${timeout_stop} s after SIGTERM"
status=0
wait "${server_pid}" || status=$?
((status == 0)) || fail "exit status ${status} after SIGTERM: $(tail -5 "${tmp}/server.log")"
stop_s="$(awk -v a="${start}" -v b="$(now_s)" 'BEGIN { printf "%.2f", b - a }')"
echo "systemd_test: ok (stopped ${stop_s} s after SIGTERM; TimeoutStopSec=${timeout_stop})"
