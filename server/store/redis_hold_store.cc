#include "server/store/redis_hold_store.h"

#include <algorithm>
#include <array>
#include <optional>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "server/common/status_macros.h"
#include "server/store/redis_script_call.h"

namespace orderhold::store {

// The shared script-call helpers (redis_script_call.h).
using internal::Arg;
using internal::BadReply;
using internal::Eval;
using internal::FromMillis;
using internal::Millis;
using internal::NowArg;
using internal::Parsed;
using internal::ParsedAs;
using internal::Plain;
using internal::StrOf;
using internal::ToDetails;
using internal::ToInt;
using internal::ToOutcome;

namespace {

// place_hold.lua's `asked`: the request's own scope limits ("" = none; "c:" a ceiling on the
// runtime rule's, "r:" in their place) and, with a limit class, "|<class>|" and the caller's
// identities, each with its length first.
std::string AskedArg(const PlaceHoldArgs& args) {
  if (args.details.scope.empty()) return "";
  std::string out;
  if (args.asked_limits.has_value()) {
    out = absl::StrCat(args.asked_replaces ? "r:" : "c:", args.asked_limits->max_holds, ":",
                       args.asked_limits->max_units);
  }
  if (args.limit_class.empty()) return out;
  absl::StrAppend(&out, "|", args.limit_class, "|");
  for (const std::string& identity : args.caller_identities) {
    absl::StrAppend(&out, identity.size(), ":", identity);
  }
  return out;
}

// place_hold.lua's `applied`: "<version>:<max_holds>:<max_units>:<total holds>:<total units>:
// <capacity>:<purchased units>:<purchased holds>"; nullopt for another shape.
std::optional<AppliedScopeRule> AppliedRuleOf(absl::string_view applied) {
  std::vector<absl::string_view> parts = absl::StrSplit(applied, ':');
  int64_t n[8];
  if (parts.size() != 8) return std::nullopt;
  for (int i = 0; i < 8; ++i) {
    if (!absl::SimpleAtoi(parts[i], &n[i])) return std::nullopt;
  }
  return AppliedScopeRule{absl::StrCat(n[0]), LevelLimits{n[1], n[2]}, LevelLimits{n[3], n[4]},
                          n[5], LevelLimits{n[7], n[6]}};
}

// One hold of a list reply (list_holds.lua's page, release_holds.lua's released): its order id,
// expiry (Unix ms), details and life record elements. False when one has another shape.
bool StoredHoldOf(const redis::RedisReply& order, const redis::RedisReply& expire,
                  const redis::RedisReply& details, const redis::RedisReply& life,
                  StoredHold* out) {
  const std::optional<absl::string_view> order_id = StrOf(order), details_value = StrOf(details),
                                         life_value = StrOf(life);
  int64_t expire_ms = 0;
  if (!order_id || !details_value || !life_value || !ToInt(expire, &expire_ms) ||
      !ToDetails(*details_value, *life_value, expire_ms, &out->details)) {
    return false;
  }
  out->order_id = std::string(*order_id);
  out->expire_time = FromMillis(expire_ms);
  return true;
}

// ExtendHold's result from extend_hold.lua's reply, for the hold of `order_id`.
absl::StatusOr<ExtendHoldResult> ExtendResultOf(const std::string& order_id,
                                                const lua::ExtendHoldReply& r) {
  if (r.result < -1 || r.result > 2) return BadReply("extend_hold.lua");
  ExtendHoldResult result;
  result.now = FromMillis(r.now);
  result.expired_removed = static_cast<int>(r.removed);
  switch (r.result) {
    case 0:
      return result;
    case 2:
      result.result = ExtendHoldResult::Result::kEnded;
      if (!ToOutcome(r.outcome, &result.end.outcome)) return BadReply("extend_hold.lua");
      result.end.end_time = FromMillis(r.end);
      result.end.expire_time = FromMillis(r.expire);
      return result;
    default:
      break;
  }
  result.result =
      r.result == 1 ? ExtendHoldResult::Result::kLive : ExtendHoldResult::Result::kExhausted;
  result.hold.order_id = order_id;
  result.hold.expire_time = FromMillis(r.expire);
  result.extended = r.moved >= 1;
  result.replayed = r.moved == 2;
  result.capped = r.capped == 1;
  if (!ToDetails(r.details, r.life, r.expire, &result.hold.details)) {
    return BadReply("extend_hold.lua");
  }
  return result;
}

// ListScopeHolds' result from scope_holds.lua's reply for `scope`: its page's members are
// "<quantity>:<user_id>\0<order_id>" (keys.h).
absl::StatusOr<ListScopeHoldsResult> ScopeHoldsResultOf(absl::string_view scope,
                                                        const lua::ScopeHoldsReply& r) {
  if (r.page.size() % 2 != 0) return BadReply("scope_holds.lua");
  ListScopeHoldsResult result;
  if (!r.rule.empty()) {
    result.rule = internal::UnpackScopeRule(scope, r.rule);
    if (!result.rule.has_value()) return BadReply("scope_holds.lua");
  }
  result.now = FromMillis(r.now);
  result.scope_holds = r.holds;
  result.scope_units = r.units;
  result.sold_units = r.sold;
  if (r.first >= 0) result.first_expire_time = FromMillis(r.first);
  result.more = r.more == 1;
  for (size_t i = 0; i < r.page.size(); i += 2) {
    const std::optional<absl::string_view> member = StrOf(r.page[i]);
    int64_t expire = 0;
    if (!member || !ToInt(r.page[i + 1], &expire)) return BadReply("scope_holds.lua");
    const size_t colon = member->find(':');
    const size_t zero = member->find('\0', colon == absl::string_view::npos ? 0 : colon);
    ScopeHold hold;
    if (colon == absl::string_view::npos || zero == absl::string_view::npos ||
        !absl::SimpleAtoi(member->substr(0, colon), &hold.quantity)) {
      return BadReply("scope_holds.lua");
    }
    hold.user_id = std::string(member->substr(colon + 1, zero - colon - 1));
    hold.order_id = std::string(member->substr(zero + 1));
    hold.expire_time = FromMillis(expire);
    result.holds.push_back(std::move(hold));
    result.last_key = std::string(*member);
  }
  return result;
}

}  // namespace

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
    std::unique_ptr<redis::RedisCaller> background, bool scope_index,
    std::optional<ScopeProtocolOptions> protocol) {
  ORDERHOLD_RETURN_IF_ERROR(ValidateKeyPrefix(key_prefix));
  if (protocol.has_value() && (scope_index || protocol->window < absl::Seconds(1) ||
                               protocol->margin < absl::ZeroDuration() ||
                               protocol->settle_timeout <= absl::ZeroDuration())) {
    return absl::InvalidArgumentError(
        "scope protocol: only without an in-script scope index, with a window >= 1s, a margin "
        ">= 0 and a settle timeout > 0");
  }
  if (outcomes.retention < absl::Milliseconds(1) || outcomes.max_per_user < 1) {
    return absl::InvalidArgumentError(
        "outcome_retention must be >= 1ms and max_outcomes_per_user >= 1");
  }
  if (outcomes.max_hold_lifetime < absl::Milliseconds(1) ||
      outcomes.default_ttl < absl::Milliseconds(1)) {
    return absl::InvalidArgumentError("max_hold_lifetime and default_ttl must be >= 1ms");
  }
  if (client == nullptr || background == nullptr) {
    return absl::InvalidArgumentError("redis hold store: both callers are required");
  }
  return std::unique_ptr<RedisHoldStore>(
      new RedisHoldStore(KeySchema(std::move(key_prefix)), outcomes, std::move(client),
                         std::move(background), scope_index, std::move(protocol)));
}

