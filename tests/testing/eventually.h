// Polling with a deadline instead of fixed sleeps.
#ifndef ORDERHOLD_TESTS_TESTING_EVENTUALLY_H_
#define ORDERHOLD_TESTS_TESTING_EVENTUALLY_H_

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace orderhold::testing {

// Calls `condition` at once and then every `poll` until it returns true (-> true) or `timeout`
// passes (-> false). A longer `poll` suits conditions that are costly to check (one that starts a
// process, say). Host clock; thread-compatible (runs `condition` on the calling thread).
template <typename Condition>
bool Eventually(Condition condition, absl::Duration timeout = absl::Seconds(10),
                absl::Duration poll = absl::Milliseconds(10)) {
  const absl::Time give_up = absl::Now() + timeout;
  while (!condition()) {
    if (absl::Now() > give_up) return false;
    absl::SleepFor(poll);
  }
  return true;
}

}  // namespace orderhold::testing

#endif  // ORDERHOLD_TESTS_TESTING_EVENTUALLY_H_
