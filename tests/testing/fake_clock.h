// FakeClock: a Clock that moves only when told. Thread-safe.
#ifndef ORDERHOLD_TESTS_TESTING_FAKE_CLOCK_H_
#define ORDERHOLD_TESTS_TESTING_FAKE_CLOCK_H_

#include "absl/synchronization/mutex.h"
#include "server/common/clock.h"

namespace orderhold::testing {

class FakeClock final : public Clock {
 public:
  explicit FakeClock(absl::Time start = absl::FromUnixSeconds(1795000000)) : now_(start) {}
  absl::Time Now() const override {
    absl::MutexLock lock(&mu_);
    return now_;
  }
  void Advance(absl::Duration by) {
    absl::MutexLock lock(&mu_);
    now_ += by;
  }

 private:
  mutable absl::Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_);
};

}  // namespace orderhold::testing

#endif  // ORDERHOLD_TESTS_TESTING_FAKE_CLOCK_H_
