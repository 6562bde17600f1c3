#!/usr/bin/env python3
"""checkout.py: a ticketing backend's checkout flow against OrderHold, in Python.

A buyer picks a seat: PlaceHold takes one of the user's slots for a short ttl. On the payment page
ExtendHold gives them time to pay (never past the hold's lifetime cap); Pay ends the hold as PAID.
One line per step. Exit status 1 when a step answers what a client would not expect, 2 when the
program cannot start. --scenario:
  checkout  place, extend (and retry it), pay (and retry it), read the paid hold, extend it after
            payment (refused), fill the user's slots up to RESOURCE_EXHAUSTED, release them
  expired   a 300 ms hold the buyer walks away from: it reads EXPIRED, and extending, paying or
            placing it again answers FAILED_PRECONDITION naming EXPIRED

Needs Debian's python3-grpcio and python3-protobuf, and stubs generated from proto/ into --stubs DIR
or a directory on PYTHONPATH (client/README.md, "Python: the checkout flow"). The google/rpc stubs
are optional: with them, a refusal's details are decoded.
"""
import argparse
import secrets
import sys
import time
import uuid

import grpc
from google.protobuf.duration_pb2 import Duration

DEADLINE_S = 5.0  # every call has a deadline: a stuck call must not stall a buyer's checkout
ATTEMPTS = 5
FAILED_PRECONDITION = grpc.StatusCode.FAILED_PRECONDITION
pb = pb_grpc = rpc_status = rpc_details = None  # the generated modules (load_stubs)


class Unexpected(Exception):
    """A step answered something this flow does not expect."""


def expect(condition, why):
    if not condition:
        raise Unexpected(why)


def load_stubs(stubs_dir):
    global pb, pb_grpc, rpc_status, rpc_details
    if stubs_dir:
        sys.path.insert(0, stubs_dir)
    from orderhold.v1 import orderhold_pb2 as pb, orderhold_pb2_grpc as pb_grpc
    try:  # optional: without them a client still gets the code and the message
        from google.rpc import error_details_pb2 as rpc_details, status_pb2 as rpc_status
    except ImportError:
        pass


def call(method, request):
    """One unary call with a deadline. UNAVAILABLE (Redis away, a server restarting) is retried:
    every call here is safe to repeat (PlaceHold and Pay are idempotent per order_id, ExtendHold
    counts a request_id once), and the server fails closed (no answer: nothing was granted)."""
    for attempt in range(1, ATTEMPTS + 1):
        try:
            return method(request, timeout=DEADLINE_S)
        except grpc.RpcError as err:
            if err.code() != grpc.StatusCode.UNAVAILABLE or attempt == ATTEMPTS:
                raise
            print(f"      retrying after UNAVAILABLE: {err.details()}", file=sys.stderr)
            time.sleep(0.1 * 2**attempt)


def refused(code, method, request, naming):
    """Calls, expecting error `code` with a message naming `naming`; returns the error."""
    try:
        response = call(method, request)
    except grpc.RpcError as err:
        expect(err.code() == code and naming in err.details(),
               f"want {code.name} naming {naming}, got {err.code().name}: {err.details()}")
        return err
    raise Unexpected(f"want {code.name}, got OK: {type(response).__name__}")


def error_details(err):
    """The google.rpc details of an error by type name (ErrorInfo, RetryInfo, QuotaFailure), from
    gRPC's grpc-status-details-bin trailer; {} without the google/rpc stubs."""
    trailer = dict(err.trailing_metadata() or ()).get("grpc-status-details-bin")
    if rpc_status is None or trailer is None:
        return {}
    details = {}
    for packed in rpc_status.Status.FromString(trailer).details:
        kind = getattr(rpc_details, packed.TypeName().split(".")[-1], None)  # google.rpc.ErrorInfo
        if kind is not None:
            details[kind.__name__] = kind.FromString(packed.value)
    return details


def secs(duration):
    return f"{duration.ToTimedelta().total_seconds():.1f}s"


def expiry(hold):
    # `remaining` is on the server's (Redis') clock: a countdown needs no trust in ours.
    return f"expires {hold.expire_time.ToJsonString()} (in {secs(hold.remaining)})"


