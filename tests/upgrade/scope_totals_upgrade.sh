#!/usr/bin/env bash
# tests/upgrade/scope_totals_upgrade.sh: rolling onto scope totals (server/README.md "Scope
# totals", Upgrading), for real. The release before (FROM, built from its commit like
# rolling_upgrade.sh does) runs beside this build on one Redis, and the operator's three steps are
# taken one by one, each checked:
#
#   A  OLD and NEW serve together, the limits file without totals (the OLD release refuses a file
#      with total_max_*: checked, A2). 60 users place holds in scope event:U through both, some
#      short (2 s), some of the longest ttl (--max_ttl 20 s); some are paid through the other
#      replica. NEW's
#      GetScopeUsage counts fewer holds than are live (those OLD placed are not in the index), or
#      more (entries of holds OLD ended before their expiry): why a total must wait.
#   A2 OLD is sent SIGHUP with a file that has totals: it keeps its rules and logs the unknown
#      field (it never enforces a total); the file goes back.
#   B  OLD is stopped (step 1 done). Then the longest a hold can live passes (step 2: the larger
#      of --max_ttl, 20 s, and --max_hold_lifetime, 6 s): every hold OLD placed or ended is over.
#      NEW's GetScopeUsage equals the live holds counted user by user (ListHolds), in holds and
#      units; a scope first used after OLD stopped (event:H, phase C) is exact at once.
#   C  The totals are written and NEW is sent SIGHUP (step 3), a second NEW replica starts with the
#      file: 200 users race through both for total_max_holds 20. Exactly 20 are created, none over,
#      every refusal is SCOPE_TOTAL_LIMIT (exit 8) and leaves the user without a hold, and
#      GetScopeUsage says 20.
#
# Not in ctest (building the old release takes minutes; the cache is rolling_upgrade.sh's). Usage:
#   tests/upgrade/scope_totals_upgrade.sh [--from REF] [--build DIR] [--cache DIR] [--keep]
#     --from REF   the release before scope totals (default below: bc54bb8)
#     --build DIR  where this release's orderhold-server and orderhold-cli are (default <repo>/build)
#     --cache DIR  where old releases are built (default <repo>/build-upgrade)
# Exit status 0 only when every check held.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# shellcheck source=tests/upgrade/lib.sh
source "${REPO}/tests/upgrade/lib.sh"
# The release before scope totals: stop 52's, `git rev-parse bc54bb8`.
upgrade_main totals-upgrade bc54bb80a2a546830a2cd724386e80b08a35e08f "$@"

LIMITS="${WORK}/limits.json"
LIFETIME_S=6
MAX_TTL_S=20
echo '{"rules": [{"prefix": "event:", "max_holds": 2}]}' >"${LIMITS}"
TOTALS='{"rules": [{"prefix": "event:", "max_holds": 2, "total_max_holds": 20}]}'

# start_replica NAME BINARY, with the flags of this test.
replica() {
  start_replica "$1" "$2" --max_holds=3 --reap_interval=200ms \
    --max_hold_lifetime="${LIFETIME_S}s" --max_ttl="${MAX_TTL_S}s" --default_ttl="${MAX_TTL_S}s" \
    --scope_limits="${LIMITS}"
}
cli() { "${CLI}" --target="127.0.0.1:${PORT[$1]}" --timeout=5s --json "${@:2}"; }
# The scope's live holds and units, user by user (ListHolds through NEW): "holds units".
counted() {
  local holds=0 units=0 u out
  for u in "$@"; do
    out="$(cli new list "${u}" --scope event:U)"
    holds=$((holds + $(jq '[.holds[]?] | length' <<<"${out}")))
    units=$((units + $(jq '[.holds[]?.quantity] | add // 0' <<<"${out}")))
  done
  echo "${holds} ${units}"
}
usage() { cli new scope-usage "$1" | jq -r '"\(.usage.holds // 0) \(.usage.units // 0)"'; }

# --- A: the mixed fleet ---------------------------------------------------------------------------
replica old old
replica new new
USERS=()
for i in $(seq 0 59); do
  u="mixed-${i}"
  USERS+=("${u}")
  r=$([[ $((i % 2)) == 0 ]] && echo old || echo new)
  other=$([[ "${r}" == old ]] && echo new || echo old)
  ttl=$([[ $((i % 3)) == 0 ]] && echo 2s || echo "${MAX_TTL_S}s")
  cli "${r}" place "${u}" o1 --scope event:U --quantity $((1 + i % 2)) --ttl "${ttl}" >/dev/null
  if ((i % 5 == 0)); then cli "${other}" pay "${u}" o1 >/dev/null; fi
