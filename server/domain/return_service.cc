#include "server/domain/return_service.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "server/common/status_macros.h"
#include "server/domain/hold_errors.h"

namespace orderhold::domain {

namespace {

absl::Status Validate(const ReturnUnitsCommand& command) {
  ORDERHOLD_RETURN_IF_ERROR(ValidateId("user_id", command.user_id));
  ORDERHOLD_RETURN_IF_ERROR(ValidateId("order_id", command.order_id));
  if (command.units < 1) {
    return absl::InvalidArgumentError("units: must be at least 1 (the units to give back)");
  }
  if (command.request_id.empty()) {
    return absl::InvalidArgumentError(
        "request_id: required (a retry of the same return must carry the same one)");
  }
  return ValidateRequestId(command.request_id);
}

// The reply of a return made now or before; the error of every other result.
absl::StatusOr<ReturnUnitsReply> ReplyOf(const ReturnUnitsCommand& command,
                                         store::ReturnUnitsResult result) {
  using Result = store::ReturnUnitsResult::Result;
  switch (result.result) {
    case Result::kUnknown:
      return UnknownOrderError(command.order_id);
    case Result::kLive:
      return absl::FailedPreconditionError(
          absl::StrCat("order_id \"", command.order_id,
                       "\" is live (not paid); only a paid hold's units "
                       "can be returned: cancel it instead"));
    case Result::kNotPaid:
      return EndedError(command.order_id, result.end, "; only a paid hold's units can be returned");
    case Result::kExceedsQuantity:
      return ReturnExceedsError(command.order_id, command.units, result.quantity,
                                result.total_returned);
    case Result::kTooManyReturns:
      return TooManyReturnsError(command.order_id);
    case Result::kReturned:
    case Result::kAlreadyReturned:
      break;
  }
  ReturnUnitsReply reply;
  reply.hold =
      Hold{command.user_id, command.order_id, result.end.expire_time, std::move(result.details)};
  reply.now = result.now;
  reply.returned_units = result.units;
  reply.total_returned_units = result.total_returned;
  reply.already_returned = result.result == Result::kAlreadyReturned;
  reply.payment_reference = std::move(result.end.payment_reference);
  if (result.purchase_usage.has_value()) {
    reply.scope_usage =
        LevelUsage{.holds = result.purchase_usage->holds,
                   .units = result.purchase_usage->units,
                   .limits = ScopeLimits{.max_holds = result.purchase_usage->caps.max_holds,
                                         .max_units = result.purchase_usage->caps.max_units}};
  }
  return reply;
}

}  // namespace

void ReturnService::ReturnUnits(ReturnUnitsCommand command, store::CallOptions options,
                                store::Callback<ReturnUnitsReply> done) {
  if (absl::Status valid = Validate(command); !valid.ok()) {
    std::move(done)(std::move(valid));
    return;
  }
  store::ReturnUnitsArgs args{.user_id = command.user_id,
                              .order_id = command.order_id,
                              .units = command.units,
                              .request_id = command.request_id};
  store_.ReturnUnits(std::move(args), options,
                     [this, command = std::move(command), done = std::move(done)](
                         absl::StatusOr<store::ReturnUnitsResult> result) mutable {
                       if (!result.ok()) {
                         if (absl::IsUnimplemented(result.status())) {
                           return std::move(done)(absl::FailedPreconditionError(
                               "ReturnUnits: this server's store keeps no returns (--store=noop)"));
                         }
                         return std::move(done)(result.status());
                       }
                       if (result->result == store::ReturnUnitsResult::Result::kReturned) {
                         metrics_.units_returned().Increment(static_cast<double>(result->units));
                         metrics_.events_appended().Increment();
                       }
                       std::move(done)(ReplyOf(command, *std::move(result)));
                     });
}

}  // namespace orderhold::domain