RedisHoldStore::RedisHoldStore(KeySchema keys, OutcomePolicy outcomes,
                               std::unique_ptr<redis::RedisCaller> client,
                               std::unique_ptr<redis::RedisCaller> background, bool scope_index,
                               std::optional<ScopeProtocolOptions> protocol)
    : keys_(std::move(keys)),
      retention_ms_(absl::StrCat(Millis(outcomes.retention))),
      trim_keep_(absl::StrCat(std::max<int64_t>(0, outcomes.event_stream_max_len) * 9 / 10)),
      scope_index_(scope_index ? keys_.ScopeIndexStart() : std::string()),
      store_arg_(absl::StrCat(retention_ms_, ":", outcomes.max_per_user, ":",
                              std::max<int64_t>(0, outcomes.event_stream_max_len), ":",
                              std::max<int64_t>(0, outcomes.event_stream_max_bytes), ":",
                              Millis(outcomes.max_hold_lifetime), ":", Millis(outcomes.default_ttl),
                              outcomes.layout_migration_done ? ":0:" : ":1:", scope_index_)),
      protocol_(std::move(protocol)),
      client_(std::move(client)),
      background_(std::move(background)) {}

void RedisHoldStore::PlaceHold(PlaceHoldArgs args, CallOptions options,
                               Callback<PlaceHoldResult> done) {
  if (protocol_.has_value() && !args.details.scope.empty()) {
    PlaceAcrossSlots(std::move(args), options, std::move(done));
    return;
  }
  PlaceInUserSlot(args, options, "", std::move(done));
}

