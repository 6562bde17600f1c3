// The end of one granted hold in an end-to-end herd: Pay or CancelHold through a replica, retried
// as a client retries, and the grant's live interval closed as the oracle needs it
// (live_intervals.h). Header-only: it needs the service's stubs, which the test binaries link.
#ifndef ORDERHOLD_TESTS_TESTING_HERD_ENDS_H_
#define ORDERHOLD_TESTS_TESTING_HERD_ENDS_H_

#include <algorithm>
#include <string>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "grpcpp/client_context.h"
#include "gtest/gtest.h"
#include "orderhold/v1/orderhold.grpc.pb.h"
#include "tests/testing/grpc_retry.h"
#include "tests/testing/live_intervals.h"

namespace orderhold::testing {

// Pays (`pay`) or cancels order `order` of `user` through `stub`, each attempt with a deadline of
// `timeout`, retrying UNAVAILABLE (RetryUnavailableCall: a retry of an end that was recorded
// answers already_paid / already_cancelled, which counts as this call's). Expects OK, or
// FAILED_PRECONDITION (the hold expired first: `grant.to` stands). Closes `grant` no later than
// the last attempt's send (an upper bound of the end), or never when this call paid it and
// `sold_stays` (a capacity's "held + sold": a sale counts for ever). Returns whether this call
// paid it. Thread-safe for distinct grants (stubs are).
inline bool EndGrant(v1::OrderHold::Stub& stub, const std::string& user, const std::string& order,
                     bool pay, bool sold_stays, Grant& grant,
                     absl::Duration timeout = absl::Seconds(20)) {
  const auto with_deadline = [timeout](grpc::ClientContext* context) {
    context->set_deadline(absl::ToChronoTime(absl::Now() + timeout));
    return context;
  };
  CallAttempts end;
  grpc::Status ended;
  bool paid_now = false;
  if (pay) {
    v1::PayRequest request;
    request.set_user_id(user);
    request.set_order_id(order);
    v1::PayResponse paid;
    ended = RetryUnavailableCall(
        [&] {
          grpc::ClientContext context;
          return stub.Pay(with_deadline(&context), request, &paid);
        },
        &end);
    paid_now = ended.ok() && (!paid.already_paid() || end.retried());
  } else {
    v1::CancelHoldRequest request;
    request.set_user_id(user);
    request.set_order_id(order);
    v1::CancelHoldResponse cancelled;
    ended = RetryUnavailableCall(
        [&] {
          grpc::ClientContext context;
          return stub.CancelHold(with_deadline(&context), request, &cancelled);
        },
        &end);
  }
  EXPECT_TRUE(ended.ok() || ended.error_code() == grpc::StatusCode::FAILED_PRECONDITION)
      << ended.error_message();
  grant.to = paid_now && sold_stays ? absl::InfiniteFuture() : std::min(grant.to, end.last_sent);
  return paid_now;
}

}  // namespace orderhold::testing

#endif  // ORDERHOLD_TESTS_TESTING_HERD_ENDS_H_
