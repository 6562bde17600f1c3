// EventNudgeSubscriber: tells a server which partitions' event streams may have new events, from
// the nudges the scripts that end holds publish (lua/prelude.lua end_hold: one empty SPUBLISH on
// the partition's channel KeySchema::NudgeChannel(p) per script call that appended events), so
// that watchers read a partition when something happened there instead of polling all of them;
// and which partitions' earliest due hold moved earlier (a "due" message on the same channel:
// set_due in lua/prelude.lua), so that the reaper looks at a partition when a hold may be due
// there instead of peeking every partition every tick (server/reaper/reaper.h).
//
// The subscribing itself (one connection per primary, each channel on the node serving its slot,
// resubscribing across restarts, failovers and reshards, keepalive, backoff, logs) is the Redis
// client library's generic redis::ShardedSubscriber (redis/sharded_subscriber.h); this class
// only knows OrderHold's channels: the 64 partitions' nudge channels under --key_prefix, and what
// a message or a new subscription means (read that partition once).
//
// Why sharded pub/sub (SSUBSCRIBE, Redis >= 7.0): a script may publish a sharded message on its
// own node (Redis 7.0.15 refuses, inside a script, a channel of a slot its node does not serve:
// "non local key"), and in Redis Cluster it stays on that shard instead of being broadcast to
// every node. Pub/sub is lossy: every (re)subscription is reported as a nudge, and the caller
// keeps a slow safety sweep (domain/event_dispatcher.h). An ACL without `&<prefix>:*` or
// +ssubscribe is one warning per node saying deliveries fall back to that sweep.
//
// Threads: ShardedSubscriber's (a manager plus one per primary with partitions). on_nudge runs on
// them, may be called concurrently, and must not block.
#ifndef ORDERHOLD_SERVER_STORE_EVENT_NUDGES_H_
#define ORDERHOLD_SERVER_STORE_EVENT_NUDGES_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "prometheus/counter.h"
#include "server/redis/redis_client.h"
#include "server/redis/redis_connection.h"
#include "server/redis/redis_topology.h"
#include "server/redis/sharded_subscriber.h"

namespace orderhold::store {

struct EventNudgeOptions {
  // Which node serves a slot: StandaloneTopology, SentinelTopology or ClusterTopology. Required.
  std::shared_ptr<redis::RedisTopology> topology;
  // Credentials, TLS, connect timeout and CLIENT SETNAME of every connection (the store's: the
  // nudges come from the primaries the store writes to, for the same user).
  redis::NodeOptions node;
  // Channels = KeySchema(key_prefix).NudgeChannel(p), p in [0, KeySchema::kPartitionCount).
  // Validated as --key_prefix (ValidateKeyPrefix).
  std::string key_prefix = "orderhold";
  // Called on a node thread with a partition whose stream may have new events: once per nudge
  // received, and for every partition each time its subscription is (re)established. Must not
  // block. Required.
  std::function<void(int partition)> on_nudge;
  // Called on a node thread with a partition whose earliest due hold may have moved earlier: a
  // script published "due" on its channel (set_due in lua/prelude.lua), and for every partition
  // each time its subscription is (re)established. Must not block. Null: those messages are
  // dropped (they never reach on_nudge: no event was appended).
  std::function<void(int partition)> on_due;
  // Keepalive, reassignment and retry pacing (redis::SubscriberTimings).
  redis::SubscriberTimings timings;
  // Where a failure to connect is logged: the store's RedisClientOptions::failure_log, so a
  // failure both see is one log line. Null: logged prefixed "redis event nudges:".
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
  // Validates `options` (INVALID_ARGUMENT: no topology or on_nudge, a bad key_prefix, and what
  // redis::ShardedSubscriber::Start refuses) and starts subscribing; does not wait for Redis
  // (Redis down at start is not an error).
  static absl::StatusOr<std::unique_ptr<EventNudgeSubscriber>> Start(EventNudgeOptions options);

  // Stops the subscriber (within about 100 ms, plus a connect under way); on_nudge is never
  // called after it returns.
  ~EventNudgeSubscriber() = default;
  EventNudgeSubscriber(const EventNudgeSubscriber&) = delete;
  EventNudgeSubscriber& operator=(const EventNudgeSubscriber&) = delete;

  // How many partitions are subscribed right now, over every node. For tests and health.
  // Thread-safe.
  int subscribed_partitions() const { return subscriber_->subscribed_channels(); }

 private:
  explicit EventNudgeSubscriber(std::unique_ptr<redis::ShardedSubscriber> subscriber)
      : subscriber_(std::move(subscriber)) {}
  std::unique_ptr<redis::ShardedSubscriber> subscriber_;
};

}  // namespace orderhold::store

#endif  // ORDERHOLD_SERVER_STORE_EVENT_NUDGES_H_
