// Polling with a deadline instead of fixed sleeps.
#ifndef ORDERHOLD_TESTS_TESTING_EVENTUALLY_H_
#define ORDERHOLD_TESTS_TESTING_EVENTUALLY_H_

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace orderhold::testing {

// Polls `condition` every 10 ms until it returns true (-> true) or `timeout` passes (-> false).
template <typename Condition>
bool Eventually(Condition condition, absl::Duration timeout = absl::Seconds(10)) {
  const absl::Time give_up = absl::Now() + timeout;
  while (!condition()) {
    if (absl::Now() > give_up) return false;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return true;
}

}  // namespace orderhold::testing

#endif  // ORDERHOLD_TESTS_TESTING_EVENTUALLY_H_
