// RedisHoldStore::ReturnUnits: return_units.lua gives units of a paid hold back to its scope's
// sold count and to the buyer's purchases, with one RETURNED event (lua/prelude/20_records.lua
// "RETURNS" has the record's format).
#include <utility>

#include "server/store/redis_hold_store.h"
#include "server/store/redis_script_call.h"

namespace orderhold::store {

using internal::Arg;
using internal::BadReply;
using internal::Eval;
using internal::FromMillis;
using internal::NowArg;
using internal::ParsedAs;
using internal::ToDetails;

void RedisHoldStore::ReturnUnits(ReturnUnitsArgs args, CallOptions options,
                                 Callback<ReturnUnitsResult> done) {
  const KeySchema::UserKeys keys = keys_.ForUser(args.user_id);
  redis::RedisCommand command = Eval({keys.holds_bucket, keys.due_bucket, keys.outcomes, keys.ended,
                                      keys.events, keys.bucket_index},
                                     lua::ReturnUnitsArgv<Arg>{.user = args.user_id,
                                                               .order = args.order_id,
                                                               .units = args.units,
                                                               .request = args.request_id,
                                                               .now = NowArg(options),
                                                               .store = store_arg_});
  command.writes = true;
  command.inline_ok = true;  // one command per gRPC call: see redis_client.h
  client_->Submit(
      std::move(command), options.deadline,
      ParsedAs<lua::ReturnUnitsReply>(
          std::move(done), [](const lua::ReturnUnitsReply& r) -> absl::StatusOr<ReturnUnitsResult> {
            using Result = ReturnUnitsResult::Result;
            static constexpr Result kResults[] = {
                Result::kUnknown, Result::kReturned,        Result::kAlreadyReturned, Result::kLive,
                Result::kNotPaid, Result::kExceedsQuantity, Result::kTooManyReturns};
            if (r.result < 0 || r.result > 6) return BadReply("return_units.lua");
            ReturnUnitsResult result;
            result.result = kResults[r.result];
            result.now = FromMillis(r.now);
            if (r.result == 0 || r.result == 3) return result;
            if (!internal::ToOutcome(r.outcome, &result.end.outcome) ||
                !ToDetails(r.details, r.expire, &result.details)) {
              return BadReply("return_units.lua");
            }
            result.end.expire_time = FromMillis(r.expire);
            result.end.end_time = FromMillis(r.end);
            result.end.payment_reference = std::string(r.reference);
            result.quantity = r.quantity;
            result.units = r.units;
            result.total_returned = r.total;
            if (r.capped == 1) {
              result.purchase_usage = PurchaseUsage{
                  .holds = r.holds,
                  .units = r.held,
                  .caps = LevelLimits{.max_holds = r.max_holds, .max_units = r.max_units}};
            }
            return result;
          }));
}

}  // namespace orderhold::store
