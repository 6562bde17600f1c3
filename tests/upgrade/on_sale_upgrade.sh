#!/usr/bin/env bash
# tests/upgrade/on_sale_upgrade.sh: rolling onto runtime scope rules, purchase caps, returns and
# limit classes from the release before them (FROM, built from its commit as rolling_upgrade.sh
# does), for real: what that release promised for an on-sale must hold while both run on one
# Redis, and what server/README.md "Upgrading" says a mixed fleet does must be what it does.
#
#   A  OLD and NEW serve together under the --scope_limits file: event:* has max_units 4 per
#      person and capacity_units 40 (both releases count sales in the scope's sold count).
#      A1 120 buyers race for 2 units each in event:A, placing through one replica and paying
#         (with a payment reference) through the other at once: exactly 20 are granted, 100 are
#         refused SCOPE_SOLD_OUT (exit 8), and both replicas' GetScopeUsage say 40 sold.
#      A2 a payment's reference holds across releases: the same reference again through either
#         replica is OK (already paid), another is FAILED_PRECONDITION (exit 9) naming
#         PAID_WITH_OTHER_REFERENCE, whichever replica paid.
#      A3 10 buyers each send 4 concurrent PlaceHolds of 2 units in event:P, 2 through OLD and 2
#         through NEW: no buyer ever has more than 4 units live (2 grants each, 20 in all).
#      A4 what the notes say of runtime rules in a mixed fleet: NEW closes event:Z (CloseScope):
#         NEW refuses a hold there (SCOPE_CLOSED, exit 9), OLD still grants one (it reads no
#         runtime rule): so rules wait for the last old replica.
#      A5 a consumer group read through each release from the stream's start: each sees the 20
#         payments of A1 (made by both) as 20 distinct PAID events, one per order, nothing else.
#   B  OLD is stopped. NEW returns 1 unit of an order OLD paid (ReturnUnits): the scope's sold
#      count goes from 40 to 39, one buyer takes the unit, the next is sold out. A runtime rule on
#      event:B with a purchase cap of 2 units: a buyer who paid 2 there is refused a third
#      (USER_PURCHASE_LIMIT): the new release's features work once the old one is gone.
#
# Not in ctest (building the old release takes minutes; the cache is rolling_upgrade.sh's). Usage:
#   tests/upgrade/on_sale_upgrade.sh [--from REF] [--build DIR] [--cache DIR] [--keep]
#     --from REF   the release before runtime rules (default below: 67e9fd6)
#     --build DIR  where this release's orderhold-server and orderhold-cli are (default <repo>/build)
#     --cache DIR  where old releases are built (default <repo>/build-upgrade)
# Exit status 0 only when every check held.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# shellcheck source=tests/upgrade/lib.sh
source "${REPO}/tests/upgrade/lib.sh"
# The release before runtime scope rules: stop 64's, `git rev-parse 67e9fd6`.
upgrade_main on-sale-upgrade 67e9fd6607653e8e060f39e3e747b8682e5598c7 "$@"
mkdir -p "${WORK}/out"

LIMITS="${WORK}/limits.json"
echo '{"rules": [{"prefix": "event:", "max_units": 4, "capacity_units": 40}]}' >"${LIMITS}"

cli() { "${CLI}" --target="127.0.0.1:${PORT[$1]}" --timeout=5s "${@:2}"; }
sold() { cli "$1" --json scope-usage "$2" | jq -r '.soldUnits // 0'; }
rc_of() { local rc=0; "$@" >"${WORK}/out/last" 2>&1 || rc=$?; echo "${rc}"; }

FLAGS=(--max_holds=10 --reap_interval=200ms --scope_limits="${LIMITS}")
start_replica old old "${FLAGS[@]}"
start_replica new new "${FLAGS[@]}"

# --- A1: a sell-out across releases --------------------------------------------------------------
buyer() {  # buyer I OLD_PORT NEW_PORT: place 2 units in event:A through one, pay through the other
  local mine other rc=0
  if (($1 % 2 == 0)); then mine=$2 other=$3; else mine=$3 other=$2; fi
  "${CLI}" --target="127.0.0.1:${mine}" --timeout=5s place "a-$1" o1 --scope event:A \
    --quantity 2 --ttl 60s >/dev/null 2>"${WORK}/out/a-$1.err" || rc=$?
  if ((rc == 0)); then
    "${CLI}" --target="127.0.0.1:${other}" --timeout=5s pay "a-$1" o1 \
      --payment_reference "ref-$1" >/dev/null 2>>"${WORK}/out/a-$1.err" || rc=100
  fi
  echo "${rc}"
}
export -f buyer
export CLI WORK
rcs="$(seq 0 119 | xargs -P 12 -I{} bash -c "buyer {} ${PORT[old]} ${PORT[new]}")"
granted="$(grep -c '^0$' <<<"${rcs}" || true)"
sold_out="$(grep -c '^8$' <<<"${rcs}" || true)"
log "A1: 120 buyers of 2 for a capacity of 40: ${granted} granted and paid, ${sold_out} sold out"
check "exactly 20 buyers are granted and paid" "$([[ "${granted}" == 20 ]]; echo $?)"
check "the 100 others are RESOURCE_EXHAUSTED" "$([[ "${sold_out}" == 100 ]]; echo $?)"
check "each refusal is SCOPE_SOLD_OUT" \
  "$([[ "$(grep -l "is sold out" "${WORK}"/out/a-*.err | wc -l)" == 100 ]]; echo $?)"