void RedisHoldStore::PlaceInUserSlot(const PlaceHoldArgs& args, const CallOptions& options,
                                     const std::string& take, Callback<PlaceHoldResult> done) {
  const KeySchema::UserKeys keys = keys_.ForUser(args.user_id);
  const bool totals = !args.details.scope.empty() && !scope_index_.empty();
  const std::string limits =
      absl::StrCat(args.max_holds, ":", std::max<int64_t>(0, args.max_units), ":",
                   totals ? args.totals.max_holds : 0, ":", totals ? args.totals.max_units : 0, ":",
                   totals ? std::max<int64_t>(0, args.capacity_units) : 0);
  redis::RedisCommand command =
      Eval({keys.holds_bucket, keys.due_bucket, keys.outcomes, keys.ended, keys.events,
            keys.bucket_index},
           lua::PlaceHoldArgv<Arg>{
               .user = args.user_id,
               .order = args.order_id,
               .ttl = Millis(args.ttl),
               .now = NowArg(options),
               .limits = limits,
               .lifetime = std::max<int64_t>(1, Millis(args.max_lifetime)),
               .details = IsPlain(args.details) ? std::string() : EncodeDetailsTail(args.details),
               .store = store_arg_,
               .take = take,
               .asked = AskedArg(args)});
  command.writes = true;
  command.inline_ok = true;  // one command per gRPC call: see redis_client.h
  client_->Submit(
      std::move(command), options.deadline,
      ParsedAs<lua::PlaceHoldReply>(
          std::move(done), [](const lua::PlaceHoldReply& r) -> absl::StatusOr<PlaceHoldResult> {
            if (r.result == -3) {
              return absl::UnavailableError(
                  "the hold's place in its scope was taken too long ago; retry the same call");
            }
            using Outcome = PlaceHoldResult::Outcome;
            static constexpr Outcome kOutcomes[] = {Outcome::kClassDenied,
                                                    Outcome::kNeverFits,
                                                    Outcome::kScopeNotOpen,
                                                    Outcome::kScopeClosed,
                                                    Outcome::kLimitReached /* -3: answered above */,
                                                    Outcome::kEnded,
                                                    Outcome::kLimitReached,
                                                    Outcome::kAlreadyHeld,
                                                    Outcome::kCreated};
            if (r.result < -7 || r.result > 1) return BadReply("place_hold.lua");
            PlaceHoldResult result;
            result.outcome = kOutcomes[r.result + 7];
            if (!r.applied.empty()) {
              result.rule = AppliedRuleOf(r.applied);
              if (!result.rule.has_value()) return BadReply("place_hold.lua");
            }
            if (result.outcome == PlaceHoldResult::Outcome::kEnded) {
              if (!ToOutcome(r.ended_outcome, &result.ended.outcome)) {
                return BadReply("place_hold.lua");
              }
              result.ended.end_time = FromMillis(r.ended_at);
              result.ended.expire_time = FromMillis(r.expire);
            }
            result.now = FromMillis(r.now);
            result.expire_time = FromMillis(r.expire);
            result.active_holds = static_cast<int>(r.active);
            result.expired_removed = static_cast<int>(r.removed);
            result.user_units = r.units;
            result.scope_holds = static_cast<int>(r.scope_holds);
            result.scope_units = r.scope_units;
            result.violations = static_cast<int>(r.violations);
            result.total_holds = r.total_holds;
            result.total_units = r.total_units;
            result.sold_units = r.sold;
            result.purchased_units = r.bought_units;
            result.purchased_holds = r.bought_holds;
            if (!ToDetails(r.details, r.life, r.expire, &result.details)) {
              return BadReply("place_hold.lua");
            }
            return result;
          }));
}

