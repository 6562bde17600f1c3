// EventNudgeSubscriber: tells a server which partitions' event streams may have new events, from
// the nudges the scripts that end holds publish (lua/prelude.lua end_hold: one empty SPUBLISH on
// the partition's channel KeySchema::NudgeChannel(p) per script call that appended events), so
// that watchers read a partition when something happened there instead of polling all of them.
//
// Why sharded pub/sub (SSUBSCRIBE, Redis >= 7.0): in Redis Cluster a sharded message stays on the
// shard that serves the channel's slot, where the script runs, instead of being broadcast over
// the cluster bus to every node, and a script may publish it (Redis 7.0.15 refuses, inside a
// script, a channel of a slot its node does not serve: "non local key"). In standalone and
// Sentinel mode it behaves as plain pub/sub on the one primary.
//
// Shape: ONE connection per primary node, whatever the number of watchers: for standalone and
// Sentinel the 64 channels on the primary; for Cluster each channel on the primary that serves
// HashSlot(channel) (topology->NodeFor). Redis Cluster refuses an SSUBSCRIBE naming channels of
// two slots (CROSSSLOT), and the 64 partitions are 64 slots, so each channel gets its own
// SSUBSCRIBE, pipelined on the node's connection. One manager thread decides the partition ->
// node assignment (every `recheck_interval`, when the topology's generation changes, and at once
// when a node thread reports a reason to doubt it), and one thread per node with partitions runs
// its connection: connect (AUTH, optional CLIENT SETNAME), SSUBSCRIBE what it is assigned, then
// wait for messages, PING when the connection is quiet, and drop it when Redis stays silent.
//
// Pub/sub is lossy: whatever is published while a channel is not subscribed (Redis restarting,
// a failover, a slot moving) is lost, so every successful SSUBSCRIBE of a partition is reported
// through on_nudge as if it were a nudge (the caller reads that partition once), and the caller
// keeps a slow safety sweep. Redis 7.0 sends an unsolicited `sunsubscribe` when a channel's slot
// leaves the node (a reshard or a failover of that slot): the partition is then reassigned after
// asking the topology afresh (RedisTopology::Refresh). A partition that must leave a node that
// still serves it (the topology changed its answer) makes the node's connection be made again
// without it, so the app user needs no SUNSUBSCRIBE permission.
//
// Failures are never errors of the caller: Redis down at start, refused connects, AUTH errors and
// NOPERM answers (an ACL without `&<prefix>:*` or +ssubscribe) are logged once when they appear
// (a NOPERM as one warning per node saying deliveries fall back to the safety sweep) and "redis
// event nudges: subscribed at <node>" when they are over, and retried: connects after
// `retry_backoff`, doubling up to `max_retry_backoff`; a refused SSUBSCRIBE after `refused_retry`.
//
// Threads: one manager thread plus one per primary node with partitions (one in standalone and
// Sentinel mode; in Cluster mode as many as primaries, at most 64). on_nudge runs on the node
// threads, so it may be called concurrently for partitions of different nodes (and, while a
// partition moves between nodes, for the same partition from two threads). It must not block: a
// blocked node thread delays that node's nudges and its keepalive. Source of the shape: the
// Sentinel client's +switch-master subscription (sentinel_topology.h), one connection per node as
// cluster clients keep one pool per node (redis_cluster_client.h).
#ifndef ORDERHOLD_SERVER_STORE_EVENT_NUDGES_H_
#define ORDERHOLD_SERVER_STORE_EVENT_NUDGES_H_

#include <array>
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
#include "server/store/keys.h"

