#!/usr/bin/env bash
# tests/property/run.sh: the model-based property tests (hold_property_test.cc) outside ctest.
#
#   tests/property/run.sh                  as the suite runs them: a fixed seed, 3,000 histories on
#                                          the fake store and 300 on Redis (seconds)
#   tests/property/run.sh --long [N]       a fresh seed and N times as many (default 30: 90,000 on
#                                          the fake, 9,000 on Redis; about 5 minutes on 2 cores)
#   tests/property/run.sh --seed S [...]   that seed (a failure prints its seed and a `reproduce`
#                                          string: RC_PARAMS="reproduce=..." replays just that case)
#
# Builds property_tests in <repo>/build (Release) first; tests/run.sh installs what it needs.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD_DIR="${REPO}/build"
seed=20261126
times=1
while (($#)); do
  case "$1" in
    --long) seed=$(( (RANDOM << 15) | RANDOM )); times=30
            [[ "${2:-}" =~ ^[0-9]+$ ]] && { times=$2; shift; } ;;
    --seed) seed=$2; shift ;;
    *) echo "usage: tests/property/run.sh [--long [N]] [--seed S]" >&2; exit 64 ;;
  esac
  shift
done
cmake -G Ninja -S "${REPO}" -B "${BUILD_DIR}" -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=ON >/dev/null
cmake --build "${BUILD_DIR}" --target property_tests
echo "property tests: seed ${seed}, ${times}x the suite's histories"
for store in Fake:3000 Redis:300; do
  RC_PARAMS="max_success=$(( ${store#*:} * times )) seed=${seed}" \
    "${BUILD_DIR}/tests/property_tests" --gtest_filter="*${store%%:*}Store*"
done
