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
//   NOT_FOUND           Pay: no live hold for (user_id, order_id).
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
  Hold hold;       // the paid (now removed) hold
  absl::Time now;  // store clock at the call
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

  // See the OrderHold.Pay rpc. Counts orderhold_holds_paid_total.
  void Pay(std::string user_id, std::string order_id, store::CallOptions options,
           store::Callback<PayReply> done);

  // See the OrderHold.ListHolds rpc.
  void ListHolds(std::string user_id, store::CallOptions options,
                 store::Callback<ListHoldsReply> done);

  const HoldPolicy& policy() const { return policy_; }

 private:
  void Reject(metrics::RejectReason reason);

  store::HoldStore& store_;
  const HoldPolicy policy_;
  metrics::Metrics& metrics_;
};

// The reject reason recorded for a failed PlaceHold with this status code.
metrics::RejectReason RejectReasonFor(absl::StatusCode code);

}  // namespace orderhold::domain

#endif  // ORDERHOLD_SERVER_DOMAIN_HOLD_SERVICE_H_
