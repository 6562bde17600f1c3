#include "server/store/redis_hold_store.h"

#include <algorithm>
#include <array>
#include <concepts>
#include <optional>
#include <utility>

#include "absl/container/inlined_vector.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "server/common/status_macros.h"
#include "server/store/hold_details_codec.h"
#include "server/store/lua_scripts.h"

namespace orderhold::store {
namespace {

using lua::Script;

// One KEYS or ARGV element of Eval: a string, a key's pieces or a number. A view, not a copy:
// what it names is a variable or a temporary of the Eval call's full expression, which outlives
// the call (never keep an Arg). Not default-constructible, so that an Eval call with fewer
// elements than store/lua/scripts.txt says does not compile (std::array would default the rest).
class Arg {
 public:
  // NOLINTBEGIN(google-explicit-constructor): implicit, as the string, key or number it names.
  Arg(const std::string& s) : pieces_{s, {}, {}} {}
  Arg(const char* s) : pieces_{s, {}, {}} {}
  Arg(const KeySchema::Pieces& key) : pieces_{key.partition_prefix, key.kind, key.id} {}
  // Exactly int64_t, in decimal: a bool, double, size_t or enum does not convert silently.
  template <typename T>
  requires std::same_as<T, int64_t> Arg(T number) : number_(number), is_number_(true) {}
  // NOLINTEND(google-explicit-constructor)

  // The bytes it adds (an upper bound for a number), for RedisArgs::Reserve.
  size_t size() const {
    return is_number_ ? 20 : pieces_[0].size() + pieces_[1].size() + pieces_[2].size();
  }
  void AddTo(redis::RedisArgs& args) const {
    if (is_number_) {
      args.PushInt(number_);
    } else {
      args.PushCat({pieces_[0], pieces_[1], pieces_[2]});
    }
  }

