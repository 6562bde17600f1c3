#!/usr/bin/env python3
"""tests/upgrade/check_upgrade.py: the invariants of rolling_upgrade.sh, checked from what it saw.

Reads the work directory rolling_upgrade.sh fills:
  ledger/*.tsv      one line per orderhold-cli call: phase replica op user order ttl_ms rc t_start
                    t_end stdout(JSON) stderr (t_* local Unix seconds, same clock as Redis' TIME)
  events/*.jsonl    the HoldEvents each watcher (one consumer per replica, one group) printed
  streams/*.json    XRANGE of every partition's event stream (redis-cli --json)
  pending           pending (unacked) entries of the group, summed over the streams
  violations        violations the shell script found itself
  quiet             "user order" per line: the quiet users (untouched from their placement until
                    phase C's migration sweep) and their live hold, which phases S and R leave alone
Modes:
  --wait SECONDS    waits until every placed order but the quiet holds has an event; lists the
                    missing ones and fails
  --orders          prints "user order" for every placed order but the quiet users' ones
  (none)            checks everything, prints the summary and the violations; exit 1 on any
"""

import argparse
import collections
import datetime
import glob
import json
import os
import re
import sys
import time

MAX_HOLDS = 3
OUTCOMES = {"1": "PAID", "2": "CANCELLED", "3": "EXPIRED"}
ENDED_RE = re.compile(r"already ended: (PAID|CANCELLED|EXPIRED) at (\S+Z)")


def parse_ms(ts):
    """RFC 3339 UTC timestamp (proto JSON, 'Z') -> Unix milliseconds, exactly."""
    base, _, frac = ts.rstrip("Z").partition(".")
    dt = datetime.datetime.strptime(base, "%Y-%m-%dT%H:%M:%S").replace(
        tzinfo=datetime.timezone.utc)
    return int(dt.timestamp()) * 1000 + int((frac + "000")[:3])


Call = collections.namedtuple(
    "Call", "phase replica op user order ttl rc t0 t1 out err")


def read_ledger(work):
    calls = []
    for path in sorted(glob.glob(os.path.join(work, "ledger", "*.tsv"))):
        with open(path, encoding="utf-8") as f:
            for line in f:
                fields = line.rstrip("\n").split("\t")
                if len(fields) != 11:
                    raise SystemExit(f"{path}: malformed ledger line: {line!r}")
                phase, replica, op, user, order, ttl, rc, t0, t1, out, err = fields
                body = json.loads(out) if out.strip() else None
                calls.append(Call(phase, replica, op, user, order,
                                  int(ttl) if ttl else None, int(rc),
                                  int(float(t0) * 1000), int(float(t1) * 1000), body, err))
    calls.sort(key=lambda c: c.t0)
    return calls


def read_events(work):
    """Deliveries, by watcher: [(consumer, event)]."""
    out = []
    for path in sorted(glob.glob(os.path.join(work, "events", "*.jsonl"))):
        consumer = os.path.basename(path).split(".")[0]
        with open(path, encoding="utf-8") as f:
            for line in f:
                line = line.strip()
                if line:
                    out.append((consumer, json.loads(line)))
    return out


def read_streams(work):
    """Stream entries: [{'id':, 'u':, 'o':, 'x':, 'e':, 't':, ['m':]}]."""
    entries = []
    for path in sorted(glob.glob(os.path.join(work, "streams", "*.json"))):
        with open(path, encoding="utf-8") as f:
            for entry_id, fields in json.load(f) or []:
                e = dict(zip(fields[0::2], fields[1::2]))
                e["id"] = entry_id
                entries.append(e)
    return entries


class Orders:
    """What the calls say about each order: placement, ttl, expiry."""

    def __init__(self, calls, violations):
        self.placed = {}  # order -> dict(user, ttl, expire, replica, phase)
        for c in calls:
            if c.op != "place" or c.rc != 0 or not c.out:
                continue
            expire = parse_ms(c.out["hold"]["expireTime"])
            known = self.placed.get(c.order)
            if c.out.get("created"):
                if known:
                    violations.append(
                        f"{c.order}: created twice (again via {c.replica}, {c.phase})")
                    continue
                self.placed[c.order] = dict(user=c.user, ttl=c.ttl, expire=expire,
                                            replica=c.replica, phase=c.phase)
        # A retry whose first attempt's answer was lost (UNAVAILABLE) is the only way to learn
        # the placement from created=false.
        for c in calls:
            if c.op == "place" and c.rc == 0 and c.out and not c.out.get("created") \
                    and c.order not in self.placed:
                lost = any(d.op == "place" and d.order == c.order and d.rc in (4, 14)
                           for d in calls)
                if lost:
                    self.placed[c.order] = dict(user=c.user, ttl=c.ttl,
                                                expire=parse_ms(c.out["hold"]["expireTime"]),
                                                replica=c.replica, phase=c.phase)
                else:
                    violations.append(f"{c.order}: created=false via {c.replica} but never created")


