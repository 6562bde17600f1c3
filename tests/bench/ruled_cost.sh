#!/usr/bin/env bash
# tests/bench/ruled_cost.sh: what a PlaceHold and a Pay cost Redis under a runtime rule with a
# capacity, against the release before's scoped PlaceHold and Pay, interleaved in one run on one
# Redis (so a growing keyspace, and the rehash steps that come with it, weigh on every side alike
# rather than on whichever row runs last, as in redis_cost.sh's sequence of rows).
#
#   1. --chunks rounds of placements, each placing the next slice of --users holds per side, in
#      turn: the release before's orderhold-redis-cost (its own store and Functions library:
#      libraries are named after their code's hash, so both live in one Redis) scoped holds (o),
#      this build's scoped holds (s) and holds under a runtime rule with a capacity (c);
#   2. then --chunks rounds of payments, each paying the next slice of each side's first half;
#   3. each slice runs between two readings of INFO commandstats (Redis' script time per FCALL):
#      prints each slice's figure, then per side and operation the median and the least, and c
#      over o (the targets: at most 1.3x the release before's scoped PlaceHold and Pay): of the
#      medians, of the least, and the median of each slice's c over the o beside it (the figure
#      a busy shared machine moves least).
#
# The release before's driver is built from its commit with testing on, e.g.
#   git archive 67e9fd6 | tar -x -C /tmp/old && cmake -G Ninja -S /tmp/old -B /tmp/old/build \
#     -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=ON && cmake --build /tmp/old/build \
#     --target orderhold-redis-cost
# (tests/upgrade/on_sale_upgrade.sh's cache, build-upgrade/<sha>/, takes the same target).
#
# Usage: tests/bench/ruled_cost.sh --old-bin-dir DIR [--users N] [--chunks K] (~1 min at 300,000)
#   --old-bin-dir DIR  where the release before's orderhold-redis-cost is
#   --users N          holds placed per side (default 300000); --chunks K slices (default 8)
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
USERS=300000
CHUNKS=8
OLD_DIR=""
while (($#)); do
  case "$1" in
    --old-bin-dir) OLD_DIR="${2:?}"; shift 2 ;;
    --users) USERS="${2:?}"; shift 2 ;;
    --chunks) CHUNKS="${2:?}"; shift 2 ;;
    *) echo "usage: $0 --old-bin-dir DIR [--users N] [--chunks K]" >&2; exit 64 ;;
  esac
done
OLD="${OLD_DIR}/orderhold-redis-cost"
NEW="${REPO}/build/tests/bench/orderhold-redis-cost"
[[ -x "${OLD}" ]] || { echo "ruled_cost.sh: no ${OLD} (--old-bin-dir)" >&2; exit 64; }
cmake --build "${REPO}/build" --target orderhold-redis-cost >/dev/null
for n in ${USERS} ${CHUNKS}; do
  [[ "${n}" =~ ^[1-9][0-9]*$ ]] || { echo "ruled_cost.sh: counts must be positive" >&2; exit 64; }
done

# shellcheck source=tests/bench/lib.sh
source "${REPO}/tests/bench/lib.sh"
bench_redis
URL="redis://127.0.0.1:${REDIS_PORT}"
per_call() {  # Redis' script µs per FCALL since the last CONFIG RESETSTAT
  rcli INFO commandstats | tr -d '\r' | awk -F'[:=,]' '$1 == "cmdstat_fcall" { print $5 / $3 }'
}
run() { local bin="$1"; shift; "${bin}" --redis_url="${URL}" --users="${USERS}" "$@" >/dev/null; }
ROWS="${WORK}/rows"
# measure OP SIDE FIRST CALLS: one slice of OP by SIDE's driver, a row "OP SIDE µs".
measure() {
  local bin="${NEW}" op="$1"
  [[ "$2" == o ]] && bin="${OLD}"
  [[ "$1" == place && "$2" == c ]] && op=place_ruled
  [[ "$1" == place && "$2" != c ]] && op=place_scoped
  rcli CONFIG RESETSTAT >/dev/null
  run "${bin}" --op="${op}" --user_prefix="$2" --first="$3" --calls="$4"
  echo "$1 $2 $(per_call)" | tee -a "${ROWS}"
}
STEP=$((USERS / CHUNKS))
for ((k = 0; k < CHUNKS; k++)); do
  for side in o s c; do measure place "${side}" $((k * STEP)) "${STEP}"; done
done
STEP=$((USERS / 2 / CHUNKS))
for ((k = 0; k < CHUNKS; k++)); do
  for side in o s c; do measure pay "${side}" $((k * STEP)) "${STEP}"; done
done
python3 - "${ROWS}" <<'EOF'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    op, side, us = line.split()
    rows.setdefault((op, side), []).append(float(us))
names = {"o": "release before, scoped", "s": "now, scoped", "c": "now, runtime rule + capacity"}
for op in ("place", "pay"):
    for side in "osc":
        v = rows[(op, side)]
        print(f"ruled_cost: {op}, {names[side]}: median {statistics.median(v):.1f} us, "
              f"least {min(v):.1f} us")
    med = statistics.median(rows[(op, "c")]) / statistics.median(rows[(op, "o")])
    least = min(rows[(op, "c")]) / min(rows[(op, "o")])
    # Slice by slice: each slice's c over the o measured beside it, so that a stretch of a busy
    # shared machine weighs on both sides of a ratio (the medians above may take them from
    # different slices).
    paired = [c / o for c, o in zip(rows[(op, "c")], rows[(op, "o")])]
    print(f"ruled_cost: {op} ruled over the release before's scoped: {med:.2f}x by median, "
          f"{least:.2f}x by least, {statistics.median(paired):.2f}x by the median of the "
          f"{len(paired)} slices' ratios ({min(paired):.2f}-{max(paired):.2f})")
EOF
