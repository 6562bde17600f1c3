// NoopHoldStore: a HoldStore that stores nothing and answers at once, on the calling thread.
// FOR BENCHMARKING ONLY (`orderhold-server --store=noop`): it lets tests/bench/run.sh measure the
// ceiling of the same server binary — gRPC, the adapter, the domain and the metrics — without
// Redis, so PlaceHold's throughput can be stated as a ratio of it. It enforces no limit and
// remembers no hold; never run it in front of real users.
//
// Answers: PlaceHold -> created (expire_time = now + ttl, active_holds = 1); EndHold -> ended
// (expire_time = end_time = now); ListHolds -> no holds; ExtendHold -> extended (expire_time =
// now + ttl, under a cap of now + max_lifetime); GetHold -> unknown; ReleaseHolds -> none; Reap ->
// nothing due; ListScopeHolds -> none; MigrateStep -> nothing left; Heartbeat -> only this replica;
// ReleaseLease, Unregister -> true; Ping -> the host clock. It has no event log. "now" is
// CallOptions::now when set, else the host clock truncated to the millisecond. Never fails.
//
// Thread-safe (stateless).
#ifndef ORDERHOLD_SERVER_STORE_NOOP_HOLD_STORE_H_
#define ORDERHOLD_SERVER_STORE_NOOP_HOLD_STORE_H_

#include <string>

#include "server/store/hold_store.h"
#include "server/store/keys.h"
#include "server/store/partition_store.h"

namespace orderhold::store {

class NoopHoldStore final : public HoldStore, public PartitionStore {
 public:
  void PlaceHold(PlaceHoldArgs args, CallOptions options, Callback<PlaceHoldResult> done) override;
  void EndHold(std::string user_id, std::string order_id, HoldOutcome outcome,
               std::string payment_reference, CallOptions options,
               Callback<EndHoldResult> done) override;
  using HoldStore::EndHold;
  using HoldStore::ListHolds;
  void ListHolds(ListHoldsArgs args, CallOptions options, Callback<ListHoldsResult> done) override;
  void ExtendHold(ExtendHoldArgs args, CallOptions options,
                  Callback<ExtendHoldResult> done) override;
  void GetHold(std::string user_id, std::string order_id, CallOptions options,
               Callback<GetHoldResult> done) override;
  void ReleaseHolds(std::string user_id, std::string scope, CallOptions options,
                    Callback<ReleaseHoldsResult> done) override;
  bool keeps_scope_index() const override { return true; }
  // No holds: usage 0.
  void ListScopeHolds(ListScopeHoldsArgs args, CallOptions options,
                      Callback<ListScopeHoldsResult> done) override;
  void Reap(int partition, ReapArgs args, CallOptions options, Callback<ReapResult> done) override;
  void MigrateStep(int partition, MigrateArgs args, CallOptions options,
                   Callback<MigrateResult> done) override;
  void Heartbeat(std::string replica_id, absl::Duration ttl, CallOptions options,
                 Callback<std::vector<std::string>> done) override;
  void ReleaseLease(int partition, std::string replica_id, CallOptions options,
                    Callback<bool> done) override;
  void Unregister(std::string replica_id, CallOptions options, Callback<bool> done) override;
  // The same partition count as RedisHoldStore, so the reaper does the same number of (empty)
  // calls.
  int partition_count() const override { return KeySchema::kPartitionCount; }
  void Ping(CallOptions options, Callback<absl::Time> done) override;
};

}  // namespace orderhold::store

#endif  // ORDERHOLD_SERVER_STORE_NOOP_HOLD_STORE_H_
