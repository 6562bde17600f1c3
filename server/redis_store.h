// ConnectRedisStore: the Redis hold store as App wires it — the two callers the store sends
// through (requests; the reaper's calls on one connection of their own, see
// store/redis_hold_store.h), each a redis::RedisClient or, in cluster mode, a
// redis::RedisClusterClient on the shared slot map, loaded with the store's scripts. The store
// builds no client: this is where they are built, for App::Start and for the tests and tools
// that need a store without the gRPC server.
#ifndef ORDERHOLD_SERVER_REDIS_STORE_H_
#define ORDERHOLD_SERVER_REDIS_STORE_H_

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "prometheus/counter.h"
#include "server/redis/cluster_topology.h"
#include "server/redis/redis_client.h"
#include "server/store/hold_store.h"
#include "server/store/redis_hold_store.h"

namespace orderhold {

struct RedisStoreOptions {
  // Options of the request pool: credentials and TLS (client.node), database, topology
  // (standalone or Sentinel; ignored in cluster mode), connections, timeouts, WAIT, metrics.
  // `scripts` is filled in with RedisHoldStore::Scripts(), and with `functions` also
  // `function_library` and `functions` (RedisHoldStore::FunctionLibrary(), Functions()). The
  // background caller copies it with
  // one connection and RedisHoldStore::kBackgroundMaxPipeline; both share one failure log.
  redis::RedisClientOptions client;
  // Redis Cluster mode when set (--redis_mode=cluster): both callers are RedisClusterClients on
  // this slot map, with `client` as every node pool's options (client.db must be 0).
  std::shared_ptr<redis::ClusterTopology> cluster;
  // Prefix of every key (--key_prefix; see store/keys.h).
  std::string key_prefix = "orderhold";
  // Whether the store keeps the scope index (store::RedisHoldStore::Create): nullopt = unless
  // `cluster` is set. False for a store that talks to one node of a Redis Cluster directly (a
  // test's standalone topology on a cluster node), whose scripts cannot reach other slots.
  std::optional<bool> scope_index;
  // In cluster mode (unless scope_index is false): the scope protocol's timings. The index is then
  // kept across slots (store::RedisHoldStore::Create's `protocol`).
  store::ScopeProtocolOptions scope_protocol;
  // Outcome records kept per user (--outcome_retention, --max_outcomes_per_user).
  store::OutcomePolicy outcomes;
  // Call the scripts as Redis Functions (FCALL) where the node takes their library, else by
  // EVALSHA (--redis_functions; redis::RedisClientOptions::function_library).
  bool functions = true;
  // orderhold_redis_redirects_total{kind="moved"|"ask"} in cluster mode; nullable.
  prometheus::Counter* moved_redirects = nullptr;
  prometheus::Counter* ask_redirects = nullptr;
};

// Builds both callers (without connecting: Redis may be down at start) and the store on them.
// INVALID_ARGUMENT for options the callers or the store refuse (no topology outside cluster
// mode, a database other than 0 in cluster mode, a bad key_prefix or outcome policy).
// Thread-compatible.
absl::StatusOr<std::unique_ptr<store::RedisHoldStore>> ConnectRedisStore(RedisStoreOptions options);

}  // namespace orderhold

#endif  // ORDERHOLD_SERVER_REDIS_STORE_H_
