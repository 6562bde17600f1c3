// ShardedSubscriber: keeps a set of sharded pub/sub channels subscribed (SSUBSCRIBE, Redis >= 7.0)
// on whichever primary serves each, across restarts, failovers and reshards, and hands every
// message to a callback. Generic: it knows channels, not what they mean (store/event_nudges.h
// subscribes OrderHold's nudge channels with it).
//
// Why sharded pub/sub: in Redis Cluster a sharded message stays on the shard that serves the
// channel's slot instead of being broadcast over the cluster bus to every node, and a script may
// publish it on its own node. In standalone and Sentinel mode it behaves as plain pub/sub on the
// one primary. See https://redis.io/docs/interact/pubsub/#sharded-pubsub.
//
// Shape: ONE connection per primary node, whatever the number of channels: in standalone and
// Sentinel mode every channel on the primary; in Cluster mode each channel on the primary that
// serves HashSlot(channel) (topology->NodeFor). Redis Cluster refuses an SSUBSCRIBE naming
// channels of two slots (CROSSSLOT), so each channel gets its own SSUBSCRIBE, pipelined on the
// node's connection. One manager thread decides the channel -> node assignment (every
// `recheck_interval`, when the topology's generation changes, and at once when a node thread
// reports a reason to doubt it), and one thread per node with channels runs its connection:
// connect (ConnectAuthenticated with `node`), SSUBSCRIBE what it is assigned, then wait for
// messages, PING when the connection is quiet, and drop it when Redis stays silent.
//
// Pub/sub is lossy: whatever is published while a channel is not subscribed (Redis restarting, a
// failover, a slot moving) is lost, so every successful SSUBSCRIBE of a channel is reported
// through on_subscribed, and a user that must not miss anything keeps its own slower check.
// Redis 7.0 sends an unsolicited `sunsubscribe` when a channel's slot leaves the node (a reshard
// or a failover of that slot): the channel is then reassigned after asking the topology afresh
// (RedisTopology::Refresh). A channel that must leave a node that still serves it (the topology
// changed its answer) makes the node's connection be made again without it, so the user needs no
// SUNSUBSCRIBE permission.
//
// Failures are never errors of the caller: Redis down at start, refused connects, AUTH errors and
// NOPERM answers are logged once when they appear (a NOPERM as one warning per node) and
// "<name>: subscribed at <node>" when they are over, and retried: connects after
// `retry_backoff`, doubling up to `max_retry_backoff`; a refused SSUBSCRIBE after
// `refused_retry`.
//
// Threads: one manager thread plus one per primary node with channels (one in standalone and
// Sentinel mode; in Cluster mode at most one per primary). The callbacks run on the node threads,
// so they may be called concurrently for channels of different nodes (and, while a channel moves
// between nodes, for the same channel from two threads). They must not block: a blocked node
// thread delays that node's messages and its keepalive. Source of the shape: the Sentinel
// client's +switch-master subscription (sentinel_topology.h), one connection per node as cluster
// clients keep one pool per node (redis_cluster_client.h).
#ifndef ORDERHOLD_SERVER_REDIS_SHARDED_SUBSCRIBER_H_
#define ORDERHOLD_SERVER_REDIS_SHARDED_SUBSCRIBER_H_

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "prometheus/counter.h"
#include "server/redis/redis_client.h"
#include "server/redis/redis_connection.h"
#include "server/redis/redis_topology.h"
#include "server/redis/redis_url.h"

