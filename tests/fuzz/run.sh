#!/usr/bin/env bash
# tests/fuzz/run.sh: builds the libFuzzer targets of tests/fuzz/ with Debian's clang
# (AddressSanitizer + UBSan; in <repo>/build-asan when tests/run.sh --sanitize configured it, else
# in <repo>/build-fuzz: <build> below) and runs each for a bounded time on a copy of its seed
# corpus (tests/fuzz/corpus/<name>/). Non-zero when any of them finds a crash, a leak, a sanitizer
# report or a hang (-timeout); the input that did it is left in <build>/artifacts/ and named in
# the output: reproduce with <build>/tests/fuzz/<name>_fuzzer <that file>.
#
#   tests/fuzz/run.sh              60 s per fuzzer
#   tests/fuzz/run.sh --smoke      10 s per fuzzer (.ci/run)
#   tests/fuzz/run.sh SECONDS [NAME...]
#
# Works on a fresh Debian 12 machine (deploy/install-deps.sh installs clang and its runtime).
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
"${REPO}/deploy/install-deps.sh"
seconds=60
case "${1:-}" in
  --smoke) seconds=10; shift ;;
  [0-9]*) seconds=$1; shift ;;
esac
names=("$@")
((${#names[@]})) || names=(requests stored_values redis_url limits_file config redis_replies authz_policy)

# The sanitized suite's build (tests/run.sh --sanitize, as .ci/run runs it first) has the fuzzers
# too, with the same instrumentation: they are (re)built there instead of compiling everything
# again. Else a build of their own.
BUILD_DIR="${REPO}/build-fuzz"
start=$(date +%s)
if grep -q '^ORDERHOLD_FUZZ:BOOL=ON' "${REPO}/build-asan/CMakeCache.txt" 2>/dev/null; then
  BUILD_DIR="${REPO}/build-asan"
else
  CC=clang CXX=clang++ cmake -G Ninja -S "${REPO}" -B "${BUILD_DIR}" -DBUILD_TESTING=OFF \
    -DORDERHOLD_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1" >/dev/null
fi
cmake --build "${BUILD_DIR}" --target fuzzers -j "$(nproc)"
built=$(date +%s)

export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
mkdir -p "${BUILD_DIR}/artifacts"
failed=()
for name in "${names[@]}"; do
  corpus="${BUILD_DIR}/corpus/${name}"
  mkdir -p "${corpus}"
  # -timeout: an input that takes over 10 s is a hang; -rss_limit_mb: over 2 GiB is a finding.
  if "${BUILD_DIR}/tests/fuzz/${name}_fuzzer" -max_total_time="${seconds}" -timeout=10 \
      -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="${BUILD_DIR}/artifacts/${name}-" \
      "${corpus}" "${REPO}/tests/fuzz/corpus/${name}" >"${BUILD_DIR}/${name}.log" 2>&1; then
    echo "fuzz ${name}: ok ($(grep -E '^stat::number_of_executed_units' "${BUILD_DIR}/${name}.log" |
      awk '{print $2}') runs in ${seconds} s, corpus $(ls "${corpus}" | wc -l) inputs)"
  else
    failed+=("${name}")
    echo "fuzz ${name}: FAILED; the end of ${BUILD_DIR}/${name}.log:" >&2
    tail -40 "${BUILD_DIR}/${name}.log" >&2
  fi
done
echo "tests/fuzz/run.sh: build $((built - start)) s, fuzzing $(( $(date +%s) - built )) s"
((${#failed[@]} == 0)) || { echo "fuzzers with findings: ${failed[*]}" >&2; exit 1; }
