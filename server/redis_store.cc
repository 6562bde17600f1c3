#include "server/redis_store.h"

#include <utility>

#include "server/common/status_macros.h"
#include "server/redis/redis_cluster_client.h"

namespace orderhold {

absl::StatusOr<std::unique_ptr<store::RedisHoldStore>> ConnectRedisStore(
    RedisStoreOptions options) {
  options.client.scripts = store::RedisHoldStore::Scripts();
  if (options.functions) {
    options.client.function_library = store::RedisHoldStore::FunctionLibrary();
    options.client.functions = store::RedisHoldStore::Functions();
  }
  // One failure log for both callers, so a failure both see is logged once.
  if (options.client.failure_log == nullptr) {
    options.client.failure_log = std::make_shared<redis::RedisFailureLog>();
  }
  redis::RedisClientOptions background = options.client;
  background.connections = 1;
  background.max_pipeline = store::RedisHoldStore::kBackgroundMaxPipeline;
  const auto caller =
      [&](redis::RedisClientOptions pool) -> absl::StatusOr<std::unique_ptr<redis::RedisCaller>> {
    if (options.cluster == nullptr) return redis::RedisClient::Create(std::move(pool));
    redis::RedisClusterClientOptions cluster;
    cluster.pool = std::move(pool);
    cluster.topology = options.cluster;
    cluster.moved = options.moved_redirects;
    cluster.ask = options.ask_redirects;
    return redis::RedisClusterClient::Create(std::move(cluster));
  };
  const bool scope_index = options.scope_index.value_or(options.cluster == nullptr);
  std::optional<store::ScopeProtocolOptions> protocol;
  if (options.cluster != nullptr && options.scope_index.value_or(true)) {
    protocol = options.scope_protocol;
  }
  ORDERHOLD_ASSIGN_OR_RETURN(std::unique_ptr<redis::RedisCaller> requests,
                             caller(std::move(options.client)));
  ORDERHOLD_ASSIGN_OR_RETURN(std::unique_ptr<redis::RedisCaller> reaper,
                             caller(std::move(background)));
  return store::RedisHoldStore::Create(std::move(options.key_prefix), options.outcomes,
                                       std::move(requests), std::move(reaper), scope_index,
                                       std::move(protocol));
}

}  // namespace orderhold
