#!/usr/bin/python3
"""tests/soak/oracle.py DIR: the soak's oracle. Replays what the clients of a tests/soak/run.sh run
saw (DIR/calls-max.jsonl, DIR/calls.jsonl and DIR/calls-scope.jsonl from orderhold-bench
--call_log, DIR/events.jsonl
from orderhold-soak-watch, DIR/faults.jsonl, DIR/samples.jsonl, DIR/meta.json), checks OrderHold's
promises, prints a table and writes DIR/soak.json and DIR/soak.md. Exit status 1 when any
invariant was violated. Standard library only (Debian's python3).

Invariants (each violation is listed in soak.json with the order or user it concerns):
  over_grant       never more than max_holds holds answered created and live at once for one user.
                   A hold counts as certainly live from its PlaceHold's answer (t1) until the
                   earliest of: its expire_time (the latest one an OK ExtendHold answered), and
                   the start (t0) of any Pay/CancelHold/ReleaseHolds that ended it or may have
                   (answered OK, or with a code that leaves it open: CANCELLED, UNKNOWN,
                   DEADLINE_EXCEEDED, INTERNAL, UNAVAILABLE; a ReleaseHolds whose answer is
                   unknown may end any hold of that user placed before its start + 5 s). The
                   clocks agree: server, Redis and the clients share this machine's clock.
  scope_over_total never more holds (or units) answered created and certainly live at once in one
                   scope than its total (meta.json scope_totals: the servers' rule for the scopes
                   starting with its prefix, each scope on its own), the holds counted as for
                   over_grant (the same certainly-live intervals), their units from the place's
                   quantity.
  scope_over_capacity  never more units held and sold at once in one scope than its capacity
                   (meta.json scope_capacity: the rule's prefix and capacity_units, each scope
                   starting with it on its own): the units of its holds answered created and
                   certainly live (as for over_grant), plus those of its holds certainly paid, each
                   from its start (the created answer's t1, or, earlier or without one, the moment
                   it was certainly paid) for ever: a paid hold's units are held, then sold, and
                   never given back. Certainly paid: a Pay answered OK (already_paid or not), by
                   its answer; or a PAID event, by its end_time + 1 ms (Redis' ms, truncated).
                   A Pay whose answer is unknown counts only through its event.
  user_over_purchase_cap  never more units held and bought at once by one user in the scope with a
                   purchase cap (meta.json purchase_cap: the runtime rule's exact scope and
                   max_purchased_units; skipped without it) than the cap: the units of the user's
                   holds there answered created and certainly live (as for over_grant), plus those
                   of the user's holds there certainly paid, each from its start for ever, counted
                   as for scope_over_capacity (a Pay adds the hold's units to the user's purchases;
                   CancelHold and expiry give nothing back, and the load returns no units).
  list_over_limit  a ListHolds answered more than max_holds holds.
  lost_end         a hold answered created got no event (after dedup on event_id).
  ended_twice      two distinct events (event_ids) for one hold, or two calls that each answered
                   that they ended it (Pay and CancelHold OK, neither already_*).
  wrong_outcome    an event's outcome contradicts an answer: Pay answered OK (not already_paid)
                   but the event is not PAID; CancelHold or ReleaseHolds answered ending it but the
                   event is not CANCELLED; a PAID event with no Pay of that order sent, or a
                   CANCELLED one with no CancelHold of it nor ReleaseHolds of its user.
  wrong_end_time   an event's end_time outside the call that answered it ended the hold (Pay,
                   CancelHold, ReleaseHolds: between its start and its answer, Redis' ms), or an
                   EXPIRED event whose end_time is not the hold's expire_time, or is before the
                   latest expire_time an answer gave.
  phantom_event    an event of an order no PlaceHold ever named, or of one whose PlaceHold was
                   refused (a code that says nothing was written: RESOURCE_EXHAUSTED, ...).
  rss_growth, fd_growth   server replica 0 (never killed): over the load, the highest RSS in the
                   last quarter exceeds the highest in the second quarter by more than
                   max(10 %, 8 MiB); open descriptors by more than 16. Judged only on runs with
                   5 minutes of load or more (the first quarter is the warm-up).
  redis_memory     after every hold expired and the retentions passed: more keys than the
                   baseline taken before the first call (the reapers' partition leases left out:
                   they live while the servers run; the scopes' units-sold counters ss:<scope> and
                   the buyers' purchases under a runtime rule pb:<user><NUL><scope>, which never
                   expire, counted apart), or their MEMORY USAGE summed more than
                   64 KiB above it (1 KiB per event partition: the group's consumers, registered
                   on first read). used_memory is reported, not judged: it also counts buffers
                   and the replication backlog, which the keys do not own.
"""
import bisect
import collections
import json
import math
import os
import sys