def checkout_steps(stub, user, order):
    ids = dict(user_id=user, order_id=order)
    state = {"placed": []}  # what later steps need from earlier ones

    def place():
        r = call(stub.PlaceHold, pb.PlaceHoldRequest(**ids, ttl=Duration(seconds=120)))
        expect(r.created, f"created=false: {order} already had a live hold")
        state["max_holds"] = r.max_holds
        return f"held {order} for {user}: {expiry(r.hold)}, {r.active_holds}/{r.max_holds} active"

    def extend(request_id):
        # The buyer reached the payment page: ask for 15 minutes. The server never shortens a hold
        # nor passes its lifetime cap (`capped`: it cut the ask); the request_id makes a retry of
        # this very call count once against the server's --max_extensions.
        r = call(stub.ExtendHold, pb.ExtendHoldRequest(**ids, ttl=Duration(seconds=900),
                                                       request_id=request_id))
        hold = r.hold
        expire, cap = hold.expire_time.ToNanoseconds(), hold.max_expire_time.ToNanoseconds()
        expect(hold.HasField("max_expire_time") and expire <= cap, "expire_time past the cap")
        expect(not r.capped or expire == cap, "capped, yet expire_time is not max_expire_time")
        left = r.extensions_left if r.HasField("extensions_left") else "unlimited"
        return r, (f"extended={r.extended} capped={r.capped} extensions={hold.extensions} "
                   f"extensions_left={left}: {expiry(hold)}, "
                   f"cap {hold.max_expire_time.ToJsonString()}")

    def extend_first():
        state["request_id"] = str(uuid.uuid4())  # one per attempt (here, per payment page)
        r, line = extend(state["request_id"])
        expect(r.extended and r.hold.extensions >= 1, f"not extended: {line}")
        state["extensions"] = r.hold.extensions
        return line

    def extend_retry():
        # The same request again, as after a lost answer: it may move the expiry, never the count.
        r, line = extend(state.get("request_id", "never-sent"))
        expect(r.hold.extensions == state.get("extensions"), f"a retry was counted: {line}")
        return line

    def pay(retry):
        r = call(stub.Pay, pb.PayRequest(**ids))
        expect(r.already_paid == retry, f"already_paid={r.already_paid}")
        return f"paid {order}, already_paid={r.already_paid}, {secs(r.hold.remaining)} were left"

    def get_paid():
        r = call(stub.GetHold, pb.GetHoldRequest(**ids))
        expect(r.outcome == pb.PAID, f"outcome {pb.HoldOutcome.Name(r.outcome)}, want PAID")
        return f"{order} is PAID since {r.end_time.ToJsonString()}"

    def extend_paid():
        # Paid in another tab, then the payment page asks for more time: too late, and harmless.
        err = refused(FAILED_PRECONDITION, stub.ExtendHold, pb.ExtendHoldRequest(**ids), "PAID")
        return f"FAILED_PRECONDITION: {err.details()}"

    def fill_up():
        # The buyer opens more checkouts than --max_holds allows: the next one is refused until a
        # hold ends. RetryInfo says when the earliest one expires (the earliest a retry can pass).
        expect("max_holds" in state, "the first PlaceHold failed: max_holds unknown")
        for i in range(2, state["max_holds"] + 3):
            request = pb.PlaceHoldRequest(user_id=user, order_id=f"{order}-{i}",
                                          ttl=Duration(seconds=120))
            try:
                r = call(stub.PlaceHold, request)
            except grpc.RpcError as err:
                if err.code() != grpc.StatusCode.RESOURCE_EXHAUSTED:
                    raise
                expect(state["placed"] and r.active_holds == r.max_holds, "refused below the limit")
                line = f"RESOURCE_EXHAUSTED after {len(state['placed'])} holds: {err.details()}"
                if rpc_status is None:
                    return line
                details = error_details(err)
                info, retry = details.get("ErrorInfo"), details.get("RetryInfo")
                expect(info and info.reason == "USER_HOLD_LIMIT" and retry,
                       f"want ErrorInfo USER_HOLD_LIMIT and RetryInfo, got {details}")
                return f"reason {info.reason}, retry in {secs(retry.retry_delay)}; {line}"
            state["placed"].append(request.order_id)
        raise Unexpected(f"{len(state['placed'])} holds placed, never RESOURCE_EXHAUSTED")

    def release():
        # "Start over": every live hold of the user ends CANCELLED, each with its event.
        r = call(stub.ReleaseHolds, pb.ReleaseHoldsRequest(user_id=user))
        released = [h.order_id for h in r.holds]
        expect(sorted(released) == sorted(state["placed"]), f"released {released}")
        return f"released {len(released)} holds: {' '.join(released)}"

    return [("place", place), ("extend", extend_first), ("extend-retry", extend_retry),
            ("pay", lambda: pay(False)), ("pay-retry", lambda: pay(True)), ("get", get_paid),
            ("extend-paid", extend_paid), ("limit", fill_up), ("release", release)]