namespace orderhold::redis {

// How a ShardedSubscriber paces its keepalive, reassignment and retries. Every duration > 0.
struct SubscriberTimings {
  // A PING is sent on a connection that received nothing for this long ...
  absl::Duration keepalive_interval = absl::Seconds(1);
  // ... and the connection is dropped when nothing answers for this long after it.
  absl::Duration keepalive_timeout = absl::Seconds(2);
  // How often the channel -> node assignment is computed again with no reason to.
  absl::Duration recheck_interval = absl::Seconds(1);
  // After a failed connect or a lost connection: wait this long, doubling per failure up to
  // max_retry_backoff, before connecting again.
  absl::Duration retry_backoff = absl::Milliseconds(100);
  absl::Duration max_retry_backoff = absl::Seconds(2);
  // After an SSUBSCRIBE answered with an error (NOPERM, or MOVED with the map not yet updated):
  // how long before that node's unsubscribed channels are tried again: refused_retry after a
  // NOPERM (an ACL does not change by itself: don't knock often), subscribe_retry otherwise.
  absl::Duration subscribe_retry = absl::Seconds(1);
  absl::Duration refused_retry = absl::Seconds(30);
};

struct ShardedSubscriberOptions {
  // Which node serves a slot: StandaloneTopology, SentinelTopology or ClusterTopology. Required.
  std::shared_ptr<RedisTopology> topology;
  // Credentials, TLS, connect timeout (also the bound on Refresh of the topology) and CLIENT
  // SETNAME of every connection. Pub/sub ignores the database.
  NodeOptions node;
  // The channels, by index; at least one, no two alike.
  std::vector<std::string> channels;
  // Called on a node thread with the index of the channel a message (`payload`) came on. Must
  // not block. Required.
  std::function<void(int channel, const std::string& payload)> on_message;
  // Called on a node thread each time a channel's subscription is (re)established: what was
  // published while it was not subscribed is lost. Must not block. Required.
  std::function<void(int channel)> on_subscribed;
  // Log prefix of this subscriber's lines ("<name>: subscribed at ...").
  std::string name = "redis sharded subscriber";
  SubscriberTimings timings;
  // Added to the warning when an SSUBSCRIBE is refused with NOPERM: what the user's ACL lacks and
  // what that costs (for nudges: "the app user needs the channel pattern &<key_prefix>:* and
  // +ssubscribe; event deliveries fall back to the safety sweep"). Empty: nothing added.
  std::string refused_hint;
  // Where a failure to connect (refused, TLS, AUTH) is logged, unprefixed: shared with the
  // data clients (RedisClientOptions::failure_log), so a failure both see (a wrong CA, a wrong
  // password) is one log line. Null: each node logs its own, prefixed with `name`. Failures of a
  // subscription itself are always logged with that prefix.
  std::shared_ptr<RedisFailureLog> connect_failure_log;
  // Messages received; null: not counted.
  prometheus::Counter* messages = nullptr;
  // Channel subscriptions made (SSUBSCRIBE confirmed, one per channel); null: not counted.
  prometheus::Counter* subscriptions = nullptr;
};

class ShardedSubscriber {
 public:
  // Validates `options` (INVALID_ARGUMENT: no topology, callback or channel, a duplicate
  // channel, node options ValidateNodeOptions refuses, a non-positive duration) and starts the
  // background threads; does not wait for Redis (Redis down at start is not an error).
  static absl::StatusOr<std::unique_ptr<ShardedSubscriber>> Start(ShardedSubscriberOptions options);

  // Stops and joins every thread (within about 100 ms, plus a connect or Refresh under way,
  // bounded by node.connect_timeout); no callback runs after it returns.
  ~ShardedSubscriber();
  ShardedSubscriber(const ShardedSubscriber&) = delete;
  ShardedSubscriber& operator=(const ShardedSubscriber&) = delete;

  // How many channels are subscribed right now (SSUBSCRIBE confirmed and not since lost), over
  // every node. Thread-safe.
  int subscribed_channels() const { return subscribed_.load(std::memory_order_acquire); }

 private:
  class Node;

  explicit ShardedSubscriber(ShardedSubscriberOptions options);
  // The manager thread: assigns channels to nodes, starts and stops node threads.
  void Run();
  // Computes the assignment and hands each node its channels.
  void Assign();
  // A node thread saw a reason to doubt the assignment (a slot left its node, a MOVED, a lost
  // connection): the manager asks the topology afresh and assigns again now.
  void RequestRecheck();

  const ShardedSubscriberOptions options_;
  std::vector<int> slots_;  // HashSlot(channels[i])
  std::map<std::string, int> channel_index_;
  std::atomic<int> subscribed_{0};
  std::atomic<bool> stopping_{false};

  absl::Mutex mu_;
  bool recheck_ ABSL_GUARDED_BY(mu_) = false;
  std::thread manager_;
  // Manager thread only: one per node address with channels, and where each channel went last
  // (kept while the topology has no answer for it).
  std::map<std::string, std::unique_ptr<Node>> nodes_;
  std::vector<std::optional<HostPort>> assigned_;
};

}  // namespace orderhold::redis

#endif  // ORDERHOLD_SERVER_REDIS_SHARDED_SUBSCRIBER_H_