# gRPC codes after which a call may or may not have taken effect.
AMBIGUOUS = {1, 2, 4, 13, 14}
CODE_NAMES = {0: "OK", 1: "CANCELLED", 2: "UNKNOWN", 3: "INVALID_ARGUMENT", 4: "DEADLINE_EXCEEDED",
              5: "NOT_FOUND", 6: "ALREADY_EXISTS", 7: "PERMISSION_DENIED",
              8: "RESOURCE_EXHAUSTED", 9: "FAILED_PRECONDITION", 10: "ABORTED",
              11: "OUT_OF_RANGE", 12: "UNIMPLEMENTED", 13: "INTERNAL", 14: "UNAVAILABLE",
              15: "DATA_LOSS", 16: "UNAUTHENTICATED"}
PAID, CANCELLED, EXPIRED = 1, 2, 3
OUTCOME_NAMES = {PAID: "PAID", CANCELLED: "CANCELLED", EXPIRED: "EXPIRED"}
RELEASE_REACH_MS = 5000  # an unanswered ReleaseHolds may still run this long after its start
MAX_LISTED = 20
# What the keys may hold more than at the baseline once everything ended: per event partition (64)
# the consumer group's consumers, registered on their first read, and an emptied stream's node.
KEY_BYTES_SLACK = 64 * 1024  # violations listed per kind in the output


class Order:
    __slots__ = ("user", "placed", "refused", "ack", "start", "exp", "end_cand", "answered_ends",
                 "pay_sent", "cancel_sent", "scope", "units", "paid_at")

    def __init__(self, user):
        self.user = user
        self.placed = False  # a PlaceHold named it
        self.refused = True  # every PlaceHold of it said nothing was written
        self.ack = False  # answered created
        self.start = None  # ms: the created answer's t1
        self.exp = 0  # ms: the latest expire_time answered
        self.end_cand = math.inf  # ms: earliest start of a call that ended it or may have
        self.answered_ends = []  # outcomes the answers say they made
        self.pay_sent = False
        self.cancel_sent = False
        self.scope = ""  # the place's scope ("s"), "" when unscoped
        self.units = 1  # its quantity ("q")
        self.paid_at = math.inf  # ms: from then on certainly paid (a Pay's OK answer, a PAID event)


def read_jsonl(path):
    if not os.path.exists(path):
        return
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                try:
                    yield json.loads(line)
                except json.JSONDecodeError:
                    # The last line of a killed writer may be cut; count, do not fail.
                    yield {"_bad": line}


def data_keys(path):
    """Keys and their MEMORY USAGE from run.sh's scan (name type pttl bytes per line), leaving out
    the reapers' partition leases (`:lease`, a 3 s TTL renewed while a server runs: not data), and
    counting apart what never expires by design: the scopes' units-sold counters
    (`<prefix>:{<partition>}:ss:<scope>`, one per scope ever sold from) and the buyers' purchases
    under a scope's runtime rule (`<prefix>:{<partition>}:pb:<user><NUL><scope>`, one per user who
    paid there while the rule has no expire_time). redis-cli prints a name only up to its NUL, so
    a purchases line reads `<prefix>:{<p>}:pb:<user> none -2` (TYPE and PTTL of the cut name)."""
    keys, size, sold, purchases = 0, 0, 0, 0
    with open(path) as f:
        for line in f:
            fields = line.split()
            if fields and fields[0].partition("}:")[2].startswith("pb:"):
                purchases += 1
                continue
            if len(fields) != 4 or fields[0].endswith(":lease"):
                continue
            if fields[0].partition("}:")[2].startswith("ss:"):
                sold += 1
                continue
            keys += 1
            size += int(fields[3]) if fields[3].isdigit() else 0
    return {"data_keys": keys, "data_key_bytes": size, "sold_counters": sold,
            "purchase_counters": purchases}


