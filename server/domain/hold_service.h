// HoldService: the quota semantics of OrderHold on top of a HoldStore, independent of gRPC.
//
// It validates what callers send (INVALID_ARGUMENT naming the field, nothing touched), turns the
// store's outcomes into statuses and records the hold metrics. All decisions about time are taken
// by the store, on its clock (Redis TIME in production), so replicas agree.
//
// Errors (absl codes, = gRPC codes):
//   INVALID_ARGUMENT    user_id / order_id / ttl malformed (see hold.h).
//   RESOURCE_EXHAUSTED  PlaceHold: max_holds live holds; the message names the limit and when the
//                       earliest hold expires (absl: "perhaps a per-user quota").
//   FAILED_PRECONDITION the order's hold already ended in a way that forbids the call: PlaceHold
//                       of any ended order, Pay of a CANCELLED or EXPIRED one, Cancel of a PAID
//                       or EXPIRED one. The message names the outcome and its time (AIP-193: the
//                       system is not in the state the call needs; retrying will not help).
//   NOT_FOUND           Pay / Cancel: unknown order (never placed, or forgotten after
//                       --outcome_retention).
//   UNAVAILABLE, DEADLINE_EXCEEDED, INTERNAL   from the store.
//
// Thread-safe (no mutable state of its own). Callbacks run on the store's threads or inline.
#ifndef ORDERHOLD_SERVER_DOMAIN_HOLD_SERVICE_H_
#define ORDERHOLD_SERVER_DOMAIN_HOLD_SERVICE_H_

#include <optional>
#include <string>
#include <vector>

#include "server/domain/hold.h"
#include "server/metrics/metrics.h"
#include "server/store/hold_store.h"

namespace orderhold::domain {

struct PlaceHoldCommand {
  std::string user_id;
  std::string order_id;
  std::optional<absl::Duration> ttl;  // unset: policy.default_ttl
};

struct PlaceHoldReply {
  Hold hold;
  absl::Time now;        // store clock at the call; remaining = hold.expire_time - now
  bool created = false;  // false: the live hold already existed (idempotent retry)
  int active_holds = 0;  // live holds after the call
  int max_holds = 0;
};

struct PayReply {
  Hold hold;                  // the paid (now removed) hold
  absl::Time now;             // store clock at payment (the first payment when already_paid)
  bool already_paid = false;  // an earlier call paid it; nothing changed
};

struct CancelReply {
  Hold hold;                       // the cancelled (now removed) hold
  absl::Time now;                  // store clock at cancellation (the first one when repeated)
  bool already_cancelled = false;  // an earlier call cancelled it; nothing changed
};

struct ListHoldsReply {
  std::vector<Hold> holds;  // live holds, earliest expire_time first
  absl::Time now;           // store clock at the call
  int max_holds = 0;
};

class HoldService {
 public:
  // `store` and `metrics` must outlive this object. `policy` must pass ValidatePolicy.
  HoldService(store::HoldStore& store, HoldPolicy policy, metrics::Metrics& metrics);

  // See the OrderHold.PlaceHold rpc. Counts orderhold_holds_placed_total /
  // orderhold_holds_rejected_total{reason} / orderhold_holds_expired_total (lazy cleanup).
  void PlaceHold(PlaceHoldCommand command, store::CallOptions options,
                 store::Callback<PlaceHoldReply> done);

  // See the OrderHold.Pay rpc. Counts orderhold_holds_paid_total (and expired ones found on the
  // way); a repeated Pay of a PAID hold is OK with already_paid.
  void Pay(std::string user_id, std::string order_id, store::CallOptions options,
           store::Callback<PayReply> done);

  // See the OrderHold.CancelHold rpc. Counts orderhold_holds_cancelled_total; a repeated Cancel of
  // a CANCELLED hold is OK with already_cancelled.
  void Cancel(std::string user_id, std::string order_id, store::CallOptions options,
              store::Callback<CancelReply> done);

  // See the OrderHold.ListHolds rpc.
  void ListHolds(std::string user_id, store::CallOptions options,
                 store::Callback<ListHoldsReply> done);

  const HoldPolicy& policy() const { return policy_; }

 private:
  void Reject(metrics::RejectReason reason);
  // Validates ids, ends the hold with `outcome` and calls `done` with (the hold, now, whether it
  // had already ended that way) or the error for any other end.
  struct Ended {
    Hold hold;
    absl::Time now;
    bool repeated = false;
  };
  void End(std::string user_id, std::string order_id, store::HoldOutcome outcome,
           store::CallOptions options, store::Callback<Ended> done);
  // Counts holds ended as EXPIRED by a script's lazy cleanup.
  void CountExpired(int expired);

  store::HoldStore& store_;
  const HoldPolicy policy_;
  metrics::Metrics& metrics_;
};

// The reject reason recorded for a failed PlaceHold with this status code.
metrics::RejectReason RejectReasonFor(absl::StatusCode code);

// FAILED_PRECONDITION: `order_id "o-1" already ended: EXPIRED at 2026-11-21T10:00:00.000Z`, plus
// `what` (e.g. "; it cannot be paid"). The same text whoever ended the hold.
absl::Status EndedError(absl::string_view order_id, const store::HoldEnd& end,
                        absl::string_view what);

}  // namespace orderhold::domain

#endif  // ORDERHOLD_SERVER_DOMAIN_HOLD_SERVICE_H_
