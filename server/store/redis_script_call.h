// The store's one script-call helper, shared by the files of RedisHoldStore (redis_hold_store.cc:
// holds and scope reads; redis_partition_store.cc: the reaper's calls; redis_event_log.cc: the
// event log): building a script call from its named arguments (Eval over lua::<Name>Argv),
// parsing its reply by name (ParsedAs over lua::<Name>Reply: one error for a shape the script
// never returns), and the small readers of what the replies carry (details, outcomes). Internal to
// server/store/: nothing outside includes it. Thread-safe (pure functions).
#ifndef ORDERHOLD_SERVER_STORE_REDIS_SCRIPT_CALL_H_
#define ORDERHOLD_SERVER_STORE_REDIS_SCRIPT_CALL_H_

#include <array>
#include <concepts>
#include <optional>
#include <string>
#include <utility>

#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "server/redis/redis_args.h"
#include "server/redis/redis_caller.h"
#include "server/redis/redis_reply.h"
#include "server/store/hold_details_codec.h"
#include "server/store/hold_store.h"
#include "server/store/keys.h"
#include "server/store/lua_scripts.h"

namespace orderhold::store::internal {

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

// The command calling the script of `argv` (lua::<Name>Argv<Arg>, generated from the script's
// header: FCALL or EVALSHA of its index in Scripts()) with its KEYS and named ARGV, packed into one
// buffer (redis_args.h: no string per key). The key count is store/lua/scripts.txt's, checked by
// the compiler (array size, neither more nor fewer); the arguments are the header's, by name (a
// designated initializer that misses one does not compile: Arg has no default). A script with a
// variable ARGV tail (check_groups) carries it in its Argv's tail member.
template <typename Argv>
inline redis::RedisCommand Eval(const std::array<Arg, lua::Spec(Argv::kScript).keys>& keys,
                                const Argv& argv) {
  static_assert(lua::Spec(Argv::kScript).keys >= 1, "every script names its keys (Redis Cluster)");
  const auto fixed = argv.Fixed();
  const auto& more = argv.Tail();
  redis::RedisCommand command;
  command.script = static_cast<int>(Argv::kScript);
  size_t bytes = 4;  // numkeys
  for (const Arg& arg : keys) bytes += arg.size();
  for (const Arg& arg : fixed) bytes += arg.size();
  for (const std::string& arg : more) bytes += arg.size();
  command.args.Reserve(1 + keys.size() + fixed.size() + more.size(), bytes);
  command.args.PushInt(static_cast<int64_t>(keys.size()));  // numkeys
  for (const Arg& key : keys) key.AddTo(command.args);
  for (const Arg& arg : fixed) arg.AddTo(command.args);
  for (const std::string& arg : more) command.args.Push(arg);
  return command;
}

// A plain command (no script).
inline redis::RedisCommand Plain(redis::RedisArgs args) {
  redis::RedisCommand command;
  command.script = redis::RedisCommand::kNoScript;
  command.args = std::move(args);
  return command;
}

inline absl::Status BadReply(absl::string_view what) {
  return absl::InternalError(absl::StrCat("unexpected Redis reply to ", what));
}

// A script's integer (Lua numbers come back as integers) or a score string ("1732000000000").
inline bool ToInt(const redis::RedisReply& reply, int64_t* out) {
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

inline absl::Time FromMillis(int64_t ms) { return absl::FromUnixMillis(ms); }

inline std::string NowArg(const CallOptions& options) {
  return options.now.has_value() ? absl::StrCat(absl::ToUnixMillis(*options.now)) : "";
}

// A details value (hold_details_codec.h; a script's, or an event's field "m") for a hold expiring
// at `expire_ms`: "" = none (the default details). False when it does not decode or names another
// expiry (the scripts return only the hold's own).
inline bool ToDetails(absl::string_view details, int64_t expire_ms, HoldDetails* out) {
  *out = HoldDetails{};
  if (details.empty()) return true;
  std::optional<DecodedDetails> decoded = DecodeDetails(details);
  if (!decoded.has_value() || decoded->expire_ms != expire_ms) return false;
  *out = std::move(decoded->details);
  return true;
}

// ToDetails, then the hold's life record ("" = none: no cap; the place time only from the
// details) on top, under the same checks.
inline bool ToDetails(absl::string_view details, absl::string_view life, int64_t expire_ms,
                      HoldDetails* out) {
  if (!ToDetails(details, expire_ms, out)) return false;
  if (life.empty()) return true;
  std::optional<DecodedLife> decoded = DecodeLife(life);
  if (!decoded.has_value() || decoded->expire_ms != expire_ms) return false;
  if (!out->place_time.has_value()) out->place_time = decoded->place_time;
  out->max_expire_time = decoded->max_expire_time;
  out->extensions = decoded->extensions;
  return true;
}

// A string element of a nested array or tail (a view into the reply), or nullopt.
inline std::optional<absl::string_view> StrOf(const redis::RedisReply& element) {
  if (element.type != redis::RedisReply::Type::kString) return std::nullopt;
  return absl::string_view(element.str);
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

// Parsed, for a script's reply read by name: the reply is parsed into `Reply` (lua::<Name>Reply,
// by the generated lua::Parse: an INTERNAL error naming the element for another shape), then
// `parse` (const Reply& -> StatusOr<T>) makes the result.
template <typename Reply, typename T, typename Parse>
redis::RedisCaller::ReplyCallback ParsedAs(Callback<T> done, Parse parse) {
  return Parsed(std::move(done),
                [parse = std::move(parse)](const redis::RedisReply& reply) -> absl::StatusOr<T> {
                  Reply named;
                  if (absl::Status status = lua::Parse(reply, &named); !status.ok()) return status;
                  return parse(named);
                });
}

// A scope's runtime rule packed as the prelude's "A scope's runtime rule" says, for `scope` (its
// etag the packed version); nullopt for another shape. Fields a later release appends are
// ignored, as the scripts ignore them. Defined in redis_scope_rules.cc.
std::optional<ScopeRuleRecord> UnpackScopeRule(absl::string_view scope, absl::string_view packed);

inline bool ToOutcome(int64_t code, HoldOutcome* out) {
  if (code < 1 || code > 4) return false;
  *out = static_cast<HoldOutcome>(code);
  return true;
}

inline int64_t Millis(absl::Duration d) { return absl::ToInt64Milliseconds(d); }

inline bool InRange(int partition) {
  return partition >= 0 && partition < KeySchema::kPartitionCount;
}

// The INVALID_ARGUMENT of a call to `what` for a partition out of range.
inline absl::Status OutOfRange(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(what, ": partition out of range"));
}

// trim_events.lua's `bound`: ids below the cutoff it counts per consumer group and call at most.
// Bounds how long one call blocks Redis; a larger unacked backlog is trimmed over several calls.
inline constexpr int kMaxTrimIdsPerGroup = 100000;

}  // namespace orderhold::store::internal

#endif  // ORDERHOLD_SERVER_STORE_REDIS_SCRIPT_CALL_H_
