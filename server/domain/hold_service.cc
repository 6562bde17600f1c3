#include "server/domain/hold_service.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace orderhold::domain {

metrics::RejectReason RejectReasonFor(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kResourceExhausted:
      return metrics::RejectReason::kQuotaExceeded;
    case absl::StatusCode::kInvalidArgument:
      return metrics::RejectReason::kInvalidArgument;
    case absl::StatusCode::kUnavailable:
      return metrics::RejectReason::kUnavailable;
    case absl::StatusCode::kDeadlineExceeded:
      return metrics::RejectReason::kDeadlineExceeded;
    default:
      return metrics::RejectReason::kOther;
  }
}

HoldService::HoldService(store::HoldStore& store, HoldPolicy policy, metrics::Metrics& metrics)
    : store_(store), policy_(policy), metrics_(metrics) {}

void HoldService::Reject(metrics::RejectReason reason) { metrics_.RecordRejected(reason); }

void HoldService::PlaceHold(PlaceHoldCommand command, store::CallOptions options,
                            store::Callback<PlaceHoldReply> done) {
  absl::Status status = ValidateId("user_id", command.user_id);
  if (status.ok()) status = ValidateId("order_id", command.order_id);
  absl::StatusOr<absl::Duration> ttl = ResolveTtl(command.ttl, policy_);
  if (status.ok()) status = ttl.status();
  if (!status.ok()) {
    Reject(metrics::RejectReason::kInvalidArgument);
    std::move(done)(status);
    return;
  }
  store::PlaceHoldArgs args{command.user_id, command.order_id, *ttl, policy_.max_holds};
  store_.PlaceHold(
      std::move(args), options,
      [this, user_id = std::move(command.user_id), order_id = std::move(command.order_id),
       done = std::move(done)](absl::StatusOr<store::PlaceHoldResult> result) mutable {
        if (!result.ok()) {
          Reject(RejectReasonFor(result.status().code()));
          std::move(done)(result.status());
          return;
        }
        if (result->expired_removed > 0)
          metrics_.holds_expired().Increment(result->expired_removed);
        using Outcome = store::PlaceHoldResult::Outcome;
        if (result->outcome == Outcome::kLimitReached) {
          Reject(metrics::RejectReason::kQuotaExceeded);
          std::move(done)(absl::ResourceExhaustedError(absl::StrCat(
              "user_id already has ", result->active_holds, " unpaid holds (max_holds ",
              policy_.max_holds, "); the earliest expires at ",
              absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", result->expire_time, absl::UTCTimeZone()),
              " (in ", absl::FormatDuration(result->expire_time - result->now), ")")));
          return;
        }
        const bool created = result->outcome == Outcome::kCreated;
        if (created) metrics_.holds_placed().Increment();
        std::move(done)(
            PlaceHoldReply{Hold{std::move(user_id), std::move(order_id), result->expire_time},
                           result->now, created, result->active_holds, policy_.max_holds});
      });
}

void HoldService::Pay(std::string user_id, std::string order_id, store::CallOptions options,
                      store::Callback<PayReply> done) {
  absl::Status status = ValidateId("user_id", user_id);
  if (status.ok()) status = ValidateId("order_id", order_id);
  if (!status.ok()) {
    std::move(done)(status);
    return;
  }
  store_.Pay(
      user_id, order_id, options,
      [this, user_id, order_id,
       done = std::move(done)](absl::StatusOr<store::PayResult> result) mutable {
        if (!result.ok()) {
          std::move(done)(result.status());
          return;
        }
        if (!result->paid) {
          std::move(done)(absl::NotFoundError(
              absl::StrCat("no live hold for order_id \"", order_id,
                           "\" of this user_id (never placed, already paid, or expired)")));
          return;
        }
        metrics_.holds_paid().Increment();
        std::move(done)(PayReply{Hold{std::move(user_id), std::move(order_id), result->expire_time},
                                 result->now});
      });
}

void HoldService::ListHolds(std::string user_id, store::CallOptions options,
                            store::Callback<ListHoldsReply> done) {
  if (absl::Status status = ValidateId("user_id", user_id); !status.ok()) {
    std::move(done)(status);
    return;
  }
  store_.ListHolds(
      user_id, options,
      [this, user_id,
       done = std::move(done)](absl::StatusOr<store::ListHoldsResult> result) mutable {
        if (!result.ok()) {
          std::move(done)(result.status());
          return;
        }
        ListHoldsReply reply{{}, result->now, policy_.max_holds};
        reply.holds.reserve(result->holds.size());
        for (store::StoredHold& hold : result->holds) {
          reply.holds.push_back(Hold{user_id, std::move(hold.order_id), hold.expire_time});
        }
        std::move(done)(std::move(reply));
      });
}

}  // namespace orderhold::domain
