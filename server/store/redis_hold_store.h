// RedisHoldStore: the production HoldStore, on Redis >= 7.0 (standalone; Redis Cluster-ready key
// layout, see keys.h). Every operation is one EVALSHA of a script in server/store/lua/, sent
// through a pipelining RedisClient; "now" is Redis server TIME unless CallOptions::now is set.
//
// Thread-safe. Errors: see hold_store.h (UNAVAILABLE, DEADLINE_EXCEEDED); INTERNAL if Redis
// answers a shape the scripts never return (a bug, or a foreign key of another type).
#ifndef ORDERHOLD_SERVER_STORE_REDIS_HOLD_STORE_H_
#define ORDERHOLD_SERVER_STORE_REDIS_HOLD_STORE_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "server/store/hold_store.h"
#include "server/store/keys.h"
#include "server/store/redis_client.h"

namespace orderhold::store {

struct RedisHoldStoreOptions {
  // Connection pool settings; `scripts` is filled in by the store.
  RedisClientOptions client;
  // Prefix of every key (see keys.h). Non-empty, no `{`, `}`, whitespace or control characters.
  std::string key_prefix = "orderhold";
};

class RedisHoldStore final : public HoldStore {
 public:
  // Starts the connection pool (without connecting: Redis may be down at start).
  // INVALID_ARGUMENT for a bad key_prefix or pool options.
  static absl::StatusOr<std::unique_ptr<RedisHoldStore>> Create(RedisHoldStoreOptions options);

  void PlaceHold(PlaceHoldArgs args, CallOptions options, Callback<PlaceHoldResult> done) override;
  void Pay(std::string user_id, std::string order_id, CallOptions options,
           Callback<PayResult> done) override;
  void ListHolds(std::string user_id, CallOptions options, Callback<ListHoldsResult> done) override;
  void Reap(int shard, int max_users, CallOptions options, Callback<ReapResult> done) override;
  int shard_count() const override { return KeySchema::kShardCount; }
  void Ping(CallOptions options, Callback<absl::Time> done) override;

  const KeySchema& keys() const { return keys_; }

 private:
  RedisHoldStore(KeySchema keys, std::unique_ptr<RedisClient> client)
      : keys_(std::move(keys)), client_(std::move(client)) {}

  const KeySchema keys_;
  std::unique_ptr<RedisClient> client_;
};

// Checks a --key_prefix value. INVALID_ARGUMENT naming `key_prefix` when it is empty, longer than
// 64 bytes, or has `{`, `}`, whitespace or control characters (which would break the hash tags).
absl::Status ValidateKeyPrefix(absl::string_view prefix);

}  // namespace orderhold::store

#endif  // ORDERHOLD_SERVER_STORE_REDIS_HOLD_STORE_H_
