#include "server/store/redis_hold_store.h"

#include <algorithm>
#include <array>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/common/status_macros.h"
#include "server/store/redis_script_call.h"

namespace orderhold::store {

// The shared script-call helpers (redis_script_call.h).
using internal::BadReply;
using internal::Eval;
using internal::FromMillis;
using internal::IntArray;
using internal::Ints;
using internal::Millis;
using internal::NowArg;
using internal::Parsed;
using internal::Plain;
using internal::Script;
using internal::ToDetails;
using internal::ToInt;
using internal::ToOutcome;

std::vector<std::string> RedisHoldStore::Scripts() {
  std::vector<std::string> bodies;
  for (const lua::ScriptSpec& spec : lua::kScripts) bodies.emplace_back(spec.body);
  return bodies;
}

std::string RedisHoldStore::FunctionLibrary() { return lua::kFunctionLibrary; }

std::vector<std::string> RedisHoldStore::Functions() {
  std::vector<std::string> names;
  for (const lua::ScriptSpec& spec : lua::kScripts) names.emplace_back(spec.function);
  return names;
}

absl::StatusOr<std::unique_ptr<RedisHoldStore>> RedisHoldStore::Create(
    std::string key_prefix, OutcomePolicy outcomes, std::unique_ptr<redis::RedisCaller> client,
    std::unique_ptr<redis::RedisCaller> background, bool scope_index) {
  ORDERHOLD_RETURN_IF_ERROR(ValidateKeyPrefix(key_prefix));
  if (outcomes.retention < absl::Milliseconds(1) || outcomes.max_per_user < 1) {
    return absl::InvalidArgumentError(
        "outcome_retention must be >= 1ms and max_outcomes_per_user >= 1");
  }
  if (client == nullptr || background == nullptr) {
    return absl::InvalidArgumentError("redis hold store: both callers are required");
  }
  return std::unique_ptr<RedisHoldStore>(new RedisHoldStore(KeySchema(std::move(key_prefix)),
                                                            outcomes, std::move(client),
                                                            std::move(background), scope_index));
}

RedisHoldStore::RedisHoldStore(KeySchema keys, OutcomePolicy outcomes,
                               std::unique_ptr<redis::RedisCaller> client,
                               std::unique_ptr<redis::RedisCaller> background, bool scope_index)
    : keys_(std::move(keys)),
      retention_ms_(absl::StrCat(Millis(outcomes.retention))),
      max_outcomes_(absl::StrCat(outcomes.max_per_user)),
      max_stream_len_(absl::StrCat(std::max<int64_t>(0, outcomes.event_stream_max_len))),
      trim_keep_(absl::StrCat(std::max<int64_t>(0, outcomes.event_stream_max_len) * 9 / 10)),
      scope_index_(scope_index ? keys_.ScopeIndexStart() : std::string()),
      client_(std::move(client)),
      background_(std::move(background)) {}

void RedisHoldStore::PlaceHold(PlaceHoldArgs args, CallOptions options,
                               Callback<PlaceHoldResult> done) {
  const KeySchema::UserKeys keys = keys_.ForUser(args.user_id);
  const bool scoped = !args.details.scope.empty();
  redis::RedisCommand command = Eval<Script::kPlaceHold>(
      {keys.holds_bucket, keys.due_bucket, keys.outcomes, keys.ended, keys.events,
       keys.bucket_index},
      {args.user_id, args.order_id, Millis(args.ttl), int64_t{args.max_holds}, NowArg(options),
       retention_ms_, max_outcomes_, int64_t{args.max_units}, args.details.scope,
       std::max<int64_t>(1, args.details.quantity),
       int64_t{scoped ? args.details.scope_limits.max_holds : 0},
       int64_t{scoped ? args.details.scope_limits.max_units : 0},
       IsPlain(args.details) ? std::string() : EncodeDetailsTail(args.details),
       std::max<int64_t>(1, Millis(args.max_lifetime)), max_stream_len_, scope_index_,
       int64_t{scoped && !scope_index_.empty() ? args.totals.max_holds : 0},
       int64_t{scoped && !scope_index_.empty() ? args.totals.max_units : 0}});
  command.writes = true;
  command.inline_ok = true;  // one command per gRPC call: see redis_client.h
  client_->Submit(
      std::move(command), options.deadline,
      Parsed(std::move(done),
             [](const redis::RedisReply& reply) -> absl::StatusOr<PlaceHoldResult> {
               Ints v;
               int64_t total_holds = 0, total_units = 0;
               if (!IntArray(reply, 15, &v, 11) || v[0] < -2 || v[0] > 1 ||
                   !ToInt(reply.elements[13], &total_holds) ||
                   !ToInt(reply.elements[14], &total_units)) {
                 return BadReply("place_hold.lua");
               }
               PlaceHoldResult result;
               result.outcome = v[0] == 1    ? PlaceHoldResult::Outcome::kCreated
                                : v[0] == 0  ? PlaceHoldResult::Outcome::kAlreadyHeld
                                : v[0] == -1 ? PlaceHoldResult::Outcome::kLimitReached
                                             : PlaceHoldResult::Outcome::kEnded;
               if (result.outcome == PlaceHoldResult::Outcome::kEnded) {
                 if (!ToOutcome(v[5], &result.ended.outcome)) return BadReply("place_hold.lua");
                 result.ended.end_time = FromMillis(v[6]);
                 result.ended.expire_time = FromMillis(v[2]);
               }
               result.now = FromMillis(v[1]);
               result.expire_time = FromMillis(v[2]);
               result.active_holds = static_cast<int>(v[3]);
               result.expired_removed = static_cast<int>(v[4]);
               result.user_units = v[7];
               result.scope_holds = static_cast<int>(v[8]);
               result.scope_units = v[9];
               result.violations = static_cast<int>(v[10]);
               result.total_holds = total_holds;
               result.total_units = total_units;
               if (!ToDetails(reply.elements[11], reply.elements[12], v[2], &result.details)) {
                 return BadReply("place_hold.lua");
               }
               return result;
             }));
}

void RedisHoldStore::EndHold(std::string user_id, std::string order_id, HoldOutcome outcome,
                             CallOptions options, Callback<EndHoldResult> done) {
  const KeySchema::UserKeys keys = keys_.ForUser(user_id);
  redis::RedisCommand command = Eval<Script::kEndHold>(
      {keys.holds_bucket, keys.due_bucket, keys.outcomes, keys.ended, keys.events,
       keys.bucket_index},
      {user_id, order_id, int64_t{static_cast<int>(outcome)}, NowArg(options), retention_ms_,
       max_outcomes_, max_stream_len_, scope_index_});
  command.writes = true;
  command.inline_ok = true;  // one command per gRPC call: see redis_client.h
  client_->Submit(
      std::move(command), options.deadline,
      Parsed(std::move(done), [](const redis::RedisReply& reply) -> absl::StatusOr<EndHoldResult> {
        Ints v;
        if (!IntArray(reply, 8, &v, 6) || v[0] < 0 || v[0] > 2) return BadReply("end_hold.lua");
        EndHoldResult result;
        result.now = FromMillis(v[1]);
        result.expired_removed = static_cast<int>(v[3]);
        if (v[0] == 0) return result;
        result.result =
            v[0] == 1 ? EndHoldResult::Result::kEnded : EndHoldResult::Result::kAlreadyEnded;
        if (!ToOutcome(v[4], &result.end.outcome)) return BadReply("end_hold.lua");
        result.end.expire_time = FromMillis(v[2]);
        result.end.end_time = FromMillis(v[5]);
        if (!ToDetails(reply.elements[6], reply.elements[7], v[2], &result.details)) {
          return BadReply("end_hold.lua");
        }
        return result;
      }));
}

void RedisHoldStore::ListHolds(ListHoldsArgs args, CallOptions options,
                               Callback<ListHoldsResult> done) {
  std::string after_expire, after_order;
  if (args.after.has_value()) {
    after_expire = absl::StrCat(absl::ToUnixMillis(args.after->expire_time));
    after_order = std::move(args.after->order_id);
  }
  redis::RedisCommand command =
      Eval<Script::kListHolds>({keys_.ForUser(args.user_id).holds_bucket},
                               {args.user_id, NowArg(options), args.scope, after_expire,
                                after_order, absl::StrCat(std::max(1, args.page_size))});
  command.inline_ok = true;  // one command per gRPC call: see redis_client.h
  client_->Submit(
      std::move(command), options.deadline,
      Parsed(std::move(done),
             [](const redis::RedisReply& reply) -> absl::StatusOr<ListHoldsResult> {
               int64_t now = 0;
               Ints usage;
               if (reply.type != redis::RedisReply::Type::kArray || reply.elements.size() != 5 ||
                   !ToInt(reply.elements[0], &now) ||
                   reply.elements[1].type != redis::RedisReply::Type::kArray ||
                   reply.elements[1].elements.size() % 2 != 0 ||
                   reply.elements[2].type != redis::RedisReply::Type::kArray ||
                   reply.elements[2].elements.size() * 2 != reply.elements[1].elements.size() ||
                   reply.elements[3].type != redis::RedisReply::Type::kArray ||
                   reply.elements[3].elements.size() != reply.elements[2].elements.size() ||
                   !IntArray(reply.elements[4], 6, &usage)) {
                 return BadReply("list_holds.lua");
               }
               ListHoldsResult result;
               result.now = FromMillis(now);
               result.user_holds = usage[0];
               result.user_units = usage[1];
               result.scope_holds = usage[2];
               result.scope_units = usage[3];
               result.plain = usage[4] == 1;
               result.more = usage[5] == 1;
               const auto& pairs = reply.elements[1].elements;
               for (size_t i = 0; i < pairs.size(); i += 2) {
                 int64_t expire = 0;
                 StoredHold hold;
                 if (pairs[i].type != redis::RedisReply::Type::kString ||
                     !ToInt(pairs[i + 1], &expire) ||
                     !ToDetails(reply.elements[2].elements[i / 2],
                                reply.elements[3].elements[i / 2], expire, &hold.details)) {
                   return BadReply("list_holds.lua");
                 }
                 hold.order_id = pairs[i].str;
                 hold.expire_time = FromMillis(expire);
                 result.holds.push_back(std::move(hold));
               }
               return result;
             }));
}

void RedisHoldStore::ExtendHold(ExtendHoldArgs args, CallOptions options,
                                Callback<ExtendHoldResult> done) {
  const KeySchema::UserKeys keys = keys_.ForUser(args.user_id);
  redis::RedisCommand command = Eval<Script::kExtendHold>(
      {keys.holds_bucket, keys.due_bucket, keys.outcomes, keys.ended, keys.events,
       keys.bucket_index},
      {args.user_id, args.order_id, absl::StrCat(Millis(args.ttl)), NowArg(options), retention_ms_,
       max_outcomes_, absl::StrCat(args.max_extensions), args.request_id,
       absl::StrCat(std::max<int64_t>(1, Millis(args.max_lifetime))),
       absl::StrCat(std::max<int64_t>(1, Millis(args.default_ttl))), max_stream_len_,
       scope_index_});
  command.writes = true;
  command.inline_ok = true;  // one command per gRPC call: see redis_client.h
  client_->Submit(
      std::move(command), options.deadline,
      Parsed(std::move(done),
             [order_id = args.order_id](
                 const redis::RedisReply& reply) -> absl::StatusOr<ExtendHoldResult> {
               Ints v;
               if (!IntArray(reply, 10, &v, 6) || v[0] < -1 || v[0] > 2) {
                 return BadReply("extend_hold.lua");
               }
               int64_t moved = 0, capped = 0;
               if (!ToInt(reply.elements[8], &moved) || !ToInt(reply.elements[9], &capped)) {
                 return BadReply("extend_hold.lua");
               }
               ExtendHoldResult result;
               result.now = FromMillis(v[1]);
               result.expired_removed = static_cast<int>(v[3]);
               switch (v[0]) {
                 case 0:
                   return result;
                 case 2:
                   result.result = ExtendHoldResult::Result::kEnded;
                   if (!ToOutcome(v[4], &result.end.outcome)) return BadReply("extend_hold.lua");
                   result.end.end_time = FromMillis(v[5]);
                   result.end.expire_time = FromMillis(v[2]);
                   return result;
                 default:
                   break;
               }
               result.result = v[0] == 1 ? ExtendHoldResult::Result::kLive
                                         : ExtendHoldResult::Result::kExhausted;
               result.hold.order_id = order_id;
               result.hold.expire_time = FromMillis(v[2]);
               result.extended = moved >= 1;
               result.replayed = moved == 2;
               result.capped = capped == 1;
               if (!ToDetails(reply.elements[6], reply.elements[7], v[2], &result.hold.details)) {
                 return BadReply("extend_hold.lua");
               }
               return result;
             }));
}

void RedisHoldStore::GetHold(std::string user_id, std::string order_id, CallOptions options,
                             Callback<GetHoldResult> done) {
  const KeySchema::UserKeys keys = keys_.ForUser(user_id);
  redis::RedisCommand command = Eval<Script::kGetHold>(
      {keys.holds_bucket, keys.outcomes}, {user_id, order_id, NowArg(options), retention_ms_});
  command.inline_ok = true;  // one command per gRPC call: see redis_client.h
  client_->Submit(
      std::move(command), options.deadline,
      Parsed(std::move(done),
             [order_id](const redis::RedisReply& reply) -> absl::StatusOr<GetHoldResult> {
               Ints v;
               if (!IntArray(reply, 7, &v, 5) || v[0] < 0 || v[0] > 2) {
                 return BadReply("get_hold.lua");
               }
               GetHoldResult result;
               result.now = FromMillis(v[1]);
               if (v[0] == 0) return result;
               result.state =
                   v[0] == 1 ? GetHoldResult::State::kLive : GetHoldResult::State::kEnded;
               result.hold.order_id = order_id;
               result.hold.expire_time = FromMillis(v[2]);
               if (result.state == GetHoldResult::State::kEnded) {
                 if (!ToOutcome(v[3], &result.end.outcome)) return BadReply("get_hold.lua");
                 result.end.end_time = FromMillis(v[4]);
                 result.end.expire_time = result.hold.expire_time;
               }
               if (!ToDetails(reply.elements[5], reply.elements[6], v[2], &result.hold.details)) {
                 return BadReply("get_hold.lua");
               }
               return result;
             }));
}

void RedisHoldStore::ReleaseHolds(std::string user_id, std::string scope, CallOptions options,
                                  Callback<ReleaseHoldsResult> done) {
  const KeySchema::UserKeys keys = keys_.ForUser(user_id);
  redis::RedisCommand command =
      Eval<Script::kReleaseHolds>({keys.holds_bucket, keys.due_bucket, keys.outcomes, keys.ended,
                                   keys.events, keys.bucket_index},
                                  {user_id, scope, NowArg(options), retention_ms_, max_outcomes_,
                                   max_stream_len_, scope_index_});
  command.writes = true;
  command.inline_ok = true;  // one command per gRPC call: see redis_client.h
  client_->Submit(std::move(command), options.deadline,
                  Parsed(std::move(done),
                         [](const redis::RedisReply& reply) -> absl::StatusOr<ReleaseHoldsResult> {
                           Ints v;
                           if (!IntArray(reply, 3, &v, 2) ||
                               reply.elements[2].type != redis::RedisReply::Type::kArray ||
                               reply.elements[2].elements.size() % 4 != 0) {
                             return BadReply("release_holds.lua");
                           }
                           ReleaseHoldsResult result;
                           result.now = FromMillis(v[0]);
                           result.expired_removed = static_cast<int>(v[1]);
                           const auto& flat = reply.elements[2].elements;
                           for (size_t i = 0; i < flat.size(); i += 4) {
                             int64_t expire = 0;
                             StoredHold hold;
                             if (flat[i].type != redis::RedisReply::Type::kString ||
                                 !ToInt(flat[i + 1], &expire) ||
                                 !ToDetails(flat[i + 2], flat[i + 3], expire, &hold.details)) {
                               return BadReply("release_holds.lua");
                             }
                             hold.order_id = flat[i].str;
                             hold.expire_time = FromMillis(expire);
                             result.released.push_back(std::move(hold));
                           }
                           return result;
                         }));
}

void RedisHoldStore::ListScopeHolds(ListScopeHoldsArgs args, CallOptions options,
                                    Callback<ListScopeHoldsResult> done) {
  if (scope_index_.empty()) {
    std::move(done)(absl::FailedPreconditionError(
        "scope usage needs the scope index, which a Redis Cluster does not keep"));
    return;
  }
  const std::string live = keys_.ScopeLiveKey(args.scope);
  const std::string units = keys_.ScopeUnitsKey(args.scope);
  redis::RedisCommand command = Eval<Script::kScopeHolds>(
      {live, units},
      {NowArg(options),
       args.after.has_value() ? absl::StrCat(absl::ToUnixMillis(args.after->expire_time))
                              : std::string(),
       args.after.has_value() ? args.after->order_id : std::string(),
       int64_t{std::max(0, args.page_size)}});
  command.inline_ok = true;  // one command per gRPC call: see redis_client.h
  client_->Submit(
      std::move(command), options.deadline,
      Parsed(std::move(done),
             [](const redis::RedisReply& reply) -> absl::StatusOr<ListScopeHoldsResult> {
               Ints v;
               if (!IntArray(reply, 6, &v, 5) ||
                   reply.elements[5].type != redis::RedisReply::Type::kArray ||
                   reply.elements[5].elements.size() % 2 != 0) {
                 return BadReply("scope_holds.lua");
               }
               ListScopeHoldsResult result;
               result.now = FromMillis(v[0]);
               result.scope_holds = v[1];
               result.scope_units = v[2];
               if (v[3] >= 0) result.first_expire_time = FromMillis(v[3]);
               result.more = v[4] == 1;
               const auto& flat = reply.elements[5].elements;
               for (size_t i = 0; i < flat.size(); i += 2) {
                 int64_t expire = 0;
                 if (flat[i].type != redis::RedisReply::Type::kString ||
                     !ToInt(flat[i + 1], &expire)) {
                   return BadReply("scope_holds.lua");
                 }
                 // "<quantity>:<user_id>\0<order_id>" (keys.h).
                 const std::string& member = flat[i].str;
                 const size_t colon = member.find(':');
                 const size_t zero = member.find('\0', colon == std::string::npos ? 0 : colon);
                 ScopeHold hold;
                 if (colon == std::string::npos || zero == std::string::npos ||
                     !absl::SimpleAtoi(absl::string_view(member).substr(0, colon),
                                       &hold.quantity)) {
                   return BadReply("scope_holds.lua");
                 }
                 hold.user_id = member.substr(colon + 1, zero - colon - 1);
                 hold.order_id = member.substr(zero + 1);
                 hold.expire_time = FromMillis(expire);
                 result.holds.push_back(std::move(hold));
                 result.last_key = member;
               }
               return result;
             }));
}

void RedisHoldStore::Ping(CallOptions options, Callback<absl::Time> done) {
  // Cluster: a slot without a known primary is keys that cannot be served, whatever TIME says.
  if (absl::Status routing = client_->CheckRouting(); !routing.ok()) {
    std::move(done)(std::move(routing));
    return;
  }
  redis::RedisCommand command = Plain({"TIME"});
  command.inline_ok = true;  // one call per health check
  client_->Submit(
      std::move(command), options.deadline,
      Parsed(std::move(done), [](const redis::RedisReply& reply) -> absl::StatusOr<absl::Time> {
        int64_t seconds = 0, micros = 0;
        if (reply.type != redis::RedisReply::Type::kArray || reply.elements.size() != 2 ||
            !ToInt(reply.elements[0], &seconds) || !ToInt(reply.elements[1], &micros)) {
          return BadReply("TIME");
        }
        return absl::FromUnixSeconds(seconds) + absl::Microseconds(micros);
      }));
}

}  // namespace orderhold::store