def held_or_sold(od):
    """When a hold's units count in what a scope holds plus sold (or a user holds plus bought):
    (t ms, +1 or -1, certainly paid) points. A certainly-paid hold from its start (the created
    answer's t1, or the moment it was certainly paid, if earlier or unanswered) for ever: its units
    are held, then sold, and never given back; any other hold answered created over its
    certainly-live interval (as for over_grant); a hold neither answered created nor certainly
    paid, not at all."""
    if od.paid_at < math.inf:
        return [(min(od.paid_at, od.start) if od.ack else od.paid_at, 1, True)]
    if od.ack:
        end = min(od.exp, od.end_cand)
        if end > od.start:
            return [(od.start, 1, False), (end, -1, False)]
    return []


def percentile(sorted_values, q):
    if not sorted_values:
        return None
    k = max(0, min(len(sorted_values) - 1, math.ceil(q * len(sorted_values)) - 1))
    return sorted_values[k]


def main(out_dir):
    meta = json.load(open(os.path.join(out_dir, "meta.json")))
    max_holds = meta["max_holds"]
    faults = list(read_jsonl(os.path.join(out_dir, "faults.jsonl")))
    violations = collections.defaultdict(list)
    orders = {}
    releases = collections.defaultdict(list)  # user -> [(t0 ms, order ids or None if unknown)]
    phases = collections.defaultdict(lambda: {"calls": 0, "codes": collections.Counter(),
                                              "lat": []})
    bad_lines = 0
    fault_windows = sorted((f["t0"], f["t1"] + 2_000_000, f["fault"]) for f in faults)

    window_starts = [w[0] for w in fault_windows]

    def phase_of(t0):
        # The latest window starting at or before t0 (windows do not overlap: one fault at a time).
        i = bisect.bisect_right(window_starts, t0) - 1
        if i >= 0 and t0 <= fault_windows[i][1]:
            return fault_windows[i][2]
        return "steady"

    totals = collections.Counter()
    codes = collections.Counter()
    for name in ("calls-max.jsonl", "calls.jsonl", "calls-scope.jsonl"):
        for c in read_jsonl(os.path.join(out_dir, name)):
            if "_bad" in c:
                bad_lines += 1
                continue
            m, code, t0, t1 = c["m"], c["c"], c["t0"] / 1000.0, c["t1"] / 1000.0
            totals[m] += 1
            codes[CODE_NAMES.get(code, str(code))] += 1
            ph = phases["max (closed loop)" if name == "calls-max.jsonl" else
                        "scope load" if name == "calls-scope.jsonl" else phase_of(c["t0"])]
            ph["calls"] += 1
            ph["codes"][CODE_NAMES.get(code, str(code))] += 1
            ph["lat"].append(t1 - t0)
            if m == "list":
                if code == 0 and c["n"] > max_holds:
                    violations["list_over_limit"].append({"user": c["u"], "n": c["n"], "t1": c["t1"]})
                continue
            if m == "release":
                if code == 0:
                    releases[c["u"]].append((t0, c["released"]))
                    for o in c["released"]:
                        od = orders.get(o)
                        if od is None:
                            od = orders[o] = Order(c["u"])
                        od.end_cand = min(od.end_cand, t0)
                        od.answered_ends.append((CANCELLED, t0, t1))
                        od.cancel_sent = True
                elif code in AMBIGUOUS:
                    releases[c["u"]].append((t0, None))
                continue
            o = c["o"]
            od = orders.get(o)
            if od is None:
                od = orders[o] = Order(c["u"])
            if m == "place":
                od.placed = True
                if "s" in c:
                    od.scope, od.units = c["s"], c["q"]
                if code == 0 or code in AMBIGUOUS:
                    od.refused = False
                if code == 0:
                    if c["created"]:
                        od.ack = True
                        od.start = t1
                        od.exp = max(od.exp, c["exp"])
                    else:
                        totals["place_not_created_ok"] += 1
            elif m == "extend":
                if code == 0:
                    od.exp = max(od.exp, c["exp"])
            elif m in ("pay", "cancel"):
                if m == "pay":
                    od.pay_sent = True
                else:
                    od.cancel_sent = True
                if code == 0 or code in AMBIGUOUS:
                    od.end_cand = min(od.end_cand, t0)
                if code == 0 and not c["already"]:
                    od.answered_ends.append((PAID if m == "pay" else CANCELLED, t0, t1))
                if code == 0 and m == "pay":  # paid by this call or before it (already_paid)
                    od.paid_at = min(od.paid_at, t1)

    # Unknown-outcome releases: each may have ended any hold of the user placed before its start +
    # RELEASE_REACH_MS, at the later of its start and the hold's. Per hold, that is the hold's
    # start itself when such a release started in (start - reach, start], else the first release
    # start after it (sorted starts, bisect: popular users have thousands of each).
    unknown_releases = {u: sorted(t0 for t0, released in rs if released is None)
                        for u, rs in releases.items()}
    for od in orders.values():
        starts = unknown_releases.get(od.user)
        if not starts or od.start is None:
            continue
        i = bisect.bisect_right(starts, od.start - RELEASE_REACH_MS)
        if i < len(starts):
            od.end_cand = min(od.end_cand, od.start if starts[i] <= od.start else starts[i])

    # Events, deduplicated on event_id. Only the acking consumers' deliveries count as delivered:
    # what a stuck consumer (one that never acks, "stuck" in its name) was sent must reach an
    # acking one too, after --event_ack_timeout; the delay from the stuck consumer's copy to the
    # first acking one is the redelivery delay.
    events = {}
    stuck_first = {}  # event id -> when a stuck consumer first got it (µs)
    redelivery_delays = []  # ms, per event a stuck consumer got first
    deliveries = 0
    redeliveries = 0
    stuck_deliveries = 0
    watch_ends = collections.Counter()
    ack_errors = 0
    for e in read_jsonl(os.path.join(out_dir, "events.jsonl")):
        if "_bad" in e:
            bad_lines += 1
        elif "id" in e and "stuck" in e.get("c", ""):
            stuck_deliveries += 1
            if e["id"] not in events:
                stuck_first.setdefault(e["id"], e["t"])
        elif "id" in e:
            deliveries += 1
            if e["dc"] > 1 or e["id"] in events:
                redeliveries += 1
            if e["id"] not in events and e["id"] in stuck_first:
                redelivery_delays.append((e["t"] - stuck_first[e["id"]]) / 1000.0)
            events.setdefault(e["id"], e)
        elif "watch_end" in e:
            watch_ends[CODE_NAMES.get(e["watch_end"], str(e["watch_end"]))] += 1
        elif "ack_error" in e:
            ack_errors += 1
    by_order = collections.defaultdict(list)
    for eid, e in events.items():
        by_order[e["o"]].append(e)
    outcomes = collections.Counter()
    for o, evs in by_order.items():
        od = orders.get(o)
        for e in evs:
            outcomes[OUTCOME_NAMES.get(e["out"], str(e["out"]))] += 1
        if od is None or not od.placed:
            violations["phantom_event"].append({"order": o, "user": evs[0]["u"], "why": "never placed"})
            continue
        if od.refused:
            violations["phantom_event"].append({"order": o, "user": od.user, "why": "placement refused"})
        if len(evs) > 1:
            violations["ended_twice"].append({"order": o, "user": od.user,
                                              "events": sorted(e["id"] for e in evs)})
        for e in evs:
            if e["out"] == PAID:  # Redis' ms, truncated: paid by the next one
                od.paid_at = min(od.paid_at, e["end"] + 1)
        e = evs[0]
        for answered, t0, t1 in od.answered_ends:
            if e["out"] != answered:
                violations["wrong_outcome"].append({"order": o, "user": od.user,
                                                    "answered": OUTCOME_NAMES[answered],
                                                    "event": OUTCOME_NAMES.get(e["out"], e["out"])})
            elif not t0 - 1 <= e["end"] <= t1 + 1:  # Redis ms (truncated) within the call
                violations["wrong_end_time"].append({"order": o, "user": od.user, "end": e["end"],
                                                     "call": [t0, t1]})
        if e["out"] == EXPIRED and (e["end"] != e["exp"] or (od.ack and e["end"] < od.exp)):
            violations["wrong_end_time"].append({"order": o, "user": od.user, "end": e["end"],
                                                 "expire_time": e["exp"], "answered_exp": od.exp})
        if e["out"] == PAID and not od.pay_sent:
            violations["wrong_outcome"].append({"order": o, "user": od.user, "event": "PAID",
                                                "why": "no Pay of it was sent"})
        if e["out"] == CANCELLED and not od.cancel_sent and not releases.get(od.user):
            violations["wrong_outcome"].append({"order": o, "user": od.user, "event": "CANCELLED",
                                                "why": "no CancelHold or ReleaseHolds was sent"})
    acked_holds = 0
    for o, od in orders.items():
        if len(od.answered_ends) > 1:
            violations["ended_twice"].append({"order": o, "user": od.user,
                                              "answers": [OUTCOME_NAMES[x[0]] for x in od.answered_ends]})
        if od.ack:
            acked_holds += 1
            if o not in by_order:
                violations["lost_end"].append({"order": o, "user": od.user, "exp": od.exp})

    # Over-grant: a sweep over each user's certainly-live intervals.
    per_user = collections.defaultdict(list)
    for o, od in orders.items():
        if od.ack:
            end = min(od.exp, od.end_cand)
            if end > od.start:
                per_user[od.user].append((od.start, 1, o))
                per_user[od.user].append((end, -1, o))
    max_live_seen = 0
    for user, points in per_user.items():
        points.sort(key=lambda p: (p[0], p[1]))
        live = set()
        for t, delta, o in points:
            if delta < 0:
                live.discard(o)
            else:
                live.add(o)
                max_live_seen = max(max_live_seen, len(live))
                if len(live) > max_holds:
                    violations["over_grant"].append({"user": user, "t_ms": t, "live": sorted(live)})

    # Scope totals: the same sweep per scope, over every user's holds of that scope.
    scope_totals = meta.get("scope_totals") or None
    most_in_scope = {}
    if scope_totals:
        per_scope = collections.defaultdict(list)
        for o, od in orders.items():
            if od.ack and od.scope.startswith(scope_totals["prefix"]):
                end = min(od.exp, od.end_cand)
                if end > od.start:
                    per_scope[od.scope].append((od.start, 1, o, od.units))
                    per_scope[od.scope].append((end, -1, o, od.units))
        for scope, points in per_scope.items():
            points.sort(key=lambda p: (p[0], p[1]))
            holds = units = most_holds = most_units = 0
            reported = False
            for t, delta, o, q in points:
                holds += delta
                units += delta * q
                most_holds, most_units = max(most_holds, holds), max(most_units, units)
                if delta > 0 and not reported and (holds > scope_totals["holds"] or
                                                   units > scope_totals["units"]):
                    reported = True  # one per scope: the first instant over
                    violations["scope_over_total"].append({"scope": scope, "t_ms": t,
                                                           "holds": holds, "units": units})
            most_in_scope[scope] = {"holds": most_holds, "units": most_units,
                                    "created": len(points) // 2}

    # Scope capacity: held plus sold units per scope. A paid hold counts from its start (or from
    # when it was certainly paid, if earlier or unanswered) for ever: held until its Pay, sold
    # after; any other, over its certainly-live interval as above (held_or_sold).
    scope_capacity = meta.get("scope_capacity") or None
    most_sold_in_scope = {}
    if scope_capacity:
        per_scope = collections.defaultdict(list)
        for o, od in orders.items():
            if not od.scope.startswith(scope_capacity["prefix"]):
                continue
            for t, delta, is_paid in held_or_sold(od):
                per_scope[od.scope].append((t, delta, o, od.units, is_paid))
        for scope, points in per_scope.items():
            points.sort(key=lambda p: (p[0], p[1]))
            units = paid = most_units = 0
            reported = False
            for t, delta, o, q, is_paid in points:
                units += delta * q
                paid += q if is_paid else 0
                most_units = max(most_units, units)
                if delta > 0 and not reported and units > scope_capacity["units"]:
                    reported = True  # one per scope: the first instant over
                    violations["scope_over_capacity"].append({"scope": scope, "t_ms": t,
                                                              "units": units, "paid_units": paid})
            most_sold_in_scope[scope] = {"units": most_units, "paid_units": paid,
                                         "paid": sum(1 for p in points if p[4])}

    # Purchase cap: per user, in the runtime rule's exact scope, held plus bought units, each hold
    # counted as for the capacity (held_or_sold): what the server adds up is the user's live units
    # there plus the units of the user's Pays there (a Pay moves a hold's units from the one to the
    # other; CancelHold and expiry give nothing back), and the oracle counts no more than it.
    purchase_cap = meta.get("purchase_cap") or None
    held_bought = {}
    if purchase_cap:
        cap_scope, cap = purchase_cap["scope"], purchase_cap["units"]
        per_buyer = collections.defaultdict(list)
        for o, od in orders.items():
            if od.scope == cap_scope:
                for t, delta, is_paid in held_or_sold(od):
                    per_buyer[od.user].append((t, delta, o, od.units, is_paid))
        most_units = at_cap = paid_total = 0
        for user, points in per_buyer.items():
            points.sort(key=lambda p: (p[0], p[1]))
            units = paid = user_most = 0
            counted = set()
            reported = False
            for t, delta, o, q, is_paid in points:
                units += delta * q
                paid += q if is_paid else 0
                if delta > 0:
                    counted.add(o)
                else:
                    counted.discard(o)
                user_most = max(user_most, units)
                if delta > 0 and not reported and units > cap:
                    reported = True  # one per user: the first instant over
                    violations["user_over_purchase_cap"].append(
                        {"user": user, "scope": cap_scope, "t_ms": t, "units": units,
                         "paid_units": paid, "orders": sorted(counted)})
            most_units = max(most_units, user_most)
            if user_most >= cap:
                at_cap += 1
            paid_total += paid
        held_bought[cap_scope] = {"users": len(per_buyer), "users_at_cap": at_cap,
                                  "most_units": most_units, "paid_units": paid_total}

    # Server replica 0's RSS and descriptors over the load.
    samples = [s for s in read_jsonl(os.path.join(out_dir, "samples.jsonl")) if "_bad" not in s]
    start_us, end_us = meta["load_start_us"], meta["load_end_us"]
    load_samples = [s for s in samples if start_us <= s["t"] <= end_us and s["servers"][0]["rss"]]
    resources = {}
    # Judged on runs of 5 minutes or more: a shorter one is mostly warm-up (allocator arenas,
    # gRPC's and the Redis client's buffers growing to the load), reported only.
    judge_resources = meta["load_s"] >= 300
    if len(load_samples) >= 4:
        q = len(load_samples) // 4
        second = load_samples[q:2 * q]
        last = load_samples[len(load_samples) - q:]
        rss2 = max(s["servers"][0]["rss"] for s in second)
        rss4 = max(s["servers"][0]["rss"] for s in last)
        fd2 = max(s["servers"][0]["fds"] for s in second)
        fd4 = max(s["servers"][0]["fds"] for s in last)
        resources = {"rss_second_quarter_max": rss2, "rss_last_quarter_max": rss4,
                     "fds_second_quarter_max": fd2, "fds_last_quarter_max": fd4,
                     "rss_max_any_replica": max(x["rss"] or 0 for s in samples for x in s["servers"]),
                     "samples": len(load_samples)}
        resources["judged"] = judge_resources
        if judge_resources and rss4 - rss2 > max(0.10 * rss2, 8 << 20):
            violations["rss_growth"].append({"from": rss2, "to": rss4})
        if judge_resources and fd4 - fd2 > 16:
            violations["fd_growth"].append({"from": fd2, "to": fd4})
    base, end = meta["redis_baseline"], meta["redis_end"]
    base.update(data_keys(os.path.join(out_dir, "keys-baseline.txt")))
    end.update(data_keys(os.path.join(out_dir, "keys-end.txt")))
    if (end["data_keys"] > base["data_keys"] or
            end["data_key_bytes"] - base["data_key_bytes"] > KEY_BYTES_SLACK):
        violations["redis_memory"].append({"baseline": base, "end": end})

    # Report.
    delays = sorted(redelivery_delays)
    delay_figures = ({"count": len(delays), "p50": round(percentile(delays, 0.5), 1),
                      "p99": round(percentile(delays, 0.99), 1), "max": round(delays[-1], 1)}
                     if delays else {"count": 0})
    kinds = ["over_grant", "scope_over_total", "scope_over_capacity", "user_over_purchase_cap",
             "list_over_limit", "lost_end", "ended_twice", "wrong_outcome", "wrong_end_time",
             "phantom_event", "rss_growth", "fd_growth", "redis_memory"]
    fault_counts = collections.Counter(f["fault"] for f in faults)
    phase_rows = []
    for name in sorted(phases, key=lambda n: (n != "max (closed loop)", n != "steady", n)):
        ph = phases[name]
        lat = sorted(ph["lat"])
        phase_rows.append({"phase": name, "calls": ph["calls"],
                           "ok_share": round(ph["codes"]["OK"] / ph["calls"], 4) if ph["calls"] else None,
                           "codes": dict(ph["codes"].most_common()),
                           "p50_ms": round(percentile(lat, 0.5), 2) if lat else None,
                           "p99_ms": round(percentile(lat, 0.99), 2) if lat else None})
    result = {
        "meta": meta,
        "calls": dict(totals), "codes": dict(codes.most_common()),
        "holds_answered_created": acked_holds, "orders_named": len(orders),
        "events": {"distinct": len(events), "deliveries": deliveries,
                   "redeliveries": redeliveries, "by_outcome": dict(outcomes),
                   "stuck_deliveries": stuck_deliveries,
                   "stuck_never_redelivered": len(set(stuck_first) - set(events)),
                   "redelivery_delay_ms": delay_figures,
                   "watch_ends": dict(watch_ends), "ack_errors": ack_errors},
        "max_live_per_user_seen": max_live_seen,
        "max_live_per_scope_seen": most_in_scope,
        "max_held_sold_per_scope_seen": most_sold_in_scope,
        "max_held_bought_per_user_seen": held_bought,
        "faults": dict(fault_counts), "faults_total": len(faults),
        "phases": phase_rows, "resources": resources,
        "unparsable_lines": bad_lines,
        "violations": {k: len(violations[k]) for k in kinds},
        "violations_total": sum(len(violations[k]) for k in kinds),
        "violation_examples": {k: violations[k][:MAX_LISTED] for k in kinds if violations[k]},
    }
    json.dump(result, open(os.path.join(out_dir, "soak.json"), "w"), indent=1)

    md = []
    md.append(f"Soak, {meta['mode']}{' (smoke)' if meta['smoke'] else ''}: {meta['load_s']} s at "
              f"{meta['rate']} calls/s (max {meta['max_rate']:.0f}), {meta['servers']} replicas, "
              f"mix {meta['mix']}, {meta['users']} users zipf, ttl {meta['ttl_s']} s; {meta['machine']}")
    md.append("")
    md.append(f"calls {sum(phases[p]['calls'] for p in phases)}: " +
              ", ".join(f"{k} {v}" for k, v in codes.most_common()))
    md.append(f"holds answered created {acked_holds}; events {len(events)} distinct "
              f"({', '.join(f'{k} {v}' for k, v in outcomes.most_common())}), {deliveries} "
              f"deliveries, {redeliveries} redeliveries; watch reconnects "
              f"{sum(watch_ends.values())}, failed acks {ack_errors}; max live per user seen "
              f"{max_live_seen} (limit {max_holds})")
    if stuck_deliveries:
        md.append(f"a consumer that never acks was sent {stuck_deliveries} events; "
                  f"{delay_figures['count']} reached an acking consumer after it, redelivery delay "
                  f"p50 {delay_figures.get('p50')} ms, p99 {delay_figures.get('p99')} ms, max "
                  f"{delay_figures.get('max')} ms (--event_ack_timeout={meta.get('event_ack_timeout_s', 5)}s); "
                  f"{result['events']['stuck_never_redelivered']} never did (each a lost_end if "
                  f"its hold was answered)")
    if scope_totals:
        md.append(f"scopes with a total ({scope_totals['prefix']}*: {scope_totals['holds']} holds, "
                  f"{scope_totals['units']} units): " +
                  ", ".join(f"{k} {v['created']} created, at most {v['holds']} holds / "
                            f"{v['units']} units live at once" for k, v in sorted(most_in_scope.items())))
    if scope_capacity:
        md.append(f"scopes with a capacity ({scope_capacity['prefix']}*: {scope_capacity['units']} "
                  f"units held + sold): " +
                  ", ".join(f"{k} {v['paid']} paid ({v['paid_units']} units), at most {v['units']} "
                            f"units held + sold at once" for k, v in sorted(most_sold_in_scope.items())))
    if purchase_cap:
        v = held_bought[purchase_cap["scope"]]
        refusals = purchase_cap.get("refusals_seen")
        md.append(f"purchase cap ({purchase_cap['scope']}: {purchase_cap['units']} units held + "
                  f"bought per user): {v['users']} users, {v['users_at_cap']} reached it, at most "
                  f"{v['most_units']} units by one user, {v['paid_units']} units paid" +
                  ("" if refusals is None else
                   f"; at least {refusals} PlaceHolds refused USER_PURCHASE_LIMIT (servers' "
                   f"orderhold_holds_rejected_total at the load's end: a killed replica's count restarts "
                   f"at 0)"))
    md.append(f"events trimmed by --event_retention={meta['event_retention_s']}s before the group "
              f"acked them: {meta['trimmed_unacked']} (server logs); Redis: {meta['redis_flags']}")
    md.append("faults injected " + str(len(faults)) + ": " +
              ", ".join(f"{k} {v}" for k, v in sorted(fault_counts.items())))
    if resources:
        md.append(f"server replica 0: RSS {resources['rss_second_quarter_max'] / 2**20:.1f} -> "
                  f"{resources['rss_last_quarter_max'] / 2**20:.1f} MiB (2nd -> last quarter max), "
                  f"fds {resources['fds_second_quarter_max']} -> {resources['fds_last_quarter_max']}"
                  f"{'' if resources['judged'] else ' (not judged: under 5 minutes of load)'}")
    md.append(f"Redis keys (leases, units-sold counters and purchases left out): {base['data_keys']} "
              f"keys / {base['data_key_bytes']} B before, {end['data_keys']} keys / "
              f"{end['data_key_bytes']} B after, {end['sold_counters']} units-sold counters, "
              f"{end['purchase_counters']} buyers' purchases (used_memory "
              f"{base['used_memory']} -> {end['used_memory']} B)")
    md.append("")
    md.append("| invariant | violations |")
    md.append("|---|---:|")
    for k in kinds:
        md.append(f"| {k} | {len(violations[k])} |")
    md.append("")
    md.append("| phase | calls | OK | p50 ms | p99 ms | other codes |")
    md.append("|---|---:|---:|---:|---:|---|")
    for r in phase_rows:
        other = ", ".join(f"{k} {v}" for k, v in r["codes"].items() if k != "OK")
        md.append(f"| {r['phase']} | {r['calls']} | {100 * (r['ok_share'] or 0):.1f} % | "
                  f"{r['p50_ms']} | {r['p99_ms']} | {other} |")
    text = "\n".join(md) + "\n"
    open(os.path.join(out_dir, "soak.md"), "w").write(text)
    sys.stdout.write(text)
    if result["violations_total"]:
        sys.stdout.write("\nVIOLATIONS (first of each kind):\n")
        for k, v in result["violation_examples"].items():
            sys.stdout.write(f"  {k}: {json.dumps(v[:3])}\n")
        return 1
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.stderr.write("usage: oracle.py DIR\n")
        sys.exit(64)
    sys.exit(main(sys.argv[1]))
