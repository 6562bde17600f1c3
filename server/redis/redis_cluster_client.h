// RedisClusterClient: the RedisCaller for Redis Cluster (--redis_mode=cluster). It routes each
// command to the primary that serves its hash slot, through one RedisClient pool per primary (so
// pipelining, per-connection batching, deadlines, fail-fast, WAIT and the NOSCRIPT -> EVAL reload
// all stay as they are, per node), and acts on what the cluster answers. Follows the cluster
// specification, docs/reference/cluster-spec.md ("Client connections and redirection handling",
// "MOVED Redirection", "ASK redirection", "Multiple keys operations"):
//
// - Routing: a script goes by the hash slot of its first key (KEYS[1]; every script's keys carry
//   one hash tag, so every key of a call is in that slot); any other command by its first
//   argument after the command name (ZREM, XACK: the key); a one-word command (TIME, PING) or a
//   script without keys to any primary (CommandSlot()): the first the map names, and when that
//   one fails UNAVAILABLE (say it was killed and its replica is not yet promoted) the next, each
//   at most once within the deadline, so health's TIME keeps answering while any primary does.
//   (Redis serves a command without keys even while the cluster state is FAIL.)
// - MOVED <slot> <node>: the command did not run. The slot map remembers the new owner, a map
//   refresh is requested (coalesced, ClusterTopology), and the command is sent again to the named
//   node. Counted in `moved`.
// - ASK <slot> <node>: the slot is migrating and this key is already on <node>. The command is
//   sent to <node> once, right after ASKING on the same connection (RedisCommand::asking); the map
//   is not changed. Counted in `ask`.
// - TRYAGAIN (a multi-key command while its keys are split by a migration) and CLUSTERDOWN (a
//   primary failed and is not yet replaced: about 1 s after a kill -9, redis-ha.md), and a slot
//   with no known primary in the map: the command did not run; it is tried again after a backoff
//   (10 ms doubling to 160 ms) while that stays within both the caller's deadline and
//   `retry_window` from the first try; then UNAVAILABLE with Redis' (or the map's) message.
// - At most `max_redirects` MOVED/ASK per command; more is UNAVAILABLE ("too many redirects": the
//   map keeps changing under it).
// - A connection failure to a node (the node pool drops a connection for an I/O error or a peer
//   close) or READONLY/MASTERDOWN from it requests a map refresh; the command itself fails
//   UNAVAILABLE as in RedisClient (it may have run), and callers retry (every write of the store
//   is idempotent by order id).
// - Node pools are made on first use and closed within ~100 ms of the map no longer naming their
//   node as a primary. What a closed pool still had queued was never sent: it goes to its slot's
//   primary as the new map names it (counted against max_redirects), not back to the caller.
//
// `--redis_wait_replicas` applies per node: each node pool follows its writing batches with WAIT.
//
// Thread-safety: Submit() and CheckRouting() are thread-safe. Callbacks run on the node pools'
// I/O threads, on this client's retry thread, or inline in Submit().
#ifndef ORDERHOLD_SERVER_REDIS_REDIS_CLUSTER_CLIENT_H_
#define ORDERHOLD_SERVER_REDIS_REDIS_CLUSTER_CLIENT_H_

#include <map>
#include <memory>
#include <queue>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "prometheus/counter.h"
#include "server/redis/cluster_topology.h"
#include "server/redis/redis_client.h"

namespace orderhold::redis {

// The hash slot a command is routed by (see the file comment), or RedisTopology::kAnySlot.
int CommandSlot(const RedisCommand& command);

struct RedisClusterClientOptions {
  // Options of every node's pool: credentials and TLS (pool.node), connections per node,
  // pipeline, timeouts, scripts, WAIT, errors, failure log, on_reconnect. `pool.db` must be 0 and
  // `pool.topology` is ignored (each pool talks to its one node).
  RedisClientOptions pool;
  // The slot map. Not null; shared with whoever else reads it (health, tests).
  std::shared_ptr<ClusterTopology> topology;
  // MOVED/ASK redirects followed per command before giving up. >= 0.
  int max_redirects = 5;
  // How long a command may keep being retried on TRYAGAIN, CLUSTERDOWN or an unroutable slot,
  // from its first try (bounded by its deadline too). >= 0.
  absl::Duration retry_window = absl::Milliseconds(1500);
  // orderhold_redis_redirects_total{kind="moved"} and {kind="ask"}; nullable.
  prometheus::Counter* moved = nullptr;
  prometheus::Counter* ask = nullptr;
};

class RedisClusterClient final : public RedisCaller {
 public:
  // Starts the retry thread; node pools are made on demand. INVALID_ARGUMENT: a null topology,
  // a database other than 0 (Redis Cluster has only database 0: cluster-spec.md "Implemented
  // subset"), max_redirects < 0, retry_window < 0, or node options RedisClient refuses.
  static absl::StatusOr<std::unique_ptr<RedisClusterClient>> Create(
      RedisClusterClientOptions options);

  // Fails commands waiting for a retry with UNAVAILABLE, closes every node pool.
  ~RedisClusterClient() override;
  RedisClusterClient(const RedisClusterClient&) = delete;
  RedisClusterClient& operator=(const RedisClusterClient&) = delete;

  void Submit(RedisCommand command, absl::Time deadline, ReplyCallback done) override;

  // ClusterTopology::CheckCoverage().
  absl::Status CheckRouting() override;

 private:
  struct Attempt;
  struct Later {
    absl::Time when;
    std::shared_ptr<Attempt> attempt;
    bool operator>(const Later& other) const { return when > other.when; }
  };

  explicit RedisClusterClient(RedisClusterClientOptions options);
  // Sends `attempt` to its redirect target or its slot's primary.
  void Route(std::shared_ptr<Attempt> attempt);
  void OnReply(std::shared_ptr<Attempt> attempt, absl::StatusOr<RedisReply> reply);
  // Retries `attempt` after its next backoff if that fits its window, else fails it with `why`.
  void RetryLater(std::shared_ptr<Attempt> attempt, absl::Status why);
  // The pool of `node`, made if needed. Null while shutting down.
  std::shared_ptr<RedisClient> PoolFor(const HostPort& node, absl::Status* error);
  // Retry thread: runs due retries and closes pools of nodes that stopped being primaries.
  void Run();
  void ClosePoolsOfFormerPrimaries();

  const RedisClusterClientOptions options_;
  absl::Mutex mu_;
  // By HostPort::ToString().
  std::map<std::string, std::shared_ptr<RedisClient>> pools_ ABSL_GUARDED_BY(mu_);
  // Pools closed but maybe still in use by a Submit() under way: destroyed by Run() once unused.
  std::vector<std::shared_ptr<RedisClient>> closing_ ABSL_GUARDED_BY(mu_);
  std::priority_queue<Later, std::vector<Later>, std::greater<Later>> later_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t pools_generation_ = 0;  // Run() only: the topology generation pools were checked at
  std::thread thread_;
};

}  // namespace orderhold::redis

#endif  // ORDERHOLD_SERVER_REDIS_REDIS_CLUSTER_CLIENT_H_
