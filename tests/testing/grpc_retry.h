// Retrying a gRPC call that answered UNAVAILABLE, as a client of OrderHold does, for end-to-end
// herds on a loaded machine. Header-only (gRPC's status and absl time only).
#ifndef ORDERHOLD_TESTS_TESTING_GRPC_RETRY_H_
#define ORDERHOLD_TESTS_TESTING_GRPC_RETRY_H_

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "grpcpp/support/status.h"

namespace orderhold::testing {

// What RetryUnavailableCall did: how many attempts it sent, and when it sent the last one.
struct CallAttempts {
  int sent = 0;
  // The host time the last attempt was sent. Whichever attempt recorded what the call asked (an
  // attempt answered UNAVAILABLE may have been recorded: its answer was lost, not its write), it
  // happened before the last attempt answered, and for a one-shot change (an end, a refund) no
  // later than the last attempt's send: an upper bound for an oracle of live intervals.
  absl::Time last_sent = absl::InfinitePast();
  bool retried() const { return sent > 1; }
};

// Calls `call()` (which builds its own grpc::ClientContext and returns grpc::Status) until it
// answers anything but UNAVAILABLE (the code AIP-194 lets a caller retry: a Redis node that did not
// answer in time, a failover), at most `max_attempts` times, `pause` apart; returns the last
// answer. The caller must treat a retry's "already done" answer (Pay's already_paid, PlaceHold's
// created = false, ReturnUnits' already_returned) as its own when `attempts->retried()`: only
// idempotent calls (an order id, a request id) may be retried. Thread-compatible.
template <typename Call>
grpc::Status RetryUnavailableCall(Call call, CallAttempts* attempts = nullptr,
                                  int max_attempts = 40,
                                  absl::Duration pause = absl::Milliseconds(250)) {
  CallAttempts local;
  CallAttempts& out = attempts != nullptr ? *attempts : local;
  out = CallAttempts{};
  for (;;) {
    out.last_sent = absl::Now();
    ++out.sent;
    grpc::Status status = call();
    if (status.error_code() != grpc::StatusCode::UNAVAILABLE || out.sent >= max_attempts) {
      return status;
    }
    absl::SleepFor(pause);
  }
}

}  // namespace orderhold::testing

#endif  // ORDERHOLD_TESTS_TESTING_GRPC_RETRY_H_