void RedisHoldStore::EndHold(std::string user_id, std::string order_id, HoldOutcome outcome,
                             std::string payment_reference, CallOptions options,
                             Callback<EndHoldResult> done) {
  const KeySchema::UserKeys keys = keys_.ForUser(user_id);
  redis::RedisCommand command =
      Eval({keys.holds_bucket, keys.due_bucket, keys.outcomes, keys.ended, keys.events,
            keys.bucket_index},
           lua::EndHoldArgv<Arg>{.user = user_id,
                                 .order = order_id,
                                 .outcome = int64_t{static_cast<int>(outcome)},
                                 .now = NowArg(options),
                                 .store = store_arg_,
                                 .reference = payment_reference});
  command.writes = true;
  command.inline_ok = true;  // one command per gRPC call: see redis_client.h
  if (protocol_.has_value()) {
    // Across slots, the ended hold's entry is dropped before the answer (a retry of an end whose
    // drop was lost drops it again).
    done = [this, user_id, order_id,
            done = std::move(done)](absl::StatusOr<EndHoldResult> result) mutable {
      if (!result.ok() || result->result == EndHoldResult::Result::kUnknown ||
          result->end.outcome == HoldOutcome::kExpired || result->details.scope.empty()) {
        std::move(done)(std::move(result));
        return;
      }
      std::vector<StoredHold> ended{StoredHold{order_id, result->end.expire_time, result->details}};
      auto answer = std::make_shared<absl::StatusOr<EndHoldResult>>(std::move(result));
      DropEnded(user_id, ended, [answer, done = std::move(done)]() mutable {
        std::move(done)(std::move(*answer));
      });
    };
  }
  client_->Submit(
      std::move(command), options.deadline,
      ParsedAs<lua::EndHoldReply>(
          std::move(done), [](const lua::EndHoldReply& r) -> absl::StatusOr<EndHoldResult> {
            if (r.result < 0 || r.result > 2) return BadReply("end_hold.lua");
            EndHoldResult result;
            result.now = FromMillis(r.now);
            result.expired_removed = static_cast<int>(r.removed);
            if (r.result == 0) return result;
            result.result = r.result == 1 ? EndHoldResult::Result::kEnded
                                          : EndHoldResult::Result::kAlreadyEnded;
            if (!ToOutcome(r.outcome, &result.end.outcome)) return BadReply("end_hold.lua");
            result.end.expire_time = FromMillis(r.expire);
            result.end.end_time = FromMillis(r.end);
            result.end.payment_reference = std::string(r.reference);
            if (!ToDetails(r.details, r.life, r.expire, &result.details)) {
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
      Eval({keys_.ForUser(args.user_id).holds_bucket},
           lua::ListHoldsArgv<Arg>{.user = args.user_id,
                                   .now = NowArg(options),
                                   .scope = args.scope,
                                   .after_expire = after_expire,
                                   .after_order = after_order,
                                   .page_size = int64_t{std::max(1, args.page_size)},
                                   .store = store_arg_});
  command.inline_ok = true;  // one command per gRPC call: see redis_client.h
  client_->Submit(
      std::move(command), options.deadline,
      ParsedAs<lua::ListHoldsReply>(
          std::move(done),
          [scope = args.scope](const lua::ListHoldsReply& r) -> absl::StatusOr<ListHoldsResult> {
            if (r.page.size() % 2 != 0 || r.details.size() * 2 != r.page.size() ||
                r.lives.size() != r.details.size()) {
              return BadReply("list_holds.lua");
            }
            ListHoldsResult result;
            result.now = FromMillis(r.now);
            result.user_holds = r.user_holds;
            result.user_units = r.user_units;
            result.scope_holds = r.scope_holds;
            result.scope_units = r.scope_units;
            result.plain = r.plain == 1;
            result.more = r.more == 1;
            if (!r.rule.empty()) {
              result.rule = internal::UnpackScopeRule(scope, r.rule);
              if (!result.rule.has_value()) return BadReply("list_holds.lua");
            }
            for (size_t i = 0; i < r.details.size(); ++i) {
              StoredHold hold;
              if (!StoredHoldOf(r.page[2 * i], r.page[2 * i + 1], r.details[i], r.lives[i],
                                &hold)) {
                return BadReply("list_holds.lua");
              }
              result.holds.push_back(std::move(hold));
            }
            return result;
          }));
}

void RedisHoldStore::ExtendHold(ExtendHoldArgs args, CallOptions options,
                                Callback<ExtendHoldResult> done) {
  if (protocol_.has_value()) {
    ExtendAcrossSlots(std::move(args), options, std::move(done));
    return;
  }
  ExtendInUserSlot(args, options, "",
                   [done = std::move(done)](absl::StatusOr<ExtendStep> step) mutable {
                     if (!step.ok()) {
                       std::move(done)(step.status());
                       return;
                     }
                     std::move(done)(std::move(step->result));
                   });
}

void RedisHoldStore::ExtendInUserSlot(const ExtendHoldArgs& args, const CallOptions& options,
                                      const std::string& take, Callback<ExtendStep> done) {
  const KeySchema::UserKeys keys = keys_.ForUser(args.user_id);
  redis::RedisCommand command =
      Eval({keys.holds_bucket, keys.due_bucket, keys.outcomes, keys.ended, keys.events,
            keys.bucket_index},
           lua::ExtendHoldArgv<Arg>{.user = args.user_id,
                                    .order = args.order_id,
                                    .ttl = Millis(args.ttl),
                                    .now = NowArg(options),
                                    .max_extensions = int64_t{args.max_extensions},
                                    .request_id = args.request_id,
                                    .store = store_arg_,
                                    .take = take});
  command.writes = true;
  command.inline_ok = true;  // one command per gRPC call: see redis_client.h
  client_->Submit(
      std::move(command), options.deadline,
      ParsedAs<lua::ExtendHoldReply>(
          std::move(done),
          [order_id = args.order_id](const lua::ExtendHoldReply& r) -> absl::StatusOr<ExtendStep> {
            ExtendStep step;
            if (r.result == -3) {
              return absl::UnavailableError(
                  "the hold's place in its scope was taken too long ago; retry the same call");
            }
            if (r.result == -4) {
              // Live and scoped: its details say which entry to take.
              step.needs_take = true;
              step.result.result = ExtendHoldResult::Result::kLive;
              step.result.now = FromMillis(r.now);
              step.result.hold.order_id = order_id;
              step.result.hold.expire_time = FromMillis(r.expire);
              if (!ToDetails(r.details, r.life, r.expire, &step.result.hold.details)) {
                return BadReply("extend_hold.lua");
              }
              return step;
            }
            ORDERHOLD_ASSIGN_OR_RETURN(step.result, ExtendResultOf(order_id, r));
            return step;
          }));
}

void RedisHoldStore::GetHold(std::string user_id, std::string order_id, CallOptions options,
                             Callback<GetHoldResult> done) {
  const KeySchema::UserKeys keys = keys_.ForUser(user_id);
  redis::RedisCommand command =
      Eval({keys.holds_bucket, keys.outcomes},
           lua::GetHoldArgv<Arg>{
               .user = user_id, .order = order_id, .now = NowArg(options), .store = store_arg_});
  command.inline_ok = true;  // one command per gRPC call: see redis_client.h
  client_->Submit(
      std::move(command), options.deadline,
      ParsedAs<lua::GetHoldReply>(
          std::move(done), [order_id](const lua::GetHoldReply& r) -> absl::StatusOr<GetHoldResult> {
            if (r.state < 0 || r.state > 2) return BadReply("get_hold.lua");
            GetHoldResult result;
            result.now = FromMillis(r.now);
            if (r.state == 0) return result;
            result.state =
                r.state == 1 ? GetHoldResult::State::kLive : GetHoldResult::State::kEnded;
            result.hold.order_id = order_id;
            result.hold.expire_time = FromMillis(r.expire);
            if (result.state == GetHoldResult::State::kEnded) {
              if (!ToOutcome(r.outcome, &result.end.outcome)) return BadReply("get_hold.lua");
              result.end.end_time = FromMillis(r.end);
              result.end.expire_time = result.hold.expire_time;
              result.end.payment_reference = std::string(r.reference);
            }
            if (!ToDetails(r.details, r.life, r.expire, &result.hold.details)) {
              return BadReply("get_hold.lua");
            }
            return result;
          }));
}

void RedisHoldStore::ReleaseHolds(std::string user_id, std::string scope, CallOptions options,
                                  Callback<ReleaseHoldsResult> done) {
  const KeySchema::UserKeys keys = keys_.ForUser(user_id);
  redis::RedisCommand command =
      Eval({keys.holds_bucket, keys.due_bucket, keys.outcomes, keys.ended, keys.events,
            keys.bucket_index},
           lua::ReleaseHoldsArgv<Arg>{
               .user = user_id, .scope = scope, .now = NowArg(options), .store = store_arg_});
  command.writes = true;
  command.inline_ok = true;  // one command per gRPC call: see redis_client.h
  if (protocol_.has_value()) {
    // Across slots, the released holds' entries are dropped before the answer.
    done = [this, user_id,
            done = std::move(done)](absl::StatusOr<ReleaseHoldsResult> result) mutable {
      if (!result.ok() || result->released.empty()) {
        std::move(done)(std::move(result));
        return;
      }
      auto answer = std::make_shared<absl::StatusOr<ReleaseHoldsResult>>(std::move(result));
      DropEnded(user_id, (*answer)->released, [answer, done = std::move(done)]() mutable {
        std::move(done)(std::move(*answer));
      });
    };
  }
  client_->Submit(std::move(command), options.deadline,
                  ParsedAs<lua::ReleaseHoldsReply>(
                      std::move(done),
                      [](const lua::ReleaseHoldsReply& r) -> absl::StatusOr<ReleaseHoldsResult> {
                        if (r.released.size() % 4 != 0) return BadReply("release_holds.lua");
                        ReleaseHoldsResult result;
                        result.now = FromMillis(r.now);
                        result.expired_removed = static_cast<int>(r.removed);
                        for (size_t i = 0; i < r.released.size(); i += 4) {
                          StoredHold hold;
                          if (!StoredHoldOf(r.released[i], r.released[i + 1], r.released[i + 2],
                                            r.released[i + 3], &hold)) {
                            return BadReply("release_holds.lua");
                          }
                          result.released.push_back(std::move(hold));
                        }
                        return result;
                      }));
}

void RedisHoldStore::ListScopeHolds(ListScopeHoldsArgs args, CallOptions options,
                                    Callback<ListScopeHoldsResult> done) {
  if (!keeps_scope_index()) {
    std::move(done)(absl::FailedPreconditionError(
        "scope usage needs the scope index, which this store does not keep"));
    return;
  }
  if (protocol_.has_value()) {
    // Entries are leases: their scores are the holds' ends plus the clock margin (a cursor's time
    // is an answer's, so it gets it back).
    if (args.after.has_value()) args.after->expire_time += protocol_->margin;
    done = [margin = protocol_->margin,
            done = std::move(done)](absl::StatusOr<ListScopeHoldsResult> result) mutable {
      if (result.ok()) {
        if (result->first_expire_time.has_value()) *result->first_expire_time -= margin;
        for (ScopeHold& hold : result->holds) hold.expire_time -= margin;
      }
      std::move(done)(std::move(result));
    };
  }
  const std::string live = keys_.ScopeLiveKey(args.scope);
  const std::string units = keys_.ScopeUnitsKey(args.scope);
  // A store counting no sales (a Redis Cluster) declares the units key again instead: a key that
  // never exists there would have Redis answer TRYAGAIN for the whole of the slot's migration
  // (lua/prelude/ "Slot migrations"); the script reads 0 sold then.
  const std::string sold = counts_sales() ? keys_.ScopeSoldKey(args.scope) : units;
  const std::string after_expire =
      args.after.has_value() ? absl::StrCat(absl::ToUnixMillis(args.after->expire_time)) : "";
  const std::string after_member = args.after.has_value() ? args.after->order_id : "";
  // Likewise the rule's key where no rules are kept.
  const std::string rule = keeps_scope_rules() ? keys_.ScopeRuleKey(args.scope) : units;
  redis::RedisCommand command =
      Eval({live, units, sold, rule},
           lua::ScopeHoldsArgv<Arg>{.now = NowArg(options),
                                    .after_expire = after_expire,
                                    .after_member = after_member,
                                    .page_size = int64_t{std::max(0, args.page_size)}});
  command.inline_ok = true;  // one command per gRPC call: see redis_client.h
  client_->Submit(std::move(command), options.deadline,
                  ParsedAs<lua::ScopeHoldsReply>(
                      std::move(done), [scope = args.scope](const lua::ScopeHoldsReply& r) {
                        return ScopeHoldsResultOf(scope, r);
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
        // TIME: {seconds, microseconds} (https://redis.io/commands/time/).
        if (reply.type != redis::RedisReply::Type::kArray || reply.elements.size() != 2 ||
            !ToInt(reply.elements.front(), &seconds) || !ToInt(reply.elements.back(), &micros)) {
          return BadReply("TIME");
        }
        return absl::FromUnixSeconds(seconds) + absl::Microseconds(micros);
      }));
}

}  // namespace orderhold::store