 private:
  absl::string_view pieces_[3];
  int64_t number_ = 0;
  bool is_number_ = false;
};

// The command calling `kScript` (FCALL or EVALSHA of its index in Scripts()) with its KEYS and
// ARGV, packed into one buffer (redis_args.h: no string per key). The counts are
// store/lua/scripts.txt's, checked by the compiler (array sizes, neither more nor fewer). `more`
// is the variable ARGV tail of a script listed there as "N+" (check_groups), and stays empty for
// the others.
template <Script kScript>
redis::RedisCommand Eval(const std::array<Arg, lua::Spec(kScript).keys>& keys,
                         const std::array<Arg, lua::Spec(kScript).argv>& argv,
                         const std::vector<std::string>& more = {}) {
  static_assert(lua::Spec(kScript).keys >= 1, "every script names its keys (Redis Cluster)");
  redis::RedisCommand command;
  command.script = static_cast<int>(kScript);
  size_t bytes = 4;  // numkeys
  for (const Arg& arg : keys) bytes += arg.size();
  for (const Arg& arg : argv) bytes += arg.size();
  for (const std::string& arg : more) bytes += arg.size();
  command.args.Reserve(1 + keys.size() + argv.size() + more.size(), bytes);
  command.args.PushInt(static_cast<int64_t>(keys.size()));  // numkeys
  for (const Arg& key : keys) key.AddTo(command.args);
  for (const Arg& arg : argv) arg.AddTo(command.args);
  for (const std::string& arg : more) command.args.Push(arg);
  return command;
}

// A plain command (no script).
redis::RedisCommand Plain(redis::RedisArgs args) {
  redis::RedisCommand command;
  command.script = redis::RedisCommand::kNoScript;
  command.args = std::move(args);
  return command;
}

absl::Status BadReply(absl::string_view what) {
  return absl::InternalError(absl::StrCat("unexpected Redis reply to ", what));
}

// A script's integer (Lua numbers come back as integers) or a score string ("1732000000000").
bool ToInt(const redis::RedisReply& reply, int64_t* out) {
  if (reply.type == redis::RedisReply::Type::kInteger) {
    *out = reply.integer;
    return true;
  }
  if (reply.type != redis::RedisReply::Type::kString) return false;
  if (absl::SimpleAtoi(reply.str, out)) return true;
  double value = 0;
  if (!absl::SimpleAtod(reply.str, &value)) return false;
  *out = static_cast<int64_t>(value);
  return true;
}

absl::Time FromMillis(int64_t ms) { return absl::FromUnixMillis(ms); }

std::string NowArg(const CallOptions& options) {
  return options.now.has_value() ? absl::StrCat(absl::ToUnixMillis(*options.now)) : "";
}

// A script reply's integers: the fixed ones of every script fit inline (no allocation per call).
using Ints = absl::InlinedVector<int64_t, 16>;

// Parses the reply as an array of at least `min_size` integers; with `ints` set, only its first
// `ints` elements (at least min_size) must be integers and are parsed.
bool IntArray(const redis::RedisReply& reply, size_t min_size, Ints* out,
              std::optional<size_t> ints = std::nullopt) {
  if (reply.type != redis::RedisReply::Type::kArray || reply.elements.size() < min_size)
    return false;
  const size_t n = ints.value_or(reply.elements.size());
  out->resize(n);
  for (size_t i = 0; i < n; ++i) {
    if (!ToInt(reply.elements[i], &(*out)[i])) return false;
  }
  return true;
}

// A details element (hold_details_codec.h; a script's, or an event's field "m") for a hold
// expiring at `expire_ms`: "" = none (the default details). False when it is not a string, does
// not decode, or names another expiry (the scripts return only the hold's own).
bool ToDetails(const redis::RedisReply& details, int64_t expire_ms, HoldDetails* out) {
  if (details.type != redis::RedisReply::Type::kString) return false;
  *out = HoldDetails{};
  if (details.str.empty()) return true;
  std::optional<DecodedDetails> decoded = DecodeDetails(details.str);
  if (!decoded.has_value() || decoded->expire_ms != expire_ms) return false;
  *out = std::move(decoded->details);
  return true;
}

// ToDetails, then the hold's life record element ("" = none: no cap; the place time only from
// the details) on top, under the same checks.
bool ToDetails(const redis::RedisReply& details, const redis::RedisReply& life, int64_t expire_ms,
               HoldDetails* out) {
  if (!ToDetails(details, expire_ms, out) || life.type != redis::RedisReply::Type::kString) {
    return false;
  }
  if (life.str.empty()) return true;
  std::optional<DecodedLife> decoded = DecodeLife(life.str);
  if (!decoded.has_value() || decoded->expire_ms != expire_ms) return false;
  if (!out->place_time.has_value()) out->place_time = decoded->place_time;
  out->max_expire_time = decoded->max_expire_time;
  out->extensions = decoded->extensions;
  return true;
}

// Adapts a typed callback to a reply callback through `parse` (reply -> StatusOr<T>).
template <typename T, typename Parse>
redis::RedisCaller::ReplyCallback Parsed(Callback<T> done, Parse parse) {
  return [done = std::move(done), parse](absl::StatusOr<redis::RedisReply> reply) mutable {
    if (!reply.ok()) {
      std::move(done)(reply.status());
      return;
    }
    std::move(done)(parse(*reply));
  };
}

bool ToOutcome(int64_t code, HoldOutcome* out) {
  if (code < 1 || code > 3) return false;
  *out = static_cast<HoldOutcome>(code);
  return true;
}

int64_t Millis(absl::Duration d) { return absl::ToInt64Milliseconds(d); }

bool InRange(int partition) { return partition >= 0 && partition < KeySchema::kPartitionCount; }

// The INVALID_ARGUMENT of a call to `what` for a partition out of range.
absl::Status OutOfRange(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(what, ": partition out of range"));
}

// trim_events.lua's ARGV[2]: ids below the cutoff it counts per consumer group and call at most.
// Bounds how long one call blocks Redis; a larger unacked backlog is trimmed over several calls.
constexpr int kMaxTrimIdsPerGroup = 100000;

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

void RedisHoldStore::Reap(int partition, ReapArgs args, CallOptions options,
                          Callback<ReapResult> done) {
  if (!InRange(partition) || args.max_users < 0) {
    std::move(done)(absl::InvalidArgumentError("reap: partition or max_users out of range"));
    return;
  }
  redis::RedisCommand command = Eval<Script::kReap>(
      {keys_.BucketIndexKeyPieces(partition), keys_.EventsKeyPieces(partition),
       keys_.LeaseKey(partition)},
      {keys_.PartitionPrefix(partition), absl::StrCat(args.max_users), NowArg(options),
       retention_ms_, max_outcomes_, args.owner,
       absl::StrCat(std::max<int64_t>(1, Millis(args.lease))),
       args.standby_after.has_value() ? absl::StrCat(Millis(*args.standby_after)) : std::string(),
       max_stream_len_, scope_index_});
  command.writes = true;
  // A paced call alone in flight (tick_pacer.h) runs on the reaper's thread, without waking the
  // pool's I/O thread (see redis_client.h); a backlog drain's calls stay pipelined.
  command.inline_ok = args.alone;
  background_->Submit(
      std::move(command), options.deadline,
      Parsed(std::move(done), [](const redis::RedisReply& reply) -> absl::StatusOr<ReapResult> {
        Ints v;
        if (!IntArray(reply, 4, &v)) return BadReply("reap.lua");
        ReapResult result;
        result.now = FromMillis(v[0]);
        result.more = v[1] == 1;
        result.not_owner = v[1] == -1;
        if (v[2] >= 0) result.oldest_due = FromMillis(v[2]);
        if (v[3] >= 0) result.next_due = FromMillis(v[3]);
        result.reaped_expire_times.reserve(v.size() - 4);
        for (size_t i = 4; i < v.size(); ++i) {
          result.reaped_expire_times.push_back(FromMillis(v[i]));
        }
        return result;
      }));
}

void RedisHoldStore::MigrateStep(int partition, MigrateArgs args, CallOptions options,
                                 Callback<MigrateResult> done) {
  if (!InRange(partition) || args.max_users < 1) {
    std::move(done)(absl::InvalidArgumentError("migrate: partition or max_users out of range"));
    return;
  }
  redis::RedisCommand command = Eval<Script::kMigrate>(
      {keys_.BucketIndexKeyPieces(partition), keys_.EventsKeyPieces(partition),
       keys_.LeaseKey(partition)},
      {keys_.PartitionPrefix(partition), args.owner, int64_t{args.max_users}, args.cursor});
  command.writes = true;
  background_->Submit(
      std::move(command), options.deadline,
      Parsed(std::move(done), [](const redis::RedisReply& reply) -> absl::StatusOr<MigrateResult> {
        int64_t left = 0;
        int64_t moved = 0;
        if (reply.type != redis::RedisReply::Type::kArray || reply.elements.size() != 3 ||
            !ToInt(reply.elements[0], &left) ||
            reply.elements[1].type != redis::RedisReply::Type::kString ||
            !ToInt(reply.elements[2], &moved)) {
          return BadReply("migrate.lua");
        }
        MigrateResult result;
        result.users_moved = moved;
        result.not_owner = left < 0;
        result.users_left = std::max<int64_t>(0, left);
        result.cursor = reply.elements[1].str;
        return result;
      }));
}

void RedisHoldStore::Heartbeat(std::string replica_id, absl::Duration ttl, CallOptions options,
                               Callback<std::vector<std::string>> done) {
  redis::RedisCommand command = Eval<Script::kHeartbeat>(
      {keys_.ReplicasKey()},
      {replica_id, absl::StrCat(std::max<int64_t>(1, Millis(ttl))), NowArg(options)});
  command.writes = true;
  command.inline_ok = true;  // one call per reaper tick
  background_->Submit(
      std::move(command), options.deadline,
      Parsed(std::move(done),
             [](const redis::RedisReply& reply) -> absl::StatusOr<std::vector<std::string>> {
               if (reply.type != redis::RedisReply::Type::kArray || reply.elements.empty()) {
                 return BadReply("heartbeat.lua");
               }
               std::vector<std::string> ids;
               for (size_t i = 1; i < reply.elements.size(); ++i) {
                 if (reply.elements[i].type != redis::RedisReply::Type::kString) {
                   return BadReply("heartbeat.lua");
                 }
                 ids.push_back(reply.elements[i].str);
               }
               return ids;
             }));
}

void RedisHoldStore::ReleaseLease(int partition, std::string replica_id, CallOptions options,
                                  Callback<bool> done) {
  if (!InRange(partition)) return std::move(done)(OutOfRange("release_lease"));
  redis::RedisCommand command =
      Eval<Script::kReleaseLease>({keys_.LeaseKey(partition)}, {replica_id});
  command.writes = true;
  background_->Submit(
      std::move(command), options.deadline,
      Parsed(std::move(done), [](const redis::RedisReply& reply) -> absl::StatusOr<bool> {
        int64_t n = 0;
        if (!ToInt(reply, &n)) return BadReply("release_lease.lua");
        return n > 0;
      }));
}

void RedisHoldStore::Unregister(std::string replica_id, CallOptions options, Callback<bool> done) {
  redis::RedisCommand command = Plain({"ZREM", keys_.ReplicasKey(), replica_id});
  command.writes = true;
  background_->Submit(
      std::move(command), options.deadline,
      Parsed(std::move(done), [](const redis::RedisReply& reply) -> absl::StatusOr<bool> {
        int64_t n = 0;
        if (!ToInt(reply, &n)) return BadReply("ZREM");
        return n > 0;
      }));
}

void RedisHoldStore::EnsureGroup(int partition, std::string group, GroupStart start,
                                 CallOptions options, Callback<bool> done) {
  if (!InRange(partition)) return std::move(done)(OutOfRange("ensure_group"));
  redis::RedisCommand command = Eval<Script::kEnsureGroup>(
      {keys_.EventsKeyPieces(partition)}, {group, start == GroupStart::kEarliest ? "0" : "$"});
  command.writes = true;
  client_->Submit(
      std::move(command), options.deadline,
      Parsed(std::move(done), [](const redis::RedisReply& reply) -> absl::StatusOr<bool> {
        int64_t n = 0;
        if (!ToInt(reply, &n)) return BadReply("ensure_group.lua");
        return n == 1;
      }));
}

void RedisHoldStore::ClaimGroup(std::string group, std::string caller, int max_groups,
                                CallOptions options, Callback<GroupClaim> done) {
  const std::string owners = keys_.GroupOwnersKey();
  const std::string counts = keys_.GroupCountsKey();
  redis::RedisCommand command = Eval<Script::kClaimGroup>(
      {owners, counts}, {group, caller, absl::StrCat(std::max(1, max_groups))});
  command.writes = true;
  client_->Submit(
      std::move(command), options.deadline,
      Parsed(std::move(done), [](const redis::RedisReply& reply) -> absl::StatusOr<GroupClaim> {
        int64_t code = 0;
        GroupClaim claim;
        if (reply.type != redis::RedisReply::Type::kArray || reply.elements.size() != 3 ||
            !ToInt(reply.elements[0], &code) || code < -1 || code > 1 ||
            reply.elements[1].type != redis::RedisReply::Type::kString ||
            !ToInt(reply.elements[2], &claim.owned)) {
          return BadReply("claim_group.lua");
        }
        claim.result = code == 1   ? GroupClaim::Result::kClaimed
                       : code == 0 ? GroupClaim::Result::kRegistered
                                   : GroupClaim::Result::kOverLimit;
        claim.owner = reply.elements[1].str;
        return claim;
      }));
}

void RedisHoldStore::GroupOwner(std::string group, CallOptions options,
                                Callback<std::optional<std::string>> done) {
  client_->Submit(
      Plain({"HGET", keys_.GroupOwnersKey(), group}), options.deadline,
      Parsed(std::move(done),
             [](const redis::RedisReply& reply) -> absl::StatusOr<std::optional<std::string>> {
               if (reply.type == redis::RedisReply::Type::kNil) return std::nullopt;
               if (reply.type != redis::RedisReply::Type::kString) return BadReply("HGET");
               return reply.str;
             }));
}

void RedisHoldStore::DropGroup(std::string group, CallOptions options,
                               Callback<std::optional<std::string>> done) {
  const std::string owners = keys_.GroupOwnersKey();
  const std::string counts = keys_.GroupCountsKey();
  redis::RedisCommand command = Eval<Script::kDropGroup>({owners, counts}, {group});
  command.writes = true;
  client_->Submit(
      std::move(command), options.deadline,
      Parsed(std::move(done),
             [](const redis::RedisReply& reply) -> absl::StatusOr<std::optional<std::string>> {
               if (reply.type != redis::RedisReply::Type::kArray || reply.elements.size() > 1 ||
                   (reply.elements.size() == 1 &&
                    reply.elements[0].type != redis::RedisReply::Type::kString)) {
                 return BadReply("drop_group.lua");
               }
               if (reply.elements.empty()) return std::nullopt;
               return reply.elements[0].str;
             }));
}

void RedisHoldStore::DestroyGroup(int partition, std::string group, CallOptions options,
                                  Callback<bool> done) {
  if (!InRange(partition)) return std::move(done)(OutOfRange("destroy_group"));
  redis::RedisCommand command =
      Eval<Script::kDestroyGroup>({keys_.EventsKeyPieces(partition)}, {group});
  command.writes = true;
  client_->Submit(
      std::move(command), options.deadline,
      Parsed(std::move(done), [](const redis::RedisReply& reply) -> absl::StatusOr<bool> {
        int64_t n = 0;
        if (!ToInt(reply, &n)) return BadReply("destroy_group.lua");
        return n == 1;
      }));
}

void RedisHoldStore::ReadEvents(int partition, ReadEventsArgs args, CallOptions options,
                                Callback<EventBatch> done) {
  if (!InRange(partition)) return std::move(done)(OutOfRange("read_events"));
  std::string own_after;
  if (args.own_pending) own_after = args.own_after.empty() ? "0-0" : args.own_after;
  redis::RedisCommand command = Eval<Script::kReadEvents>(
      {keys_.EventsKeyPieces(partition)},
      {args.group, args.consumer, absl::StrCat(std::max(1, args.max_events)),
       args.claim_idle.has_value() ? absl::StrCat(Millis(*args.claim_idle)) : "", args.claim_after,
       std::move(own_after)});
  // It writes (the group's pending list), and with --redis_wait_replicas the WAIT that follows
  // also covers the events it returns, which were appended before it: an event is delivered only
  // once the replicas have it, so a failover cannot lose an end a consumer was told about and
  // then have the promoted replica end the hold again (two events for one end).
  command.writes = true;
  client_->Submit(
      std::move(command), options.deadline,
      Parsed(
          std::move(done),
          [partition](const redis::RedisReply& reply) -> absl::StatusOr<EventBatch> {
            // {claim_next, own_next, then 8 per event}
            constexpr size_t kCursors = 2;
            constexpr size_t kFields = 8;
            if (reply.type != redis::RedisReply::Type::kArray || reply.elements.size() < kCursors ||
                (reply.elements.size() - kCursors) % kFields != 0 ||
                reply.elements[0].type != redis::RedisReply::Type::kString ||
                reply.elements[1].type != redis::RedisReply::Type::kString) {
              return BadReply("read_events.lua");
            }
            EventBatch batch;
            const auto& e = reply.elements;
            batch.claim_next = e[0].str;
            batch.own_next = e[1].str;
            for (size_t i = kCursors; i < e.size(); i += kFields) {
              StoredEvent event;
              event.partition = partition;
              int64_t count = 0, outcome = 0, expire = 0, end = 0;
              if (e[i].type != redis::RedisReply::Type::kString || !ToInt(e[i + 1], &count) ||
                  e[i + 2].type != redis::RedisReply::Type::kString ||
                  e[i + 3].type != redis::RedisReply::Type::kString || !ToInt(e[i + 4], &outcome) ||
                  !ToOutcome(outcome, &event.end.outcome) || !ToInt(e[i + 5], &expire) ||
                  !ToInt(e[i + 6], &end) || !ToDetails(e[i + 7], expire, &event.details)) {
                return BadReply("read_events.lua");
              }
              event.stream_id = e[i].str;
              event.delivery_count = static_cast<int>(count);
              event.user_id = e[i + 2].str;
              event.order_id = e[i + 3].str;
              event.end.expire_time = FromMillis(expire);
              event.end.end_time = FromMillis(end);
              batch.events.push_back(std::move(event));
            }
            return batch;
          }));
}

void RedisHoldStore::CheckGroups(int partition, std::vector<std::string> groups,
                                 std::optional<absl::Duration> claim_idle, CallOptions options,
                                 Callback<std::vector<GroupWork>> done) {
  if (!InRange(partition)) return std::move(done)(OutOfRange("check_groups"));
  if (groups.empty()) return std::move(done)(std::vector<GroupWork>{});
  redis::RedisCommand command = Eval<Script::kCheckGroups>(
      {keys_.EventsKeyPieces(partition)},
      {claim_idle.has_value() ? absl::StrCat(Millis(*claim_idle)) : ""}, groups);
  background_->Submit(
      std::move(command), options.deadline,
      Parsed(
          std::move(done),
          [](const redis::RedisReply& reply) -> absl::StatusOr<std::vector<GroupWork>> {
            if (reply.type != redis::RedisReply::Type::kArray || reply.elements.size() % 2 != 0) {
              return BadReply("check_groups.lua");
            }
            std::vector<GroupWork> work;
            for (size_t i = 0; i < reply.elements.size(); i += 2) {
              int64_t flags = 0;
              if (reply.elements[i].type != redis::RedisReply::Type::kString ||
                  !ToInt(reply.elements[i + 1], &flags) || flags < 1 || flags > 3) {
                return BadReply("check_groups.lua");
              }
              work.push_back(GroupWork{reply.elements[i].str, (flags & 1) != 0, (flags & 2) != 0});
            }
            return work;
          }));
}

void RedisHoldStore::AckEvents(int partition, std::string group,
                               std::vector<std::string> stream_ids, CallOptions options,
                               Callback<int64_t> done) {
  if (!InRange(partition)) return std::move(done)(OutOfRange("ack_events"));
  if (stream_ids.empty()) {
    std::move(done)(int64_t{0});
    return;
  }
  redis::RedisCommand command = Plain({"XACK", keys_.EventsKey(partition), group});
  command.writes = true;
  size_t bytes = 0;
  for (const std::string& id : stream_ids) bytes += id.size();
  command.args.Reserve(stream_ids.size(), bytes);
  for (const std::string& id : stream_ids) command.args.Push(id);
  client_->Submit(
      std::move(command), options.deadline,
      Parsed(std::move(done), [](const redis::RedisReply& reply) -> absl::StatusOr<int64_t> {
        int64_t n = 0;
        if (!ToInt(reply, &n)) return BadReply("XACK");
        return n;
      }));
}

void RedisHoldStore::TrimEvents(int partition, TrimEventsArgs args, CallOptions options,
                                Callback<TrimEventsResult> done) {
  if (!InRange(partition)) return std::move(done)(OutOfRange("trim_events"));
  redis::RedisCommand command = Eval<Script::kTrimEvents>(
      {keys_.EventsKeyPieces(partition)},
      {absl::StrCat(std::max<int64_t>(0, absl::ToUnixMillis(args.cutoff))),
       absl::StrCat(kMaxTrimIdsPerGroup), trim_keep_,
       absl::StrCat(std::max<int64_t>(0, absl::ToInt64Milliseconds(args.consumer_idle)))});
  command.writes = true;
  background_->Submit(
      std::move(command), options.deadline,
      Parsed(
          std::move(done), [](const redis::RedisReply& reply) -> absl::StatusOr<TrimEventsResult> {
            TrimEventsResult result;
            const auto& e = reply.elements;
            if (reply.type != redis::RedisReply::Type::kArray || e.size() < 3 ||
                e.size() % 2 != 1 || !ToInt(e[0], &result.trimmed) ||
                !ToInt(e[1], &result.trimmed_unacked) || !ToInt(e[2], &result.consumers_removed)) {
              return BadReply("trim_events.lua");
            }
            for (size_t i = 3; i < e.size(); i += 2) {
              int64_t oldest = 0;
              if (e[i].type != redis::RedisReply::Type::kString || !ToInt(e[i + 1], &oldest)) {
                return BadReply("trim_events.lua");
              }
              GroupBacklog group{e[i].str, std::nullopt};
              if (oldest >= 0) group.oldest_unacked = FromMillis(oldest);
              result.groups.push_back(std::move(group));
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
