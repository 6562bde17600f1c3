// EventNudgeSubscriber: tells a server which partitions' event streams may have new events, from
// the nudges the scripts that end holds publish (lua/prelude/ end_hold: one empty SPUBLISH on
// the partition's channel KeySchema::NudgeChannel(p) per script call that appended events), so
// that watchers read a partition when something happened there instead of polling all of them.
// Subscribed only while a watch is open here (OnDemandEventNudges): with none, ends publish to no
// one here, and the server neither holds the connection nor wakes for them.
// The same class, on the reaper channels (NudgeChannels::kReaper, KeySchema::ReaperChannel(p)),
// tells the reaper which partitions' earliest due hold moved earlier ("due": set_due in
// lua/prelude/), so it looks at a partition when a hold may be due there instead of peeking
// every partition every tick (server/reaper/reaper.h), and where a consumer group was created
// ("group": ensure_group.lua), so its trimmer counts it (server/reaper/event_trimmer.h).
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
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "prometheus/counter.h"
#include "server/redis/redis_client.h"
#include "server/redis/redis_connection.h"
#include "server/redis/redis_topology.h"
#include "server/redis/sharded_subscriber.h"

namespace orderhold::store {

// Which channels a subscriber listens to.
enum class NudgeChannels {
  kEvents,  // KeySchema::NudgeChannel(p): events appended (on_nudge)
  kReaper,  // KeySchema::ReaperChannel(p): "due" (on_due) and "group" (on_group)
};

struct EventNudgeOptions {
  NudgeChannels channels = NudgeChannels::kEvents;
  // Which node serves a slot: StandaloneTopology, SentinelTopology or ClusterTopology. Required.
  std::shared_ptr<redis::RedisTopology> topology;
  // Credentials, TLS, connect timeout and CLIENT SETNAME of every connection (the store's: the
  // nudges come from the primaries the store writes to, for the same user).
  redis::NodeOptions node;
  // Channels = KeySchema(key_prefix).NudgeChannel(p) (or ReaperChannel(p)), p in
  // [0, KeySchema::kPartitionCount). Validated as --key_prefix (ValidateKeyPrefix).
  std::string key_prefix = "orderhold";
  // Called on a node thread with a partition whose stream may have new events: once per nudge
  // received, and for every partition each time its subscription is (re)established. Must not
  // block. Required with kEvents.
  std::function<void(int partition)> on_nudge;
  // kReaper: called on a node thread with a partition whose earliest due hold may have moved
  // earlier (a "due" message), or where a consumer group was created (a "group" message); both
  // for every partition each time its subscription is (re)established (what was published before
  // is lost). Must not block. Required with kReaper.
  std::function<void(int partition)> on_due;
  std::function<void(int partition)> on_group;
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
  // Validates `options` (INVALID_ARGUMENT: no topology, no callback the channels need, a bad
  // key_prefix, and what
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

// OnDemandEventNudges: an EventNudgeSubscriber that runs only while `wanted` says so (the server
// has a watch open: EventDispatcher::watched) and `linger` after it stops saying so (a consumer
// that reconnects does not make it flap). Checked every `check_every` on a thread of its own,
// which starts and stops the subscriber (a stop waits ~100 ms for its threads). A watch opened
// while it is off loses nothing: a watch's first read covers every partition, and the new
// subscriptions count as nudges of every partition.
//
// Thread-safety: `wanted` is called on its thread and must be thread-safe; running() is.
class OnDemandEventNudges {
 public:
  // Validates `options` as EventNudgeSubscriber::Start does (without connecting), then starts the
  // checking thread.
  static absl::StatusOr<std::unique_ptr<OnDemandEventNudges>> Start(
      EventNudgeOptions options, std::function<bool()> wanted,
      absl::Duration linger = absl::Seconds(30),
      absl::Duration check_every = absl::Milliseconds(100));
  // Stops the thread and the subscriber; on_nudge is never called after it returns.
  ~OnDemandEventNudges();
  OnDemandEventNudges(const OnDemandEventNudges&) = delete;
  OnDemandEventNudges& operator=(const OnDemandEventNudges&) = delete;

  // Whether the subscriber is running now (tests).
  bool running() const;

 private:
  OnDemandEventNudges(EventNudgeOptions options, std::function<bool()> wanted,
                      absl::Duration linger, absl::Duration check_every);
  void Loop();

  const EventNudgeOptions options_;
  const std::function<bool()> wanted_;
  const absl::Duration linger_;
  const absl::Duration check_every_;
  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::unique_ptr<EventNudgeSubscriber> subscriber_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace orderhold::store

#endif  // ORDERHOLD_SERVER_STORE_EVENT_NUDGES_H_
