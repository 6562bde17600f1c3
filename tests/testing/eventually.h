// Polling with a deadline instead of fixed sleeps.
#ifndef ORDERHOLD_TESTS_TESTING_EVENTUALLY_H_
#define ORDERHOLD_TESTS_TESTING_EVENTUALLY_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
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

namespace internal {
inline const absl::Status& StatusOf(const absl::Status& status) { return status; }
template <typename T>
const absl::Status& StatusOf(const absl::StatusOr<T>& result) {
  return result.status();
}
}  // namespace internal

// Calls `call` (returning absl::Status or absl::StatusOr<T>) until it answers anything but
// UNAVAILABLE, the code a caller may retry (Redis restarting or loading, a connection failing
// fast), or until `timeout` passes; returns the last answer. For checks that come right after a
// fault, where one slow answer on a loaded machine is the contract (UNAVAILABLE, retry), not a
// failure. Thread-compatible.
template <typename Call>
auto RetryUnavailable(Call call, absl::Duration timeout = absl::Seconds(10),
                      absl::Duration pause = absl::Milliseconds(50)) {
  const absl::Time give_up = absl::Now() + timeout;
  auto answer = call();
  while (absl::IsUnavailable(internal::StatusOf(answer)) && absl::Now() < give_up) {
    absl::SleepFor(pause);
    answer = call();
  }
  return answer;
}

}  // namespace orderhold::testing

#endif  // ORDERHOLD_TESTS_TESTING_EVENTUALLY_H_
