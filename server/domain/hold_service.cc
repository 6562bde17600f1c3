#include "server/domain/hold_service.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "server/common/status_macros.h"

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

absl::Status EndedError(absl::string_view order_id, const store::HoldEnd& end,
                        absl::string_view what) {
  return absl::FailedPreconditionError(absl::StrCat(
      "order_id \"", order_id, "\" already ended: ", store::HoldOutcomeName(end.outcome), " at ",
      absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", end.end_time, absl::UTCTimeZone()), what));
}

namespace {

// INVALID_ARGUMENT naming user_id or order_id.
absl::Status ValidateIds(absl::string_view user_id, absl::string_view order_id) {
  ORDERHOLD_RETURN_IF_ERROR(ValidateId("user_id", user_id));
  return ValidateId("order_id", order_id);
}

// The hold's ttl, once the command is valid: INVALID_ARGUMENT naming user_id, order_id or ttl.
absl::StatusOr<absl::Duration> ValidatedTtl(const PlaceHoldCommand& command,
                                            const HoldPolicy& policy) {
  ORDERHOLD_RETURN_IF_ERROR(ValidateIds(command.user_id, command.order_id));
  return ResolveTtl(command.ttl, policy);
}

}  // namespace

HoldService::HoldService(store::HoldStore& store, HoldPolicy policy, metrics::Metrics& metrics)
    : store_(store), policy_(policy), metrics_(metrics) {}

void HoldService::Reject(metrics::RejectReason reason) { metrics_.RecordRejected(reason); }

void HoldService::PlaceHold(PlaceHoldCommand command, store::CallOptions options,
                            store::Callback<PlaceHoldReply> done) {
  absl::StatusOr<absl::Duration> ttl = ValidatedTtl(command, policy_);
  if (!ttl.ok()) {
    Reject(metrics::RejectReason::kInvalidArgument);
    std::move(done)(ttl.status());
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
        CountExpired(result->expired_removed);
        using Outcome = store::PlaceHoldResult::Outcome;
        if (result->outcome == Outcome::kEnded) {
          Reject(metrics::RejectReason::kAlreadyEnded);
          std::move(done)(EndedError(order_id, result->ended,
                                     "; an order is held at most once (place a new order_id)"));
          return;
        }
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

void HoldService::CountExpired(int expired) {
  if (expired <= 0) return;
  metrics_.holds_expired().Increment(expired);
  metrics_.events_appended().Increment(expired);
}

void HoldService::End(std::string user_id, std::string order_id, store::HoldOutcome outcome,
                      store::CallOptions options, store::Callback<Ended> done) {
  if (absl::Status status = ValidateIds(user_id, order_id); !status.ok()) {
    std::move(done)(status);
    return;
  }
  store_.EndHold(user_id, order_id, outcome, options,
                 [this, user_id, order_id, outcome,
                  done = std::move(done)](absl::StatusOr<store::EndHoldResult> result) mutable {
                   if (!result.ok()) {
                     std::move(done)(result.status());
                     return;
                   }
                   CountExpired(result->expired_removed);
                   using Result = store::EndHoldResult::Result;
                   if (result->result == Result::kUnknown) {
                     std::move(done)(absl::NotFoundError(
                         absl::StrCat("no hold for order_id \"", order_id,
                                      "\" of this user_id (never placed, or ended longer ago than "
                                      "the outcome retention)")));
                     return;
                   }
                   const bool repeated = result->result == Result::kAlreadyEnded;
                   if (repeated && result->end.outcome != outcome) {
                     std::move(done)(EndedError(order_id, result->end,
                                                outcome == store::HoldOutcome::kPaid
                                                    ? "; it can no longer be paid"
                                                    : "; it can no longer be cancelled"));
                     return;
                   }
                   if (!repeated) {
                     (outcome == store::HoldOutcome::kPaid ? metrics_.holds_paid()
                                                           : metrics_.holds_cancelled())
                         .Increment();
                     metrics_.events_appended().Increment();
                   }
                   std::move(done)(
                       Ended{Hold{std::move(user_id), std::move(order_id), result->end.expire_time},
                             repeated ? result->end.end_time : result->now, repeated});
                 });
}

void HoldService::Pay(std::string user_id, std::string order_id, store::CallOptions options,
                      store::Callback<PayReply> done) {
  End(std::move(user_id), std::move(order_id), store::HoldOutcome::kPaid, options,
      [done = std::move(done)](absl::StatusOr<Ended> ended) mutable {
        if (!ended.ok()) return std::move(done)(ended.status());
        std::move(done)(PayReply{std::move(ended->hold), ended->now, ended->repeated});
      });
}

void HoldService::Cancel(std::string user_id, std::string order_id, store::CallOptions options,
                         store::Callback<CancelReply> done) {
  End(std::move(user_id), std::move(order_id), store::HoldOutcome::kCancelled, options,
      [done = std::move(done)](absl::StatusOr<Ended> ended) mutable {
        if (!ended.ok()) return std::move(done)(ended.status());
        std::move(done)(CancelReply{std::move(ended->hold), ended->now, ended->repeated});
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
