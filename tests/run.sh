#!/usr/bin/env bash
# tests/run.sh: install what is missing, build, run the whole suite. Non-zero on any failure.
#
#   tests/run.sh              Release build in <repo>/build, then ctest
#   tests/run.sh --sanitize   AddressSanitizer + UBSan build (clang) in <repo>/build-asan, then ctest
#                             of every unit, contract, property and integration case, and of the
#                             e2e cases that drive the server's own code on a standalone Redis
#                             (its rpcs, streams, bounds, TLS, policy, tenants, rules, the CLI).
#                             Left out, for CI time (the Release run keeps them all): the `deploy`
#                             label (shell checks that run no sanitized code); the e2e cases whose
#                             subject is a Redis fault or topology (Sentinel and Cluster variants,
#                             failovers, reshards, proxies, black holes, ScopeFaultsE2eTest, the
#                             one-process Cluster suites), whose client code runs sanitized in the
#                             contract and integration cases on all three modes, and whose waits
#                             on real time under ASan on two cores made them slow and, beside
#                             other tests, late (18 of a Sentinel capacity herd's calls once);
#                             the two bounds cases that run a minute of ends and full watches of
#                             large events (the same code runs in the shorter bounds cases); and
#                             the redelivery backlogs (the sweep's code runs in HoldEventsE2eTest)
#
# Works on a fresh Debian 12 machine (installs the packages with apt; needs root only then).
# Tests start their own redis-server on free ports: nothing needs to be running.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"${REPO}/deploy/install-deps.sh"

BUILD_DIR="${REPO}/build"
CMAKE_ARGS=(-DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=ON)
if [[ "${1:-}" == "--sanitize" ]]; then
  BUILD_DIR="${REPO}/build-asan"
  # With clang (Debian's, as tests/fuzz/ needs anyway): its sanitized build compiles ~35% faster
  # than GCC's (hold_service_test.cc: 22 s vs 34 s), and the sanitizers are the ones libFuzzer
  # uses. The Release build (what ships) stays GCC's. A build-asan/ left by GCC starts afresh.
  export CC=clang CXX=clang++
  if [[ -f "${BUILD_DIR}/CMakeCache.txt" ]] &&
      ! grep -q '^CMAKE_CXX_COMPILER:[A-Z]*=.*clang++' "${BUILD_DIR}/CMakeCache.txt"; then
    rm -rf "${BUILD_DIR}"
  fi
  # -O1 -g1, as AddressSanitizer's docs advise: reasonable speed, stack traces with file:line, and
  # a build far cheaper than -O2 -g (the sanitized build is the longest step of CI).
  # No benchmark or soak tools (ORDERHOLD_TOOLS): no test runs them. The libFuzzer targets
  # (ORDERHOLD_FUZZ: server/ is also instrumented for libFuzzer's coverage, which the tests do not
  # notice) are built here too, so tests/fuzz/run.sh finds them built instead of compiling
  # everything a third time (CI: ~110 s).
  CMAKE_ARGS=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DBUILD_TESTING=ON -DORDERHOLD_SANITIZE=ON -DORDERHOLD_TOOLS=OFF -DORDERHOLD_FUZZ=ON
    "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG" "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG")
  export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:strict_string_checks=1"
  export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
fi

CTEST_ARGS=()
# (A parameterized case's ctest name ends in "  # GetParam() = ...": hence "( .*)?".)
SANITIZED_LEFT_OUT='^(e2e_tests\..*|ScopeFaultsE2eTest\..*|ClusterE2eTest\..*|SentinelE2eTest\..*|ProxiedRedisTest\..*|BlackHoledRedisTest\..*|IdleConnectionsE2eTest\..*|Backlogs/RedeliveryE2eTest\..*|RedeliveryE2eTest\..*|ScopeTotalsClusterE2eTest\..*|BoundsE2eTest\.(StreamsStay|FullWatches).*|Redis/[A-Za-z]+E2eTest\..*/(sentinel|cluster)( .*)?)$'
[[ "${1:-}" == "--sanitize" ]] && CTEST_ARGS=(-LE deploy -E "${SANITIZED_LEFT_OUT}")
JOBS="$(nproc)"
start=$(date +%s)
cmake -G Ninja -S "${REPO}" -B "${BUILD_DIR}" "${CMAKE_ARGS[@]}" >/dev/null
cmake --build "${BUILD_DIR}" -j "${JOBS}"
built=$(date +%s)
ctest --test-dir "${BUILD_DIR}" --output-on-failure -j "${JOBS}" --timeout 180 "${CTEST_ARGS[@]}"
done_at=$(date +%s)
echo "tests/run.sh: build $((built - start)) s, suite $((done_at - built)) s (${BUILD_DIR})"
