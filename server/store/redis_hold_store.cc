#include "server/store/redis_hold_store.h"

#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "server/store/lua_scripts.h"

namespace orderhold::store {
namespace {

// Index of each script in RedisClientOptions::scripts.
enum Script { kPlaceHold = 0, kPay, kListHolds, kReap };

absl::Status BadReply(absl::string_view what) {
  return absl::InternalError(absl::StrCat("unexpected Redis reply to ", what));
}

// A script's integer (Lua numbers come back as integers) or a score string ("1732000000000").
bool ToInt(const RedisReply& reply, int64_t* out) {
  if (reply.type == RedisReply::Type::kInteger) {
    *out = reply.integer;
    return true;
  }
  if (reply.type != RedisReply::Type::kString) return false;
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

// Parses the reply as an array of at least `min_size` integers.
bool IntArray(const RedisReply& reply, size_t min_size, std::vector<int64_t>* out) {
  if (reply.type != RedisReply::Type::kArray || reply.elements.size() < min_size) return false;
  out->resize(reply.elements.size());
  for (size_t i = 0; i < reply.elements.size(); ++i) {
    if (!ToInt(reply.elements[i], &(*out)[i])) return false;
  }
  return true;
}

// Adapts a typed callback to a reply callback through `parse` (reply -> StatusOr<T>).
template <typename T, typename Parse>
RedisClient::ReplyCallback Parsed(Callback<T> done, Parse parse) {
  return [done = std::move(done), parse](absl::StatusOr<RedisReply> reply) mutable {
    if (!reply.ok()) {
      std::move(done)(reply.status());
      return;
    }
    std::move(done)(parse(*reply));
  };
}

}  // namespace

absl::Status ValidateKeyPrefix(absl::string_view prefix) {
  if (prefix.empty() || prefix.size() > 64) {
    return absl::InvalidArgumentError("key_prefix: must be 1-64 bytes");
  }
  for (unsigned char c : prefix) {
    if (c <= 0x20 || c == 0x7f || c == '{' || c == '}') {
      return absl::InvalidArgumentError(
          "key_prefix: must not contain '{', '}', spaces or control characters");
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<RedisHoldStore>> RedisHoldStore::Create(
    RedisHoldStoreOptions options) {
  if (absl::Status status = ValidateKeyPrefix(options.key_prefix); !status.ok()) return status;
  options.client.scripts = {std::string(lua::kPlaceHold), std::string(lua::kPay),
                            std::string(lua::kListHolds), std::string(lua::kReap)};
  auto client = RedisClient::Create(std::move(options.client));
  if (!client.ok()) return client.status();
  return std::unique_ptr<RedisHoldStore>(
      new RedisHoldStore(KeySchema(std::move(options.key_prefix)), std::move(*client)));
}

void RedisHoldStore::PlaceHold(PlaceHoldArgs args, CallOptions options,
                               Callback<PlaceHoldResult> done) {
  const int shard = KeySchema::ShardOf(args.user_id);
  RedisCommand command{kPlaceHold,
                       {"2", keys_.UserKey(args.user_id), keys_.DueKey(shard), args.user_id,
                        args.order_id, absl::StrCat(absl::ToInt64Milliseconds(args.ttl)),
                        absl::StrCat(args.max_holds), NowArg(options)}};
  client_->Submit(
      std::move(command), options.deadline,
      Parsed(std::move(done), [](const RedisReply& reply) -> absl::StatusOr<PlaceHoldResult> {
        std::vector<int64_t> v;
        if (!IntArray(reply, 5, &v) || v[0] < -1 || v[0] > 1) {
          return BadReply("place_hold.lua");
        }
        PlaceHoldResult result;
        result.outcome = v[0] == 1   ? PlaceHoldResult::Outcome::kCreated
                         : v[0] == 0 ? PlaceHoldResult::Outcome::kAlreadyHeld
                                     : PlaceHoldResult::Outcome::kLimitReached;
        result.now = FromMillis(v[1]);
        result.expire_time = FromMillis(v[2]);
        result.active_holds = static_cast<int>(v[3]);
        result.expired_removed = static_cast<int>(v[4]);
        return result;
      }));
}

void RedisHoldStore::Pay(std::string user_id, std::string order_id, CallOptions options,
                         Callback<PayResult> done) {
  const int shard = KeySchema::ShardOf(user_id);
  RedisCommand command{kPay,
                       {"2", keys_.UserKey(user_id), keys_.DueKey(shard), std::move(user_id),
                        std::move(order_id), NowArg(options)}};
  client_->Submit(std::move(command), options.deadline,
                  Parsed(std::move(done), [](const RedisReply& reply) -> absl::StatusOr<PayResult> {
                    std::vector<int64_t> v;
                    if (!IntArray(reply, 2, &v) || (v[0] == 1 && v.size() < 3)) {
                      return BadReply("pay.lua");
                    }
                    PayResult result;
                    result.paid = v[0] == 1;
                    result.now = FromMillis(v[1]);
                    if (result.paid) result.expire_time = FromMillis(v[2]);
                    return result;
                  }));
}

void RedisHoldStore::ListHolds(std::string user_id, CallOptions options,
                               Callback<ListHoldsResult> done) {
  RedisCommand command{kListHolds, {"1", keys_.UserKey(user_id), NowArg(options)}};
  client_->Submit(
      std::move(command), options.deadline,
      Parsed(std::move(done), [](const RedisReply& reply) -> absl::StatusOr<ListHoldsResult> {
        int64_t now = 0;
        if (reply.type != RedisReply::Type::kArray || reply.elements.size() != 2 ||
            !ToInt(reply.elements[0], &now) || reply.elements[1].type != RedisReply::Type::kArray ||
            reply.elements[1].elements.size() % 2 != 0) {
          return BadReply("list_holds.lua");
        }
        ListHoldsResult result;
        result.now = FromMillis(now);
        const auto& pairs = reply.elements[1].elements;
        for (size_t i = 0; i < pairs.size(); i += 2) {
          int64_t expire = 0;
          if (pairs[i].type != RedisReply::Type::kString || !ToInt(pairs[i + 1], &expire)) {
            return BadReply("list_holds.lua");
          }
          result.holds.push_back(StoredHold{pairs[i].str, FromMillis(expire)});
        }
        return result;
      }));
}

void RedisHoldStore::Reap(int shard, int max_users, CallOptions options,
                          Callback<ReapResult> done) {
  if (shard < 0 || shard >= KeySchema::kShardCount || max_users < 1) {
    std::move(done)(absl::InvalidArgumentError("reap: shard or max_users out of range"));
    return;
  }
  RedisCommand command{kReap,
                       {"1", keys_.DueKey(shard), keys_.UserKeyPrefix(shard),
                        absl::StrCat(max_users), NowArg(options)}};
  client_->Submit(
      std::move(command), options.deadline,
      Parsed(std::move(done), [](const RedisReply& reply) -> absl::StatusOr<ReapResult> {
        std::vector<int64_t> v;
        if (!IntArray(reply, 2, &v)) return BadReply("reap.lua");
        ReapResult result;
        result.now = FromMillis(v[0]);
        result.more = v[1] == 1;
        result.reaped_expire_times.reserve(v.size() - 2);
        for (size_t i = 2; i < v.size(); ++i) {
          result.reaped_expire_times.push_back(FromMillis(v[i]));
        }
        return result;
      }));
}

void RedisHoldStore::Ping(CallOptions options, Callback<absl::Time> done) {
  client_->Submit(
      RedisCommand{-1, {"TIME"}}, options.deadline,
      Parsed(std::move(done), [](const RedisReply& reply) -> absl::StatusOr<absl::Time> {
        int64_t seconds = 0, micros = 0;
        if (reply.type != RedisReply::Type::kArray || reply.elements.size() != 2 ||
            !ToInt(reply.elements[0], &seconds) || !ToInt(reply.elements[1], &micros)) {
          return BadReply("TIME");
        }
        return absl::FromUnixSeconds(seconds) + absl::Microseconds(micros);
      }));
}

}  // namespace orderhold::store