namespace orderhold::store {

struct EventNudgeOptions {
  // Which node serves a slot: StandaloneTopology, SentinelTopology or ClusterTopology. Required.
  std::shared_ptr<redis::RedisTopology> topology;
  // user/password for AUTH (hosts and db unused: pub/sub ignores the database).
  redis::RedisEndpoint endpoint;
  // TLS for every connection; null: plain TCP (or, with endpoint.tls, TLS with the system's CAs).
  std::shared_ptr<const redis::TlsContext> tls;
  // Channels = KeySchema(key_prefix).NudgeChannel(p), p in [0, KeySchema::kPartitionCount).
  // Validated as --key_prefix (ValidateKeyPrefix).
  std::string key_prefix = "orderhold";
  // Called on a node thread with a partition whose stream may have new events: once per nudge
  // received, and for every partition each time its subscription is (re)established. Must not
  // block. Required.
  std::function<void(int partition)> on_nudge;
  // Bound on connecting, AUTH and CLIENT SETNAME to one node, and on Refresh of the topology.
  absl::Duration connect_timeout = absl::Milliseconds(500);
  // CLIENT SETNAME of each connection ("<client_name>" as given); empty: none is sent (the app
  // ACL of deploy/redis/orderhold.acl has no +client|setname, and a refused SETNAME leaves an
  // entry in ACL LOG).
  std::string client_name;
  // A PING is sent on a connection that received nothing for this long ...
  absl::Duration keepalive_interval = absl::Seconds(1);
  // ... and the connection is dropped when nothing answers for this long after it.
  absl::Duration keepalive_timeout = absl::Seconds(2);
  // How often the partition -> node assignment is computed again with no reason to.
  absl::Duration recheck_interval = absl::Seconds(1);
  // After a failed connect or a lost connection: wait this long, doubling per failure up to
  // max_retry_backoff, before connecting again.
  absl::Duration retry_backoff = absl::Milliseconds(100);
  absl::Duration max_retry_backoff = absl::Seconds(2);
  // After an SSUBSCRIBE answered with an error (NOPERM, or MOVED with the map not yet updated):
  // how long before that node's unsubscribed partitions are tried again: refused_retry after a
  // NOPERM (an ACL does not change by itself: don't knock often), subscribe_retry otherwise.
  absl::Duration subscribe_retry = absl::Seconds(1);
  absl::Duration refused_retry = absl::Seconds(30);
  // Where a failure to connect (refused, TLS, AUTH) is logged, unprefixed: the store's
  // RedisClientOptions::failure_log, so a failure both see (a wrong CA, a wrong password) is one
  // log line, not one per component. Null: each node logs its own, prefixed "redis event
  // nudges:". Failures of a subscription itself are always logged with that prefix.
  std::shared_ptr<redis::RedisFailureLog> connect_failure_log;
  // orderhold_event_nudges_total: nudge messages received; null: not counted.
  prometheus::Counter* nudges = nullptr;
  // orderhold_event_nudge_subscriptions_total: channel subscriptions made (SSUBSCRIBE confirmed,
  // one per partition: 64 at start in standalone, again after each reconnect or slot move);
  // null: not counted.
  prometheus::Counter* resubscribes = nullptr;
};

class EventNudgeSubscriber {
 public:
  // Validates `options` (INVALID_ARGUMENT: no topology or on_nudge, a bad key_prefix, a
  // non-positive duration) and starts the background threads; does not wait for Redis (Redis
  // down at start is not an error: see the file comment).
  static absl::StatusOr<std::unique_ptr<EventNudgeSubscriber>> Start(EventNudgeOptions options);

  // Stops and joins every thread (within about 100 ms, plus a connect or Refresh under way,
  // bounded by connect_timeout); on_nudge is never called after it returns.
  ~EventNudgeSubscriber();
  EventNudgeSubscriber(const EventNudgeSubscriber&) = delete;
  EventNudgeSubscriber& operator=(const EventNudgeSubscriber&) = delete;

  // How many partitions are subscribed right now (SSUBSCRIBE confirmed and not since lost), over
  // every node. For tests and health. Thread-safe.
  int subscribed_partitions() const { return subscribed_.load(std::memory_order_acquire); }

 private:
  class Node;

  explicit EventNudgeSubscriber(EventNudgeOptions options);
  // The manager thread: assigns partitions to nodes, starts and stops node threads.
  void Run();
  // Computes the assignment and hands each node its partitions.
  void Assign();
  // A node thread saw a reason to doubt the assignment (a slot left its node, a MOVED, a lost
  // connection): the manager asks the topology afresh and assigns again now.
  void RequestRecheck();

  const EventNudgeOptions options_;
  const KeySchema keys_;
  std::vector<std::string> channels_;  // by partition
  std::vector<int> slots_;             // HashSlot(channels_[p])
  std::map<std::string, int> partition_of_;
  std::atomic<int> subscribed_{0};
  std::atomic<bool> stopping_{false};

  absl::Mutex mu_;
  bool recheck_ ABSL_GUARDED_BY(mu_) = false;
  std::thread manager_;
  // Manager thread only: one per node address with partitions, and where each partition went
  // last (kept while the topology has no answer for it).
  std::map<std::string, std::unique_ptr<Node>> nodes_;
  std::array<std::optional<redis::HostPort>, KeySchema::kPartitionCount> assigned_;
};

}  // namespace orderhold::store

#endif  // ORDERHOLD_SERVER_STORE_EVENT_NUDGES_H_
