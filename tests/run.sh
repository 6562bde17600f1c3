#!/usr/bin/env bash
# tests/run.sh: install what is missing, build, run the whole suite. Non-zero on any failure.
#
#   tests/run.sh              Release build in <repo>/build, then ctest
#   tests/run.sh --sanitize   AddressSanitizer + UBSan build (clang) in <repo>/build-asan, then ctest
#                             without the `deploy` label (shell checks of deploy/ that run no
#                             sanitized code: the Release run covers them) and without
#                             e2e_tests.cluster_reshard (a load test that runs alone, 25 s under
#                             ASan, for CI time: its Cluster redirect paths run sanitized in the
#                             contract, integration and other cluster e2e tests; the Release run
#                             keeps it), ScopeFaultsE2eTest (kills of servers and primaries
#                             that wait seconds of real time) and the Cluster's 5,000-user scope
#                             totals herds (six nodes, two servers and the herd on two cores
#                             sanitized time out on WAIT): the scope protocol's code runs
#                             sanitized in the contract cases on the Cluster; and the Sentinel
#                             variants of the capacity, on-sale and close herds (beside another
#                             test, sanitized, the sentinels answered too late for 18 of a
#                             capacity herd's calls: UNAVAILABLE; alone it passes): the same code
#                             runs sanitized in their standalone variants. The Release run keeps
#                             them all
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
[[ "${1:-}" == "--sanitize" ]] && CTEST_ARGS=(-LE deploy -E '^(e2e_tests\.cluster_reshard|ScopeFaultsE2eTest\..*|Redis/ScopeTotalsE2eTest\..*/cluster( .*)?|Redis/ScopeCapacityE2eTest\..*/sentinel( .*)?|Redis/ScopeRulesE2eTest\.(AnOnSale|WithoutAPurchase|AfterClose|AReleaseWithout).*/sentinel( .*)?)$')
JOBS="$(nproc)"
start=$(date +%s)
cmake -G Ninja -S "${REPO}" -B "${BUILD_DIR}" "${CMAKE_ARGS[@]}" >/dev/null
cmake --build "${BUILD_DIR}" -j "${JOBS}"
built=$(date +%s)
ctest --test-dir "${BUILD_DIR}" --output-on-failure -j "${JOBS}" --timeout 180 "${CTEST_ARGS[@]}"
done_at=$(date +%s)
echo "tests/run.sh: build $((built - start)) s, suite $((done_at - built)) s (${BUILD_DIR})"