done
sleep 2.5  # the 2 s holds expire: the reapers (either release's) end them
read -r live_holds live_units < <(counted "${USERS[@]}")
read -r index_holds index_units < <(usage event:U)
log "mixed fleet: ${live_holds} holds / ${live_units} units live; the index says ${index_holds} / ${index_units}"
check "with an old replica beside, the index does not count what is live (a total must wait)" \
  "$([[ "${index_holds}" != "${live_holds}" || "${index_units}" != "${live_units}" ]]; echo $?)"

# --- A2: the old release refuses a file with totals -------------------------------------------------
cp "${LIMITS}" "${WORK}/limits.kept"
echo "${TOTALS}" >"${LIMITS}"
kill -HUP "${PID[old]}"
sleep 0.5
grep -q "total_max_holds" "${WORK}/server-old.log"
check "the old replica refuses the file with totals on SIGHUP (logged; its rules stay)" "$?"
cp "${WORK}/limits.kept" "${LIMITS}"

# --- B: steps 1 and 2 ---------------------------------------------------------------------------------
kill -TERM "${PID[old]}"
wait "${PID[old]}" || true
WAIT_S=$((MAX_TTL_S > LIFETIME_S ? MAX_TTL_S : LIFETIME_S))
log "old replica stopped; waiting the longest a hold can live (${WAIT_S} s)"
sleep $((WAIT_S + 1))
# Some holds, placed now by NEW alone, so that the exact count is not just 0.
for i in $(seq 0 9); do cli new place "after-${i}" o1 --scope event:U --quantity 2 >/dev/null; done
USERS+=($(seq -f 'after-%g' 0 9))
read -r live_holds live_units < <(counted "${USERS[@]}")
read -r index_holds index_units < <(usage event:U)
log "after the wait: ${live_holds} holds / ${live_units} units live; the index says ${index_holds} / ${index_units}"
check "the index counts exactly what is live" \
  "$([[ "${index_holds}" == "${live_holds}" && "${index_units}" == "${live_units}" ]]; echo $?)"

# --- C: step 3, and a herd ----------------------------------------------------------------------------
echo "${TOTALS}" >"${LIMITS}"
kill -HUP "${PID[new]}"
sleep 0.5
replica new2 new
herd_one() {  # herd_one I PORT_A PORT_B: one user's PlaceHold (even I: A, odd: B); its exit code
  local rc=0 port=$(($1 % 2 == 0 ? $2 : $3))
  "${CLI}" --target="127.0.0.1:${port}" --timeout=5s place "herd-$1" o1 --scope event:H \
    >/dev/null 2>"${WORK}/herd-$1.err" || rc=$?
  echo "${rc}"
}
export -f herd_one
export CLI WORK
rcs="$(seq 0 199 | xargs -P 16 -I{} bash -c "herd_one {} ${PORT[new]} ${PORT[new2]}")"
created="$(grep -c '^0$' <<<"${rcs}" || true)"
refused="$(grep -c '^8$' <<<"${rcs}" || true)"
log "herd of 200 for a total of 20: ${created} created, ${refused} refused"
check "exactly the total is granted" "$([[ "${created}" == 20 ]]; echo $?)"
check "every other call is refused with RESOURCE_EXHAUSTED" "$([[ "${refused}" == 180 ]]; echo $?)"
grep -l "scope/event:H\|SCOPE_TOTAL_LIMIT\|total_max_holds" "${WORK}"/herd-*.err | wc -l \
  >"${WORK}/refusal-count"
check "each refusal names the total" "$([[ "$(cat "${WORK}/refusal-count")" == 180 ]]; echo $?)"
# Read at once after the herd: its first holds expire 20 s (MAX_TTL_S) after it began, and the
# listing below (200 CLI calls) takes over 10 s on a busy 2-core box. The listing reads each user
# within seconds of its own placement, in the herd's order.
read -r index_holds _ < <(usage event:H)
check "GetScopeUsage says 20" "$([[ "${index_holds}" == 20 ]]; echo $?)"
with_holds=0
for i in $(seq 0 199); do
  n="$(cli new list "herd-${i}" | jq '[.holds[]?] | length')"
  with_holds=$((with_holds + (n > 0 ? 1 : 0)))
done
check "refusals leave no trace (${with_holds} users hold one)" "$([[ "${with_holds}" == 20 ]]; echo $?)"
((FAILED == 0)) && log "scope totals upgrade: every check held" ||
  log "scope totals upgrade: FAILED"
exit "${FAILED}"
