// FakeHoldStore: an in-memory HoldStore with the same semantics as the Lua scripts, on a
// FakeClock (or CallOptions::now). For domain unit tests and the contract suite, which runs the
// same cases against it and against RedisHoldStore. Callbacks run inline. Thread-safe.
#ifndef ORDERHOLD_TESTS_TESTING_FAKE_HOLD_STORE_H_
#define ORDERHOLD_TESTS_TESTING_FAKE_HOLD_STORE_H_

#include <map>
#include <string>

#include "absl/synchronization/mutex.h"
#include "server/common/clock.h"
#include "server/store/hold_store.h"

namespace orderhold::testing {

class FakeHoldStore final : public store::HoldStore {
 public:
  static constexpr int kShards = 4;

  explicit FakeHoldStore(const Clock& clock) : clock_(clock) {}

  // While set, every operation fails with this status (simulates Redis down).
  void SetFailure(absl::Status failure) {
    absl::MutexLock lock(&mu_);
    failure_ = std::move(failure);
  }

  void PlaceHold(store::PlaceHoldArgs args, store::CallOptions options,
                 store::Callback<store::PlaceHoldResult> done) override;
  void Pay(std::string user_id, std::string order_id, store::CallOptions options,
           store::Callback<store::PayResult> done) override;
  void ListHolds(std::string user_id, store::CallOptions options,
                 store::Callback<store::ListHoldsResult> done) override;
  void Reap(int shard, int max_users, store::CallOptions options,
            store::Callback<store::ReapResult> done) override;
  int shard_count() const override { return kShards; }
  void Ping(store::CallOptions options, store::Callback<absl::Time> done) override;

 private:
  // Calls `done` with body() run under the lock, or with the configured failure.
  template <typename T, typename Body>
  void Answer(store::Callback<T>& done, Body body);
  // Truncated to ms, like Redis TIME in the scripts.
  absl::Time NowFor(const store::CallOptions& options) const;
  static int ShardOf(const std::string& user_id);

  const Clock& clock_;
  absl::Mutex mu_;
  absl::Status failure_ ABSL_GUARDED_BY(mu_);
  // user_id -> order_id -> expire_time
  std::map<std::string, std::map<std::string, absl::Time>> holds_ ABSL_GUARDED_BY(mu_);
};

}  // namespace orderhold::testing

#endif  // ORDERHOLD_TESTS_TESTING_FAKE_HOLD_STORE_H_