check "both replicas count 40 sold" \
  "$([[ "$(sold old event:A)" == 40 && "$(sold new event:A)" == 40 ]]; echo $?)"

# --- A2: payment references across releases ------------------------------------------------------
paid_by_old="" paid_by_new=""
for i in $(seq 0 119); do
  [[ -s "${WORK}/out/a-${i}.err" ]] && continue
  if ((i % 2 == 1)) && [[ -z "${paid_by_old}" ]]; then paid_by_old=${i}; fi  # placed NEW, paid OLD
  if ((i % 2 == 0)) && [[ -z "${paid_by_new}" ]]; then paid_by_new=${i}; fi
done
for i in ${paid_by_old} ${paid_by_new}; do
  for r in old new; do
    check "a-${i}: the same reference again through ${r} is OK" \
      "$(rc_of cli "${r}" pay "a-${i}" o1 --payment_reference "ref-${i}")"
    rc="$(rc_of cli "${r}" pay "a-${i}" o1 --payment_reference "other-${i}")"
    check "a-${i}: another reference through ${r} is FAILED_PRECONDITION, PAID_WITH_OTHER_REFERENCE" \
      "$([[ "${rc}" == 9 ]] && grep -q "with another payment_reference" \
        "${WORK}/out/last"; echo $?)"
  done
done

# --- A3: one buyer's cap across releases ---------------------------------------------------------
placing=()
for u in $(seq 0 9); do
  for k in 0 1 2 3; do
    r=$([[ $((k % 2)) == 0 ]] && echo old || echo new)
    cli "${r}" place "p-${u}" "o${k}" --scope event:P --quantity 2 >/dev/null 2>&1 &
    placing+=($!)
  done
done
for pid in "${placing[@]}"; do wait "${pid}" || true; done
most=0 grants=0
for u in $(seq 0 9); do
  units="$(cli new --json list "p-${u}" --scope event:P | jq '[.holds[]?.quantity] | add // 0')"
  grants=$((grants + units / 2))
  ((units > most)) && most=${units}
done
log "A3: 10 buyers x 4 concurrent PlaceHolds of 2 units, half through each release: ${grants} grants"
check "no buyer has more than 4 units live (most: ${most})" "$([[ "${most}" -le 4 ]]; echo $?)"
check "each buyer got its 4 (20 grants)" "$([[ "${grants}" == 20 ]]; echo $?)"

# --- A4: runtime rules in a mixed fleet (what the notes say) --------------------------------------
cli new scope-close event:Z >/dev/null
check "NEW refuses a hold in the scope it closed (SCOPE_CLOSED)" \
  "$([[ "$(rc_of cli new place z-1 o1 --scope event:Z)" == 9 ]]; echo $?)"
check "OLD still grants one there: it reads no runtime rule (so rules wait for the last old one)" \
  "$(rc_of cli old place z-2 o1 --scope event:Z)"

# --- A5: one event per end, whichever release ended the hold or serves the watch -------------------
# A consumer group per release, each read from the stream's start through that release, acking:
# each sees the 20 payments of A1 (paid by both releases) as 20 distinct PAID events, one per
# order, and nothing else (nothing else ended).
for r in old new; do
  timeout 5 "${CLI}" --target="127.0.0.1:${PORT[${r}]}" watch --group "g-${r}" --consumer c \
    --ack --start earliest >"${WORK}/out/events-${r}" 2>/dev/null || true
  events="$(cat "${WORK}/out/events-${r}")"
  distinct="$(jq -r '.eventId' <<<"${events}" | sort -u | wc -l)"
  paid="$(jq -r 'select(.outcome == "PAID") | .hold.userId' <<<"${events}" | sort -u | wc -l)"
  log "A5: ${r}'s watch got $(wc -l <<<"${events}") events, ${distinct} distinct, ${paid} PAID orders"
  check "${r}'s watch: one PAID event per payment of either release (20), nothing else" \
    "$([[ "${distinct}" == 20 && "${paid}" == 20 &&
         "$(jq -r '.outcome' <<<"${events}" | sort -u)" == PAID ]]; echo $?)"
done

# --- B: OLD gone; a return and a purchase cap ------------------------------------------------------
kill -TERM "${PID[old]}"
wait "${PID[old]}" || true
log "old replica stopped"
check "NEW returns 1 unit of an order OLD paid" \
  "$(rc_of cli new return "a-${paid_by_old}" o1 1 --request_id "refund-${paid_by_old}")"
check "the scope's sold count goes back to 39" "$([[ "$(sold new event:A)" == 39 ]]; echo $?)"
check "the unit is for sale again" "$(rc_of cli new place late-1 o1 --scope event:A --quantity 1)"
check "and no more (40 again)" \
  "$([[ "$(rc_of cli new place late-2 o1 --scope event:A --quantity 1)" == 8 ]]; echo $?)"
cli new rule-put event:B --max_purchased_units 2 --capacity_units 100 >/dev/null
cli new place b-0 o0 --scope event:B --quantity 2 >/dev/null && cli new pay b-0 o0 >/dev/null
check "a buyer's units paid under the rule count toward its cap" \
  "$([[ "$(rc_of cli new place b-0 o1 --scope event:B --quantity 1)" == 8 ]] &&
     grep -q "max_purchased_units 2" "${WORK}/out/last"; echo $?)"

((FAILED == 0)) && log "on-sale upgrade: every check held" || log "on-sale upgrade: FAILED"
exit "${FAILED}"
