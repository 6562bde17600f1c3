#!/usr/bin/python3
"""Unit test of tests/soak/oracle.py (ctest soak_oracle, label unit): a clean synthetic run has no
violation, and each kind of violation, planted in a copy, is found. Standard library only."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

ORACLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "oracle.py")
T = 1_800_000_000_000  # ms
US = 1000


def place(u, o, t_ms, exp_ms, code=0, created=True):
    line = {"m": "place", "u": u, "o": o, "c": code, "t0": (t_ms - 1) * US, "t1": t_ms * US}
    if code == 0:
        line.update(created=created, exp=exp_ms)
    return line


def end_call(m, u, o, t_ms, code=0, already=False):
    line = {"m": m, "u": u, "o": o, "c": code, "t0": (t_ms - 1) * US, "t1": t_ms * US}
    if code == 0:
        line["already"] = already
    return line


def event(eid, u, o, out, end, exp):
    return {"id": eid, "u": u, "o": o, "out": out, "end": end, "exp": exp, "dc": 1, "c": "c0",
            "t": (end + 5) * US}


class OracleTest(unittest.TestCase):
    def run_oracle(self, calls, events, keys_end=None, samples=None, load_s=60, scope_totals=None,
                   scope_capacity=None, purchase_cap=None):
        d = tempfile.mkdtemp()
        meta = {"mode": "standalone", "smoke": True, "load_s": load_s, "max_rate": 100, "rate": 50,
                "servers": 3, "max_holds": 2, "mix": "m", "users": 2, "ttl_s": 3,
                "fault_every_s": 8, "load_start_us": T * US, "load_end_us": (T + 60_000) * US,
                "drained_us": (T + 70_000) * US, "redis_flags": "", "trimmed_unacked": 0,
                "event_retention_s": 15, "machine": "test", "scope_totals": scope_totals,
                "scope_capacity": scope_capacity, "purchase_cap": purchase_cap,
                "redis_baseline": {"keys": 2, "key_bytes": 200, "used_memory": 1},
                "redis_end": {"keys": 2, "key_bytes": 200, "used_memory": 1}}
        files = {"meta.json": [meta], "calls.jsonl": calls, "events.jsonl": events,
                 "faults.jsonl": [], "samples.jsonl": samples or []}
        for name, rows in files.items():
            with open(os.path.join(d, name), "w") as f:
                if name == "meta.json":
                    json.dump(rows[0], f)
                else:
                    f.writelines(json.dumps(r) + "\n" for r in rows)
        with open(os.path.join(d, "keys-baseline.txt"), "w") as f:
            f.write("oh:{1}:events stream -1 100\noh:{1}:lease string 3000 50\n")
        with open(os.path.join(d, "keys-end.txt"), "w") as f:
            f.write(keys_end or "oh:{1}:events stream -1 100\noh:{1}:lease string 3000 50\n")
        proc = subprocess.run([sys.executable, ORACLE, d], capture_output=True, text=True)
        result = json.load(open(os.path.join(d, "soak.json")))
        self.last_result = result
        return proc.returncode, result["violations"]

    def clean(self):
        calls = [place("a", "o1", T, T + 3000), place("a", "o2", T + 10, T + 3010),
                 end_call("pay", "a", "o1", T + 100), place("a", "o3", T + 200, T + 3200),
                 {"m": "list", "u": "a", "c": 0, "t0": T * US, "t1": T * US, "n": 2}]
        events = [event("1/1", "a", "o1", 1, T + 99, T + 3000),
                  event("1/2", "a", "o2", 3, T + 3010, T + 3010),
                  event("1/3", "a", "o3", 3, T + 3200, T + 3200),
                  event("1/3", "a", "o3", 3, T + 3200, T + 3200)]  # a redelivery: deduplicated
        return calls, events

    def test_clean_run_passes(self):
        code, v = self.run_oracle(*self.clean())
        self.assertEqual(code, 0, v)
        self.assertEqual(sum(v.values()), 0)

    def test_over_grant(self):
        calls, events = self.clean()
        calls.append(place("a", "o4", T + 50, T + 150))  # o1, o2, o4 live at T+50, limit 2
        events.append(event("1/4", "a", "o4", 3, T + 150, T + 150))
        self.assertEqual(self.run_oracle(calls, events)[1]["over_grant"], 1)

    def test_an_unanswered_end_frees_nothing_but_may_have(self):
        calls, events = self.clean()
        calls[2] = end_call("pay", "a", "o1", T + 40, code=14)  # may have ended o1 at T+39
        calls.append(place("a", "o4", T + 50, T + 150))
        events.append(event("1/4", "a", "o4", 3, T + 150, T + 150))
        events[0] = event("1/1", "a", "o1", 1, T + 45, T + 3000)
        code, v = self.run_oracle(calls, events)
        self.assertEqual(sum(v.values()), 0, v)

    def test_scope_over_total(self):
        # Three users, one scope with a total of 2 holds and 5 units: each user holds one.
        totals = {"prefix": "event:", "holds": 2, "units": 5}
        calls, events = self.clean()
        scoped = [("b", "s1", T + 10, 2), ("c", "s2", T + 20, 2)]
        for u, o, t, q in scoped:
            line = place(u, o, t, T + 1000)
            line.update(s="event:1", q=q)
            calls.append(line)
            events.append(event("3/" + o, u, o, 3, T + 1000, T + 1000))
        code, v = self.run_oracle(calls, events, scope_totals=totals)
        self.assertEqual(sum(v.values()), 0, v)
        # A third while both are live: over the holds total.
        third = place("d", "s3", T + 30, T + 1000)
        third.update(s="event:1", q=1)
        events_over = events + [event("3/s3", "d", "s3", 3, T + 1000, T + 1000)]
        self.assertEqual(self.run_oracle(calls + [third], events_over,
                                         scope_totals=totals)[1]["scope_over_total"], 1)
        # After the first is paid (its Pay started at T+39), a third fits; 2 + 2 + 2 units would
        # not with a 5-unit total, 2 + 2 + 1 does. Another scope counts on its own.
        paid = end_call("pay", "b", "s1", T + 40)
        later = place("d", "s3", T + 50, T + 1000)
        later.update(s="event:1", q=2)
        other = place("e", "s4", T + 60, T + 1000)
        other.update(s="event:2", q=5)
        events_ok = [e for e in events if e["o"] != "s1"] + [
            event("3/s1", "b", "s1", 1, T + 39, T + 1000),
            event("3/s3", "d", "s3", 3, T + 1000, T + 1000),
            event("3/s4", "e", "s4", 3, T + 1000, T + 1000)]
        self.assertEqual(sum(self.run_oracle(calls + [paid, later, other], events_ok,
                                             scope_totals=totals)[1].values()), 0)
        units_over = place("d", "s3", T + 30, T + 1000)
        units_over.update(s="event:1", q=2)  # 3 holds of 2 units live at once: 6 units, over 5
        self.assertEqual(self.run_oracle(calls + [units_over], events_over,
                                         scope_totals={"prefix": "event:", "holds": 9,
                                                       "units": 5})[1]["scope_over_total"], 1)

    def capacity_history(self):
        # One scope, 2-unit holds: b's is paid (Pay started at T+39), c's cancelled (at T+99), d's
        # expires at T+500; then e holds 4 units from T+600. Held + sold at most 6 (at T+30: 2 paid
        # + 2 + 2; from T+600: 2 sold + 4).
        calls, events = self.clean()
        for u, o, t, exp, q in [("b", "s1", T + 10, T + 1000, 2), ("c", "s2", T + 20, T + 1000, 2),
                                ("d", "s3", T + 30, T + 500, 2), ("e", "s4", T + 600, T + 1000, 4)]:
            line = place(u, o, t, exp)
            line.update(s="event:1", q=q)
            calls.append(line)
        calls += [end_call("pay", "b", "s1", T + 40), end_call("cancel", "c", "s2", T + 100)]
        events += [event("3/s1", "b", "s1", 1, T + 39, T + 1000),
                   event("3/s2", "c", "s2", 2, T + 99, T + 1000),
                   event("3/s3", "d", "s3", 3, T + 500, T + 500),
                   event("3/s4", "e", "s4", 3, T + 1000, T + 1000)]
        return calls, events

    def test_scope_over_capacity(self):
        capacity = {"prefix": "event:", "units": 6}
        totals = {"prefix": "event:", "holds": 9, "units": 6}
        calls, events = self.capacity_history()
        code, v = self.run_oracle(calls, events, scope_totals=totals, scope_capacity=capacity)
        self.assertEqual((code, sum(v.values())), (0, 0), v)
        self.assertEqual(self.last_result["max_held_sold_per_scope_seen"],
                         {"event:1": {"units": 6, "paid_units": 2, "paid": 1}})
        # f holds 2 more units from T+700: 4 + 2 held is within the units total, but b's 2 units,
        # sold at T+39, still count against the capacity: 8 held + sold, over 6.
        more = place("f", "s5", T + 700, T + 1000)
        more.update(s="event:1", q=2)
        over_calls = calls + [more]
        over_events = events + [event("3/s5", "f", "s5", 3, T + 1000, T + 1000)]
        code, v = self.run_oracle(over_calls, over_events, scope_totals=totals,
                                  scope_capacity=capacity)
        self.assertEqual((code, v["scope_over_total"], v["scope_over_capacity"]), (1, 0, 1), v)
        self.assertEqual(self.last_result["violation_examples"]["scope_over_capacity"],
                         [{"scope": "event:1", "t_ms": T + 700, "units": 8, "paid_units": 2}])
        # Another scope of the rule counts on its own.
        elsewhere = dict(more, s="event:2")
        self.assertEqual(self.run_oracle(calls + [elsewhere], over_events,
                                         scope_capacity=capacity)[1]["scope_over_capacity"], 0)
        # The Pay's answer lost (UNAVAILABLE): the PAID event alone makes the hold certainly paid.
        unanswered = [end_call("pay", "b", "s1", T + 40, code=14) if c.get("o") == "s1" and
                      c["m"] == "pay" else c for c in over_calls]
        self.assertEqual(self.run_oracle(unanswered, over_events, scope_capacity=capacity)[1]
                         ["scope_over_capacity"], 1)
        # An unanswered Pay of a hold that then expired sold nothing: within the capacity.
        expired = [e for e in over_events if e["o"] != "s1"] + [
            event("3/s1", "b", "s1", 3, T + 1000, T + 1000)]
        code, v = self.run_oracle(unanswered, expired, scope_capacity=capacity)
        self.assertEqual((code, sum(v.values())), (0, 0), v)

    def test_scope_over_capacity_skipped_without_meta(self):
        calls, events = self.capacity_history()
        more = place("f", "s5", T + 700, T + 1000)
        more.update(s="event:1", q=2)
        code, v = self.run_oracle(calls + [more],
                                  events + [event("3/s5", "f", "s5", 3, T + 1000, T + 1000)])
        self.assertEqual((code, v["scope_over_capacity"]), (0, 0), v)
        self.assertEqual(self.last_result["max_held_sold_per_scope_seen"], {})

    def purchase_history(self):
        # The cap's scope event:0, 2-unit holds (4 for c). b's s1 is paid (its Pay started at
        # T+39), s2 cancelled (at T+99), s3 expires at T+500, s4 lives from T+600: b's held +
        # bought is at most 4 (T+20: s1 + s2; T+200: s1 paid + s3; T+600: s1 paid + s4). c holds
        # 4 units at once too: the cap is per user.
        calls, events = self.clean()
        for u, o, t, exp, q in [("b", "p1", T + 10, T + 1000, 2), ("b", "p2", T + 20, T + 1000, 2),
                                ("c", "p5", T + 30, T + 1000, 4), ("b", "p3", T + 200, T + 500, 2),
                                ("b", "p4", T + 600, T + 1000, 2)]:
            line = place(u, o, t, exp)
            line.update(s="event:0", q=q)
            calls.append(line)
        calls += [end_call("pay", "b", "p1", T + 40), end_call("cancel", "b", "p2", T + 100)]
        events += [event("4/p1", "b", "p1", 1, T + 39, T + 1000),
                   event("4/p2", "b", "p2", 2, T + 99, T + 1000),
                   event("4/p5", "c", "p5", 3, T + 1000, T + 1000),
                   event("4/p3", "b", "p3", 3, T + 500, T + 500),
                   event("4/p4", "b", "p4", 3, T + 1000, T + 1000)]
        return calls, events

    def test_user_over_purchase_cap(self):
        cap = {"scope": "event:0", "units": 4, "refusals_seen": 7}
        calls, events = self.purchase_history()
        code, v = self.run_oracle(calls, events, purchase_cap=cap)
        self.assertEqual((code, sum(v.values())), (0, 0), v)
        self.assertEqual(self.last_result["max_held_bought_per_user_seen"],
                         {"event:0": {"users": 2, "users_at_cap": 2, "most_units": 4,
                                      "paid_units": 2}})
        # b holds 2 more units from T+700: 2 live units each in s4 and s7 are within b's hold
        # limit, but the 2 units b paid for in s1 (at T+39) still count against the cap: 6, over 4.
        more = place("b", "p7", T + 700, T + 1000)
        more.update(s="event:0", q=2)
        over_calls = calls + [more]
        over_events = events + [event("4/p7", "b", "p7", 3, T + 1000, T + 1000)]
        code, v = self.run_oracle(over_calls, over_events, purchase_cap=cap)
        self.assertEqual((code, sum(v.values()), v["user_over_purchase_cap"]), (1, 1, 1), v)
        self.assertEqual(self.last_result["violation_examples"]["user_over_purchase_cap"],
                         [{"user": "b", "scope": "event:0", "t_ms": T + 700, "units": 6,
                           "paid_units": 2, "orders": ["p1", "p4", "p7"]}])
        # The cap is for its exact scope: the same hold in another scope counts on its own.
        elsewhere = dict(more, s="event:1")
        self.assertEqual(self.run_oracle(calls + [elsewhere], over_events, purchase_cap=cap)[1]
                         ["user_over_purchase_cap"], 0)
        # The Pay's answer lost (UNAVAILABLE): the PAID event alone makes p1 certainly paid.
        unanswered = [end_call("pay", "b", "p1", T + 40, code=14) if c.get("o") == "p1" and
                      c["m"] == "pay" else c for c in over_calls]
        self.assertEqual(self.run_oracle(unanswered, over_events, purchase_cap=cap)[1]
                         ["user_over_purchase_cap"], 1)
        # An unanswered Pay of a hold that then expired bought nothing: p4 + p7 are within the cap.
        expired = [e for e in over_events if e["o"] != "p1"] + [
            event("4/p1", "b", "p1", 3, T + 1000, T + 1000)]
        code, v = self.run_oracle(unanswered, expired, purchase_cap=cap)
        self.assertEqual((code, sum(v.values())), (0, 0), v)
        # A PlaceHold whose answer was lost is not certainly live: it does not count.
        lost = dict(more, c=14)
        del lost["created"], lost["exp"]
        code, v = self.run_oracle(calls + [lost], over_events, purchase_cap=cap)
        self.assertEqual((code, sum(v.values())), (0, 0), v)

    def test_user_over_purchase_cap_skipped_without_meta(self):
        calls, events = self.purchase_history()
        more = place("b", "p7", T + 700, T + 1000)
        more.update(s="event:0", q=2)
        code, v = self.run_oracle(calls + [more],
                                  events + [event("4/p7", "b", "p7", 3, T + 1000, T + 1000)])
        self.assertEqual((code, v["user_over_purchase_cap"]), (0, 0), v)
        self.assertEqual(self.last_result["max_held_bought_per_user_seen"], {})

    def test_list_over_limit(self):
        calls, events = self.clean()
        calls.append({"m": "list", "u": "a", "c": 0, "t0": T * US, "t1": T * US, "n": 3})
        self.assertEqual(self.run_oracle(calls, events)[1]["list_over_limit"], 1)

    def test_a_stuck_consumers_events_count_only_once_an_acking_one_has_them(self):
        calls, events = self.clean()
        stuck = dict(events[0], c="soak-stuck0", t=(T + 100) * US)
        # o1's event went to the stuck consumer only: lost for the group.
        code, v = self.run_oracle(calls, [stuck] + events[1:])
        self.assertEqual(v["lost_end"], 1)
        self.assertEqual(code, 1)
        # Redelivered to an acking consumer 5.2 s later: clean, and the delay is reported.
        redelivered = dict(events[0], dc=2, t=(T + 5300) * US)
        code, v = self.run_oracle(calls, [stuck] + events[1:] + [redelivered])
        self.assertEqual(code, 0)
        self.assertEqual(sum(v.values()), 0)
        ev = self.last_result["events"]
        self.assertEqual(ev["redelivery_delay_ms"], {"count": 1, "p50": 5200.0, "p99": 5200.0,
                                                     "max": 5200.0})
        self.assertEqual(ev["stuck_never_redelivered"], 0)
        self.assertEqual(ev["stuck_deliveries"], 1)

    def test_lost_end(self):
        calls, events = self.clean()
        del events[1]
        code, v = self.run_oracle(calls, events)
        self.assertEqual((code, v["lost_end"]), (1, 1))

    def test_ended_twice(self):
        calls, events = self.clean()
        events.append(event("2/9", "a", "o2", 3, T + 3010, T + 3010))
        self.assertEqual(self.run_oracle(calls, events)[1]["ended_twice"], 1)

    def test_wrong_outcome_and_end_time(self):
        calls, events = self.clean()
        events[0] = event("1/1", "a", "o1", 2, T + 99, T + 3000)  # paid, but CANCELLED
        events[1] = event("1/2", "a", "o2", 3, T + 2000, T + 2000)  # expired before its expiry
        v = self.run_oracle(calls, events)[1]
        # CANCELLED contradicts the Pay's answer, and no CancelHold or ReleaseHolds was sent: two.
        self.assertEqual((v["wrong_outcome"], v["wrong_end_time"]), (2, 1))

    def test_phantom_event(self):
        calls, events = self.clean()
        calls.append(place("a", "o5", T + 300, None, code=8))
        events.append(event("1/5", "a", "o5", 3, T + 3300, T + 3300))
        events.append(event("1/6", "b", "never", 3, T + 3300, T + 3300))
        self.assertEqual(self.run_oracle(calls, events)[1]["phantom_event"], 2)

    def test_redis_memory_leases_left_out(self):
        calls, events = self.clean()
        more_leases = ("oh:{1}:events stream -1 100\noh:{1}:lease string 3000 50\n"
                       "oh:{2}:lease string 3000 50\n")
        self.assertEqual(self.run_oracle(calls, events, keys_end=more_leases)[1]["redis_memory"], 0)
        # A scope's units-sold counter never expires (one per scope ever sold from): counted apart.
        sold = more_leases + "oh:{3}:ss:event:1 string -1 56\n"
        self.assertEqual(self.run_oracle(calls, events, keys_end=sold)[1]["redis_memory"], 0)
        self.assertEqual(self.last_result["meta"]["redis_end"]["sold_counters"], 1)
        # So are the buyers' purchases under a runtime rule (pb:<user><NUL><scope>, never expiring):
        # redis-cli prints the name up to its NUL, and TYPE and PTTL of that name say it is none.
        bought = sold + "oh:{3}:pb:s12 none -2 \n"
        self.assertEqual(self.run_oracle(calls, events, keys_end=bought)[1]["redis_memory"], 0)
        self.assertEqual(self.last_result["meta"]["redis_end"]["purchase_counters"], 1)
        leftover = more_leases + "oh:{2}:u:a zset -1 80\n"
        self.assertEqual(self.run_oracle(calls, events, keys_end=leftover)[1]["redis_memory"], 1)

    def test_rss_growth_judged_on_long_runs_only(self):
        calls, events = self.clean()
        samples = [{"t": (T + 10_000 * i) * US,
                    "servers": [{"pid": 1, "rss": (40 + (30 if i >= 6 else 0)) << 20, "fds": 20}],
                    "redis_used_memory": 1} for i in range(8)]
        self.assertEqual(self.run_oracle(calls, events, samples=samples)[1]["rss_growth"], 0)
        self.assertEqual(
            self.run_oracle(calls, events, samples=samples, load_s=600)[1]["rss_growth"], 1)


if __name__ == "__main__":
    unittest.main()