def expired_steps(stub, user, order):
    ids = dict(user_id=user, order_id=order)
    state = {}

    def place():
        r = call(stub.PlaceHold, pb.PlaceHoldRequest(**ids, ttl=Duration(nanos=300_000_000)))
        state["hold"] = r.hold
        return f"held {order} for {user}: {expiry(r.hold)}"

    def wait():
        # The buyer walks away. Wait out the server's `remaining`, plus its millisecond precision.
        seconds = state["hold"].remaining.ToTimedelta().total_seconds() + 0.1 if state else 0.4
        time.sleep(max(seconds, 0))
        return f"waited {seconds:.2f}s"

    def get_expired():
        # Before or after the reaper removed it, the hold reads EXPIRED at its expire_time.
        r = call(stub.GetHold, pb.GetHoldRequest(**ids))
        expect(r.outcome == pb.EXPIRED, f"outcome {pb.HoldOutcome.Name(r.outcome)}, want EXPIRED")
        expect(not state or r.end_time == state["hold"].expire_time, "end_time is not expire_time")
        return f"{order} is EXPIRED since {r.end_time.ToJsonString()}"

    def too_late(method, request):
        # The race every client must handle: the buyer pays or extends just after the expiry. The
        # seat may be someone else's by now: say "your reservation expired", do not retry.
        return lambda: "FAILED_PRECONDITION: " + refused(FAILED_PRECONDITION, method, request,
                                                         "EXPIRED").details()

    # Placing it again is refused too (for --outcome_retention): a replay never resurrects it.
    return [("place", place), ("wait", wait), ("get", get_expired),
            ("extend", too_late(stub.ExtendHold, pb.ExtendHoldRequest(**ids))),
            ("pay", too_late(stub.Pay, pb.PayRequest(**ids))),
            ("place-again", too_late(stub.PlaceHold, pb.PlaceHoldRequest(**ids)))]


def main():
    suffix = secrets.token_hex(4)
    parser = argparse.ArgumentParser(description="The checkout flow against OrderHold.")
    parser.add_argument("--target", default="localhost:50051", help="host:port of the server")
    parser.add_argument("--user", default=f"py-buyer-{suffix}")
    parser.add_argument("--order", default=f"py-order-{suffix}")
    parser.add_argument("--stubs", help="holds orderhold/v1/orderhold_pb2*.py (else PYTHONPATH)")
    parser.add_argument("--scenario", choices=("checkout", "expired"), default="checkout")
    args = parser.parse_args()
    try:
        load_stubs(args.stubs)
    except ImportError as err:
        print(f"checkout.py: cannot import the stubs ({err}); see --help", file=sys.stderr)
        return 2
    # Plaintext. TLS: grpc.secure_channel(target, grpc.ssl_channel_credentials(ca_pem)).
    with grpc.insecure_channel(args.target) as channel:
        try:
            grpc.channel_ready_future(channel).result(timeout=10)
        except grpc.FutureTimeoutError:
            print(f"checkout.py: no server answers at {args.target}", file=sys.stderr)
            return 2
        stub = pb_grpc.OrderHoldStub(channel)
        scenario = checkout_steps if args.scenario == "checkout" else expired_steps
        steps = scenario(stub, args.user, args.order)
        failed = 0
        for name, step in steps:
            try:
                print(f"ok    {name:<12} {step()}", flush=True)
            except (Unexpected, grpc.RpcError) as err:
                if isinstance(err, grpc.RpcError):
                    err = f"{err.code().name}: {err.details()}"
                print(f"FAIL  {name:<12} {err}", flush=True)
                failed += 1
    print(f"{args.scenario}: {len(steps) - failed} of {len(steps)} steps as expected")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