def read_quiet(work):
    """The quiet users and their quiet holds' order ids (rolling_upgrade.sh's file)."""
    path = os.path.join(work, "quiet")
    users, orders = set(), set()
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    user, order = line.split()
                    users.add(user)
                    orders.add(order)
    return users, orders


def wait_for_events(work, seconds):
    deadline = time.time() + seconds
    _, quiet = read_quiet(work)
    while True:
        violations = []
        orders = Orders(read_ledger(work), violations)
        seen = {e["hold"]["orderId"] for _, e in read_events(work)}
        missing = sorted(set(orders.placed) - seen - quiet)
        if not missing:
            return 0
        if time.time() > deadline:
            print(f"no event for {len(missing)} placed order(s): {' '.join(missing[:20])}",
                  file=sys.stderr)
            return 1
        time.sleep(0.3)


def check(work):
    violations = []
    calls = read_ledger(work)
    orders = Orders(calls, violations)
    placed = orders.placed
    deliveries = read_events(work)
    stream = read_streams(work)

    # --- one event per hold: the streams (ground truth) and what the watchers got ---------------
    by_order_stream = collections.defaultdict(list)
    for e in stream:
        by_order_stream[e["o"]].append(e)
    events = {}  # event_id -> event (deduplicated deliveries)
    consumers_of = collections.defaultdict(set)
    redelivered = 0
    for consumer, e in deliveries:
        events.setdefault(e["eventId"], e)
        consumers_of[e["eventId"]].add(consumer)
        if e.get("deliveryCount", 1) > 1:
            redelivered += 1
    by_order_watch = collections.defaultdict(list)
    for e in events.values():
        by_order_watch[e["hold"]["orderId"]].append(e)

    end = {}  # order -> (outcome, end_ms), from the stream
    for order, info in placed.items():
        entries = by_order_stream.get(order, [])
        watched = by_order_watch.get(order, [])
        if len(entries) != 1:
            violations.append(f"{order}: {len(entries)} stream entries, want 1 "
                              f"({[(x['id'], OUTCOMES.get(x['x'])) for x in entries]})")
        if len(watched) != 1:
            violations.append(f"{order}: {len(watched)} distinct events delivered, want 1")
        if not entries:
            continue
        s = entries[0]
        outcome, end_ms = OUTCOMES.get(s["x"], s["x"]), int(s["t"])
        end[order] = (outcome, end_ms)
        if s["u"] != info["user"] or int(s["e"]) != info["expire"]:
            violations.append(f"{order}: stream entry {s} does not match its placement {info}")
        if outcome == "EXPIRED" and end_ms != info["expire"]:
            violations.append(f"{order}: EXPIRED at {end_ms}, its expiry is {info['expire']}")
        for w in watched:
            if (w["outcome"], parse_ms(w["endTime"]), w["hold"]["userId"],
                    parse_ms(w["hold"]["expireTime"])) != (outcome, end_ms, info["user"],
                                                           info["expire"]):
                violations.append(f"{order}: delivered event {w} differs from the stream's {s}")
    for order in set(by_order_stream) | set(by_order_watch):
        if order not in placed:
            violations.append(f"{order}: an event for an order never placed")

    # --- one end per hold, and every answer agrees with it ------------------------------------
    winners = collections.defaultdict(list)
    for c in calls:
        if c.order not in placed or c.op not in ("pay", "cancel", "place"):
            continue
        ended = end.get(c.order)
        if c.rc in (4, 14):
            continue  # retried; the retry's answer is checked
        if c.rc == 0 and c.op == "pay":
            if not c.out.get("alreadyPaid"):
                winners[c.order].append(("PAID", c))
            elif not ended or ended[0] != "PAID":
                violations.append(f"{c.order}: already_paid via {c.replica} ({c.phase}), "
                                  f"but it ended {ended}")
        elif c.rc == 0 and c.op == "cancel":
            if not c.out.get("alreadyCancelled"):
                winners[c.order].append(("CANCELLED", c))
            elif not ended or ended[0] != "CANCELLED":
                violations.append(f"{c.order}: already_cancelled via {c.replica} ({c.phase}), "
                                  f"but it ended {ended}")
        elif c.rc == 0 and c.op == "place":
            if ended and c.t0 > ended[1] + 5:
                violations.append(f"{c.order}: PlaceHold via {c.replica} ({c.phase}) answered "
                                  f"{c.out} after the hold ended {ended}")
            if c.out.get("activeHolds", 0) > MAX_HOLDS:
                violations.append(f"{c.order}: PlaceHold answered active_holds "
                                  f"{c.out['activeHolds']} > {MAX_HOLDS}")
            if parse_ms(c.out["hold"]["expireTime"]) != placed[c.order]["expire"]:
                violations.append(f"{c.order}: a retry via {c.replica} answered expiry "
                                  f"{c.out['hold']['expireTime']}: the hold's was changed")
        elif c.rc == 9:
            m = ENDED_RE.search(c.err)
            if not m or not ended or (m.group(1), parse_ms(m.group(2))) != ended:
                violations.append(f"{c.order}: {c.op} via {c.replica} ({c.phase}): '{c.err}', "
                                  f"but it ended {ended}")
        elif c.rc == 8 and c.op == "place":
            pass  # at the cap: checked below with the intervals
        else:
            violations.append(f"{c.order}: {c.op} via {c.replica} ({c.phase}) exit {c.rc}: "
                              f"{c.err or c.out}")
    for order, info in placed.items():
        won = winners.get(order, [])
        ended = end.get(order)
        if len(won) > 1:
            violations.append(f"{order}: ended {len(won)} times: "
                              f"{[(o, c.op, c.replica) for o, c in won]}")
        if won and ended and won[0][0] != ended[0]:
            violations.append(f"{order}: {won[0][1].op} via {won[0][1].replica} won, but its "
                              f"event says {ended[0]}")
        if won and ended and not (won[0][1].t0 - 5 <= ended[1] <= won[0][1].t1 + 5):
            violations.append(f"{order}: ended at {ended[1]}, outside the winning call "
                              f"[{won[0][1].t0}, {won[0][1].t1}]")
        if ended and ended[0] in ("PAID", "CANCELLED") and not won and not any(
                c.order == order and c.rc in (4, 14) for c in calls):
            violations.append(f"{order}: ended {ended[0]} without a call that did it")

    # --- exact cap: hold intervals on Redis' clock --------------------------------------------
    depth_max = {}
    per_user = collections.defaultdict(list)
    for order, info in placed.items():
        start = info["expire"] - info["ttl"]
        stop = end[order][1] if order in end else float("inf")
        per_user[info["user"]].append((start, 1, order))
        per_user[info["user"]].append((stop, 0, order))  # ends sort before starts at a tie
    for user, points in per_user.items():
        depth = worst = 0
        live = set()
        for t, kind, order in sorted(points):
            if kind:
                live.add(order)
                depth += 1
                if depth > MAX_HOLDS:
                    violations.append(f"{user}: {depth} live holds at {t}: {sorted(live)}")
            else:
                live.discard(order)
                depth -= 1
            worst = max(worst, depth)
        depth_max[user] = worst

    # ListHolds: at most 3, only placed holds with their expiry, none already ended.
    lists = [c for c in calls if c.op == "list" and c.rc == 0]
    for c in lists:
        holds = c.out.get("holds", [])
        if len(holds) > MAX_HOLDS:
            violations.append(f"{c.user}: ListHolds via {c.replica} listed {len(holds)} holds")
        for h in holds:
            o = h["orderId"]
            if o not in placed or parse_ms(h["expireTime"]) != placed[o]["expire"]:
                violations.append(f"{c.user}: ListHolds via {c.replica} listed {h}, "
                                  f"placed as {placed.get(o)}")
            elif o in end and end[o][1] + 5 < c.t0:
                violations.append(f"{c.user}: ListHolds via {c.replica} at {c.t0} listed {o}, "
                                  f"ended {end[o]}")
    for c in calls:
        if c.op == "list" and c.rc != 0:
            violations.append(f"{c.user}: ListHolds via {c.replica} exit {c.rc}: {c.err}")
        if c.op == "place" and c.order not in placed and c.rc not in (8, 9):
            violations.append(f"{c.order}: PlaceHold via {c.replica} exit {c.rc}: {c.err}")

    # Outcomes remembered: phase R paid every order through both releases (but the quiet users':
    # phase C checks theirs).
    quiet_users, quiet = read_quiet(work)
    before_r = [o for o, info in placed.items()
                if info["phase"] in ("A0", "A", "B") and info["user"] not in quiet_users]
    for order in before_r:
        via = {c.replica for c in calls if c.phase == "R" and c.op == "pay" and c.order == order}
        if via != {"old", "new"}:
            violations.append(f"{order}: phase R paid it via {sorted(via)}, want old and new")

    pending_path = os.path.join(work, "pending")
    pending = int(open(pending_path).read().strip() or 0) if os.path.exists(pending_path) else 0
    if pending:
        violations.append(f"{pending} events still pending (unacked) in the group")
    with open(os.path.join(work, "violations"), encoding="utf-8") as f:
        violations = [v.strip() for v in f if v.strip()] + violations

    # --- summary -------------------------------------------------------------------------------
    by = collections.Counter((c.replica, c.op, c.rc) for c in calls)
    outcomes = collections.Counter(o for o, _ in end.values())
    races = sum(1 for o in placed if len({c.replica for c in calls if c.order == o
                                          and c.op in ("pay", "cancel") and c.phase == "B"
                                          and any(d.order == o and d.op in ("pay", "cancel")
                                                  and d is not c and d.t0 < c.t1
                                                  and c.t0 < d.t1 for d in calls)}) == 2)
    place_races = sum(1 for o in placed if {(c.replica, bool(c.out.get("created")))
                                             for c in calls if c.order == o and c.op == "place"
                                             and c.phase == "B" and c.rc == 0} in (
        {("old", True), ("new", False)}, {("old", False), ("new", True)}))
    print("calls (replica op exit: count):")
    for (replica, op, rc), n in sorted(by.items()):
        print(f"  {replica:3} {op:6} {rc:2}: {n}")
    by_replica = collections.Counter(i["replica"] for i in placed.values())
    print(f"orders placed: {len(placed)} (pre {by_replica['pre']}, old {by_replica['old']}, "
          f"new {by_replica['new']}; {len(quiet)} quiet until phase C); ended: "
          f"{dict(outcomes)}; races across replicas: {races} Pay/Cancel, {place_races} PlaceHold")
    print(f"refused at the cap: {by_rc(calls, 'place', 8)}; ListHolds answers: {len(lists)}; "
          f"deepest per user: {dict(sorted(depth_max.items()))} (cap {MAX_HOLDS})")
    with_m = sum(1 for e in stream if "m" in e)
    print(f"stream entries: {len(stream)} ({with_m} with the new field 'm': holds the new "
          f"release placed and ended; {len(stream) - with_m} without); events delivered: "
          f"{len(deliveries)} "
          f"({len(events)} distinct, {redelivered} redeliveries; to c-old "
          f"{sum(1 for c, _ in deliveries if c == 'old')}, to c-new "
          f"{sum(1 for c, _ in deliveries if c == 'new')}); unacked: {pending}")
    if violations:
        print(f"VIOLATIONS ({len(violations)}):")
        for v in violations[:50]:
            print(f"  {v}")
        if len(violations) > 50:
            print(f"  ... and {len(violations) - 50} more")
        return 1
    print("no violation")
    return 0


def by_rc(calls, op, rc):
    return sum(1 for c in calls if c.op == op and c.rc == rc)


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", required=True)
    parser.add_argument("--wait", type=float)
    parser.add_argument("--orders", action="store_true")
    args = parser.parse_args()
    if args.wait is not None:
        return wait_for_events(args.work, args.wait)
    if args.orders:
        orders = Orders(read_ledger(args.work), [])
        quiet_users, _ = read_quiet(args.work)
        for order, info in sorted(orders.placed.items()):
            if info["user"] not in quiet_users:
                print(info["user"], order)
        return 0
    return check(args.work)


if __name__ == "__main__":
    sys.exit(main())
