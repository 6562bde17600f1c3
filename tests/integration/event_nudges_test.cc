// Event nudges against real redis-server 7.0.15: the scripts that end holds publish exactly one
// nudge per call on the partition's channel (lua/prelude/ end_hold), and EventNudgeSubscriber
// (server/store/event_nudges.h) delivers them, re-reports every partition on (re)subscription,
// survives a Redis restart, keeps one connection per primary in a Redis Cluster and follows a
// slot that moves, follows a Sentinel failover, and works over TLS. Standalone tests run as the ACL
// user of deploy/redis/orderhold.acl (so they prove that ACL is enough); one runs as a user without
// the channel permission.
#include "server/store/event_nudges.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "prometheus/registry.h"
#include "server/metrics/metrics.h"
#include "server/redis/cluster_slots.h"
#include "server/redis/cluster_topology.h"
#include "server/redis/redis_topology.h"
#include "server/redis/sentinel_topology.h"
#include "server/redis_store.h"
#include "server/store/keys.h"
#include "server/store/redis_hold_store.h"
#include "tests/testing/app_acl.h"
#include "tests/testing/eventually.h"
#include "tests/testing/metric_values.h"
#include "tests/testing/os_util.h"
#include "tests/testing/redis_cluster.h"
#include "tests/testing/redis_server.h"
#include "tests/testing/sentinel_group.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/tls_certs.h"

namespace orderhold::store {
namespace {

using ::orderhold::testing::Eventually;
using ::orderhold::testing::IsOk;
using ::orderhold::testing::MetricValue;
using ::orderhold::testing::RedisCluster;
using ::orderhold::testing::RedisServer;

constexpr char kUser[] = "orderhold";
constexpr char kPassword[] = "ohpw";

absl::Time In(absl::Duration d) { return absl::Now() + d; }

// What on_nudge was called with, per partition, and when last.
class Recorder {
 public:
  void On(int partition) {
    absl::MutexLock lock(&mu_);
    ++counts_[partition];
    last_[partition] = absl::Now();
  }
  int count(int partition) {
    absl::MutexLock lock(&mu_);
    return counts_[partition];
  }
  absl::Time last(int partition) {
    absl::MutexLock lock(&mu_);
    return last_[partition];
  }
  // Whether every partition was reported at least `n` times.
  bool AllAtLeast(int n) {
    absl::MutexLock lock(&mu_);
    return std::all_of(counts_.begin(), counts_.end(), [n](int c) { return c >= n; });
  }
  std::vector<int> counts() {
    absl::MutexLock lock(&mu_);
    return counts_;
  }

 private:
  absl::Mutex mu_;
  std::vector<int> counts_ = std::vector<int>(KeySchema::kPartitionCount, 0);
  std::vector<absl::Time> last_ = std::vector<absl::Time>(KeySchema::kPartitionCount);
};

// A user id of `partition` ("u<partition>-<n>"), the n-th such.
std::string UserIn(int partition, int n = 0) {
  for (int i = 0;; ++i) {
    std::string user = absl::StrCat("u", partition, "-", i);
    if (KeySchema::PartitionOf(user) == partition && n-- == 0) return user;
  }
}

// The `field=value` of CLIENT LIST's line, as an integer (-1 when missing).
int ClientField(absl::string_view line, absl::string_view field) {
  for (absl::string_view word : absl::StrSplit(line, ' ')) {
    if (absl::ConsumePrefix(&word, absl::StrCat(field, "="))) {
      int value = 0;
      return absl::SimpleAtoi(word, &value) ? value : -1;
    }
  }
  return -1;
}

// The `ssub` (sharded subscriptions) of each client of `client_list` that has any.
std::vector<int> ShardSubscribers(absl::string_view client_list) {
  std::vector<int> out;
  for (absl::string_view line : absl::StrSplit(client_list, '\n', absl::SkipEmpty())) {
    if (const int ssub = ClientField(line, "ssub"); ssub > 0) out.push_back(ssub);
  }
  return out;
}

// The test user's credentials, as every connection kind takes them.
redis::NodeOptions Credentials() {
  redis::NodeOptions node;
  node.user = kUser;
  node.password = kPassword;
  return node;
}

// A raw SSUBSCRIBE connection to one channel, counting the nudges a step publishes: the step runs,
// then a marker is published on the same channel (pub/sub keeps one channel's messages in publish
// order), and the empty messages before the marker are the step's nudges.
class ChannelProbe {
 public:
  static absl::StatusOr<std::unique_ptr<ChannelProbe>> Open(int port, std::string channel) {
    auto probe = std::unique_ptr<ChannelProbe>(new ChannelProbe(std::move(channel)));
    absl::StatusOr<std::unique_ptr<redis::RedisConnection>> connection =
        redis::ConnectAuthenticated(redis::HostPort{"127.0.0.1", port}, Credentials(), "", "node",
                                    In(absl::Seconds(2)));
    if (!connection.ok()) return connection.status();
    probe->connection_ = std::move(*connection);
    absl::StatusOr<redis::RedisReply> reply =
        probe->connection_->Run({"SSUBSCRIBE", probe->channel_}, In(absl::Seconds(2)));
    if (!reply.ok()) return reply.status();
    if (reply->type != redis::RedisReply::Type::kArray) return absl::InternalError(reply->str);
    return probe;
  }

  // The nudges (empty messages) published on the channel since the last call, or -1 on an error
  // (logged), `publish` being a connection that may SPUBLISH the marker.
  int NudgesSince(RedisServer& publish) {
    const std::string marker = absl::StrCat("marker", ++markers_);
    absl::StatusOr<std::string> sent = publish.Command({"SPUBLISH", channel_, marker});
    if (!sent.ok()) {
      ADD_FAILURE() << sent.status();
      return -1;
    }
    int nudges = 0;
    while (true) {
      absl::StatusOr<redis::RedisReply> reply = connection_->Read(In(absl::Seconds(2)));
      if (!reply.ok()) {
        ADD_FAILURE() << reply.status();
        return -1;
      }
      if (reply->type != redis::RedisReply::Type::kArray || reply->elements.size() != 3) continue;
      if (reply->elements[2].str == marker) return nudges;
      if (reply->elements[2].str.empty()) ++nudges;
    }
  }

 private:
  explicit ChannelProbe(std::string channel) : channel_(std::move(channel)) {}
  std::string channel_;
  int markers_ = 0;
  std::unique_ptr<redis::RedisConnection> connection_;
};

// A standalone Redis with the app ACL user (deploy/redis/orderhold.acl, or `rules`).
absl::StatusOr<std::unique_ptr<RedisServer>> StartRedis(std::string rules = "") {
  if (rules.empty()) {
    absl::StatusOr<std::string> line = testing::AppAclRulesLine();
    if (!line.ok()) return line.status();
    rules = *line;
  }
  return RedisServer::Start({.admin_password = "adminpw",
                             .acl_users = {absl::StrCat(kUser, " on >", kPassword, " ", rules)}});
}

absl::StatusOr<std::unique_ptr<RedisHoldStore>> StoreFor(
    int port, std::shared_ptr<redis::ClusterTopology> cluster = nullptr) {
  RedisStoreOptions options;
  options.client.topology =
      std::make_shared<redis::StandaloneTopology>(redis::HostPort{"127.0.0.1", port});
  options.client.node.user = kUser;
  options.client.node.password = kPassword;
  options.client.connections = 1;
  options.cluster = std::move(cluster);
  return ConnectRedisStore(std::move(options));
}

EventNudgeOptions SubscriberOptions(std::shared_ptr<redis::RedisTopology> topology,
                                    Recorder& recorder) {
  EventNudgeOptions options;
  options.topology = std::move(topology);
  options.node.user = kUser;
  options.node.password = kPassword;
  options.on_nudge = [&recorder](int partition) { recorder.On(partition); };
  options.timings.retry_backoff = absl::Milliseconds(50);
  options.timings.max_retry_backoff = absl::Milliseconds(200);
  return options;
}

absl::StatusOr<PlaceHoldResult> Place(HoldStore& store, const std::string& user,
                                      const std::string& order, absl::Duration ttl,
                                      std::optional<absl::Time> now = std::nullopt) {
  return Await<PlaceHoldResult>([&](auto done) {
    store.PlaceHold(PlaceHoldArgs{user, order, ttl, 10, 0, {}},
                    CallOptions{In(absl::Seconds(2)), now}, std::move(done));
  });
}

absl::StatusOr<EndHoldResult> End(HoldStore& store, const std::string& user,
                                  const std::string& order, HoldOutcome outcome,
                                  std::optional<absl::Time> now = std::nullopt) {
  return Await<EndHoldResult>([&](auto done) {
    store.EndHold(user, order, outcome, CallOptions{In(absl::Seconds(2)), now}, std::move(done));
  });
}

int64_t EventCount(RedisServer& redis, const KeySchema& keys, int partition) {
  absl::StatusOr<std::string> n = redis.Command({"XLEN", keys.EventsKey(partition)});
  int64_t value = -1;
  return n.ok() && absl::SimpleAtoi(*n, &value) ? value : -1;
}

// INFO stats' total_error_replies (-1 when unreadable).
int64_t ErrorReplies(RedisServer& redis) {
  absl::StatusOr<std::string> info = redis.Command({"INFO", "stats"});
  if (!info.ok()) return -1;
  for (absl::string_view line : absl::StrSplit(*info, '\n')) {
    int64_t value = 0;
    if (absl::ConsumePrefix(&line, "total_error_replies:") &&
        absl::SimpleAtoi(absl::StripTrailingAsciiWhitespace(line), &value)) {
      return value;
    }
  }
  return -1;
}

// Every script that ends holds publishes one nudge per call that appended events, none
// otherwise: CancelHold, Pay, PlaceHold ending expired holds, Reap ending several users' holds.
TEST(EventNudgesTest, EachEndingScriptCallPublishesExactlyOneNudge) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<RedisServer> redis, StartRedis());
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<RedisHoldStore> store, StoreFor(redis->port()));
  const KeySchema& keys = store->keys();
  constexpr int kPartition = 17;
  const std::string alice = UserIn(kPartition, 0);
  const std::string bob = UserIn(kPartition, 1);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<ChannelProbe> probe,
                       ChannelProbe::Open(redis->port(), keys.NudgeChannel(kPartition)));
  // And nothing on another partition's channel.
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<ChannelProbe> other,
                       ChannelProbe::Open(redis->port(), keys.NudgeChannel(kPartition + 1)));

  // Placing a hold ends nothing: no nudge.
  ASSERT_THAT(Place(*store, alice, "o1", absl::Hours(1)), IsOk());
  ASSERT_THAT(Place(*store, alice, "o2", absl::Hours(1)), IsOk());
  EXPECT_EQ(probe->NudgesSince(*redis), 0);
  // CancelHold and Pay: one each.
  ASSERT_OK_AND_ASSIGN(EndHoldResult cancelled, End(*store, alice, "o1", HoldOutcome::kCancelled));
  EXPECT_EQ(cancelled.result, EndHoldResult::Result::kEnded);
  EXPECT_EQ(probe->NudgesSince(*redis), 1);
  ASSERT_THAT(End(*store, alice, "o2", HoldOutcome::kPaid), IsOk());
  EXPECT_EQ(probe->NudgesSince(*redis), 1);
  // Paying an order that already ended appends nothing: no nudge.
  ASSERT_THAT(End(*store, alice, "o2", HoldOutcome::kPaid), IsOk());
  EXPECT_EQ(probe->NudgesSince(*redis), 0);
  EXPECT_EQ(EventCount(*redis, keys, kPartition), 2);

  // A PlaceHold that ends three expired holds (the clock given explicitly): three events, one
  // nudge.
  const absl::Time t0 = absl::Now();
  for (const char* order : {"e1", "e2", "e3"}) {
    ASSERT_THAT(Place(*store, alice, order, absl::Seconds(1), t0), IsOk());
  }
  EXPECT_EQ(probe->NudgesSince(*redis), 0);
  ASSERT_OK_AND_ASSIGN(PlaceHoldResult placed,
                       Place(*store, alice, "e4", absl::Hours(1), t0 + absl::Seconds(5)));
  EXPECT_EQ(placed.expired_removed, 3);
  EXPECT_EQ(probe->NudgesSince(*redis), 1);
  EXPECT_EQ(EventCount(*redis, keys, kPartition), 5);
  // An EndHold whose lazy cleanup ends an expired hold: one nudge.
  ASSERT_THAT(Place(*store, bob, "b0", absl::Seconds(1), t0), IsOk());
  ASSERT_OK_AND_ASSIGN(EndHoldResult unknown,
                       End(*store, bob, "none", HoldOutcome::kPaid, t0 + absl::Seconds(5)));
  EXPECT_EQ(unknown.expired_removed, 1);
  EXPECT_EQ(probe->NudgesSince(*redis), 1);

  // Reap ending two users' holds (three events) in one call: one nudge.
  ASSERT_THAT(Place(*store, alice, "r1", absl::Seconds(1), t0), IsOk());
  ASSERT_THAT(Place(*store, bob, "r2", absl::Seconds(1), t0), IsOk());
  ASSERT_THAT(Place(*store, bob, "r3", absl::Seconds(1), t0), IsOk());
  const int64_t before = EventCount(*redis, keys, kPartition);
  ReapArgs reap;
  reap.max_users = 10;
  ASSERT_OK_AND_ASSIGN(ReapResult reaped, Await<ReapResult>([&](auto done) {
                         store->Reap(kPartition, reap,
                                     CallOptions{In(absl::Seconds(2)), t0 + absl::Seconds(5)},
                                     std::move(done));
                       }));
  EXPECT_EQ(reaped.reaped_expire_times.size(), 3u);
  EXPECT_EQ(EventCount(*redis, keys, kPartition), before + 3);
  EXPECT_EQ(probe->NudgesSince(*redis), 1);
  // A reap with nothing due: no nudge.
  ASSERT_THAT(Await<ReapResult>([&](auto done) {
                store->Reap(kPartition, reap,
                            CallOptions{In(absl::Seconds(2)), t0 + absl::Seconds(5)},
                            std::move(done));
              }),
              IsOk());
  EXPECT_EQ(probe->NudgesSince(*redis), 0);
  EXPECT_EQ(other->NudgesSince(*redis), 0);
  // For the record: the SPUBLISHes inside scripts (nudges) are counted with the markers.
  ASSERT_OK_AND_ASSIGN(std::string stats, redis->Command({"INFO", "commandstats"}));
  for (absl::string_view line : absl::StrSplit(stats, '\n')) {
    if (absl::StartsWith(line, "cmdstat_spublish") || absl::StartsWith(line, "cmdstat_evalsha")) {
      std::printf("%s\n", std::string(absl::StripTrailingAsciiWhitespace(line)).c_str());
    }
  }
}

class EventNudgeSubscriberTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK_AND_ASSIGN(redis_, StartRedis());
    ASSERT_OK_AND_ASSIGN(store_, StoreFor(redis_->port()));
    topology_ =
        std::make_shared<redis::StandaloneTopology>(redis::HostPort{"127.0.0.1", redis_->port()});
  }

  EventNudgeOptions Options() {
    EventNudgeOptions options = SubscriberOptions(topology_, recorder_);
    options.nudges = &metrics_.event_nudges();
    options.resubscribes = &metrics_.event_nudge_subscriptions();
    return options;
  }

  // SPUBLISHes on `partition`'s channel until on_nudge reports it; the time each took.
  std::vector<absl::Duration> MeasureLatency(int partition, int samples) {
    std::vector<absl::Duration> out;
    for (int i = 0; i < samples; ++i) {
      const int before = recorder_.count(partition);
      const absl::Time sent = absl::Now();
      EXPECT_THAT(redis_->Command({"SPUBLISH", store_->keys().NudgeChannel(partition), ""}),
                  IsOk());
      EXPECT_TRUE(Eventually([&] { return recorder_.count(partition) > before; }, absl::Seconds(2),
                             absl::Microseconds(100)));
      out.push_back(recorder_.last(partition) - sent);
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  std::unique_ptr<RedisServer> redis_;
  std::unique_ptr<RedisHoldStore> store_;
  std::shared_ptr<redis::StandaloneTopology> topology_;
  Recorder recorder_;
  Recorder due_;  // on_due
  prometheus::Registry registry_;
  metrics::Metrics metrics_{registry_};
};

// One connection subscribes all 64 channels, reports every partition once subscribed, and
// delivers a CancelHold's nudge for its partition promptly.
TEST_F(EventNudgeSubscriberTest, SubscribesEveryPartitionOnOneConnectionAndDeliversNudges) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<EventNudgeSubscriber> subscriber,
                       EventNudgeSubscriber::Start(Options()));
  ASSERT_TRUE(Eventually([&] { return subscriber->subscribed_partitions() == 64; }));
  EXPECT_TRUE(recorder_.AllAtLeast(1));
  EXPECT_EQ(MetricValue(registry_, "orderhold_event_nudge_subscriptions_total"), 64);
  ASSERT_OK_AND_ASSIGN(std::string clients, redis_->Command({"CLIENT", "LIST"}));
  EXPECT_THAT(ShardSubscribers(clients), ::testing::ElementsAre(64)) << clients;

  const std::string user = UserIn(5);
  ASSERT_THAT(Place(*store_, user, "o1", absl::Hours(1)), IsOk());
  ASSERT_THAT(Place(*store_, user, "o2", absl::Hours(2)), IsOk());
  const int before = recorder_.count(5);
  const absl::Time start = absl::Now();
  ASSERT_THAT(End(*store_, user, "o1", HoldOutcome::kCancelled), IsOk());
  ASSERT_TRUE(Eventually([&] { return recorder_.count(5) == before + 1; }, absl::Seconds(2),
                         absl::Microseconds(200)));
  // Delivery is shown by the event (the Eventually above); how fast is printed as a figure, not
  // asserted (a shared 2-core machine decides that, not the code).
  const absl::Duration end_to_nudge = recorder_.last(5) - start;
  EXPECT_EQ(MetricValue(registry_, "orderhold_event_nudges_total"), 1);
  // No other partition was nudged.
  std::vector<int> counts = recorder_.counts();
  counts[5] -= 1;
  EXPECT_THAT(counts, ::testing::Each(1));

  const std::vector<absl::Duration> latency = MeasureLatency(9, 50);
  RecordProperty("spublish_to_on_nudge_p50_us",
                 static_cast<int>(absl::ToInt64Microseconds(latency[latency.size() / 2])));
  RecordProperty("spublish_to_on_nudge_max_us",
                 static_cast<int>(absl::ToInt64Microseconds(latency.back())));
  std::printf("CancelHold call to on_nudge: %s; SPUBLISH to on_nudge over %zu: p50 %s, max %s\n",
              absl::FormatDuration(end_to_nudge).c_str(), latency.size(),
              absl::FormatDuration(latency[latency.size() / 2]).c_str(),
              absl::FormatDuration(latency.back()).c_str());
}

// The reaper channels: every partition reported once subscribed (to both callbacks); the first
// hold of an empty partition lowers its earliest due time: one "due" message; a later hold and an
// end publish none there; a new consumer group publishes "group".
TEST_F(EventNudgeSubscriberTest, ReaperChannelsCarryDueAndGroupNudges) {
  Recorder group;
  EventNudgeOptions options = SubscriberOptions(topology_, recorder_);
  options.channels = NudgeChannels::kReaper;
  options.on_nudge = nullptr;
  options.on_due = [this](int partition) { due_.On(partition); };
  options.on_group = [&group](int partition) { group.On(partition); };
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<EventNudgeSubscriber> subscriber,
                       EventNudgeSubscriber::Start(options));
  ASSERT_TRUE(Eventually([&] { return subscriber->subscribed_partitions() == 64; }));
  EXPECT_TRUE(due_.AllAtLeast(1));
  EXPECT_TRUE(group.AllAtLeast(1));

  const std::string user = UserIn(5);
  ASSERT_THAT(Place(*store_, user, "o1", absl::Hours(1)), IsOk());
  ASSERT_TRUE(Eventually([&] { return due_.count(5) == 2; }));
  ASSERT_THAT(Place(*store_, user, "o2", absl::Hours(2)), IsOk());
  ASSERT_THAT(End(*store_, user, "o1", HoldOutcome::kCancelled), IsOk());
  ASSERT_OK_AND_ASSIGN(bool created, Await<bool>([&](auto done) {
                         store_->EnsureGroup(
                             5, "billing", GroupStart::kLatest,
                             CallOptions{absl::Now() + absl::Seconds(2), std::nullopt},
                             std::move(done));
                       }));
  EXPECT_TRUE(created);
  ASSERT_TRUE(Eventually([&] { return group.count(5) == 2; }));
  // Nothing else published on the reaper channels: one message each, and no event nudge.
  std::vector<int> due = due_.counts();
  due[5] -= 1;
  EXPECT_THAT(due, ::testing::Each(1));
  std::vector<int> groups = group.counts();
  groups[5] -= 1;
  EXPECT_THAT(groups, ::testing::Each(1));
  EXPECT_THAT(recorder_.counts(), ::testing::Each(0));
  // The event channels need on_nudge, which these options lack.
  EventNudgeOptions events = options;
  events.channels = NudgeChannels::kEvents;
  EXPECT_EQ(EventNudgeSubscriber::Start(events).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// On demand: no connection while no watch wants the nudges; subscribed once one does; closed
// `linger` after the last stopped wanting them.
TEST_F(EventNudgeSubscriberTest, OnDemandSubscribesOnlyWhileWanted) {
  std::atomic<bool> wanted = false;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<OnDemandEventNudges> nudges,
                       OnDemandEventNudges::Start(
                           Options(), [&wanted] { return wanted.load(); },
                           /*linger=*/absl::Milliseconds(300),
                           /*check_every=*/absl::Milliseconds(20)));
  absl::SleepFor(absl::Milliseconds(200));
  EXPECT_FALSE(nudges->running());
  ASSERT_OK_AND_ASSIGN(std::string before, redis_->Command({"CLIENT", "LIST"}));
  EXPECT_THAT(ShardSubscribers(before), ::testing::IsEmpty()) << before;

  wanted = true;
  ASSERT_TRUE(Eventually([&] { return recorder_.AllAtLeast(1); }));  // subscribed everywhere
  EXPECT_TRUE(nudges->running());
  const std::string user = UserIn(7);
  ASSERT_THAT(Place(*store_, user, "o1", absl::Hours(1)), IsOk());
  ASSERT_THAT(End(*store_, user, "o1", HoldOutcome::kPaid), IsOk());
  ASSERT_TRUE(Eventually([&] { return recorder_.count(7) == 2; }));

  wanted = false;
  absl::SleepFor(absl::Milliseconds(100));
  EXPECT_TRUE(nudges->running()) << "lingers";
  ASSERT_TRUE(Eventually([&] { return !nudges->running(); }));
  ASSERT_TRUE(Eventually([&] {
    auto clients = redis_->Command({"CLIENT", "LIST"});
    return clients.ok() && ShardSubscribers(*clients).empty();
  }));
}

// Redis restarted on the same port: the subscriber connects again, reports every partition
// again, and nudges flow.
TEST_F(EventNudgeSubscriberTest, ResubscribesAfterRedisRestarts) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<EventNudgeSubscriber> subscriber,
                       EventNudgeSubscriber::Start(Options()));
  ASSERT_TRUE(Eventually([&] { return subscriber->subscribed_partitions() == 64; }));
  ASSERT_THAT(redis_->Crash(), IsOk());
  ASSERT_TRUE(Eventually([&] { return subscriber->subscribed_partitions() == 0; }));
  ASSERT_THAT(redis_->Restart(), IsOk());
  const absl::Time restarted = absl::Now();
  ASSERT_TRUE(Eventually([&] { return subscriber->subscribed_partitions() == 64; }));
  std::printf("resubscribed %s after the restart\n",
              absl::FormatDuration(absl::Now() - restarted).c_str());
  EXPECT_TRUE(recorder_.AllAtLeast(2));
  EXPECT_EQ(MetricValue(registry_, "orderhold_event_nudge_subscriptions_total"), 128);
  // Nudges flow again: MeasureLatency waits for each of them (its figures are printed).
  const std::vector<absl::Duration> latency = MeasureLatency(33, 5);
  std::printf("after the restart, SPUBLISH to on_nudge: max %s over %zu\n",
              absl::FormatDuration(latency.back()).c_str(), latency.size());
}

// Idle, the subscriber costs Redis one PING per keepalive_interval on its one connection and
// nothing else (INFO commandstats over one second, with the interval shortened to 200 ms).
TEST_F(EventNudgeSubscriberTest, IdleItSendsOnlyAKeepalivePing) {
  EventNudgeOptions options = Options();
  options.timings.keepalive_interval = absl::Milliseconds(200);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<EventNudgeSubscriber> subscriber,
                       EventNudgeSubscriber::Start(options));
  ASSERT_TRUE(Eventually([&] { return subscriber->subscribed_partitions() == 64; }));
  ASSERT_THAT(redis_->Command({"CONFIG", "RESETSTAT"}), IsOk());
  absl::SleepFor(absl::Seconds(1));
  ASSERT_OK_AND_ASSIGN(std::string stats, redis_->Command({"INFO", "commandstats"}));
  int pings = 0;
  for (absl::string_view line : absl::StrSplit(stats, '\n', absl::SkipEmpty())) {
    if (!absl::StartsWith(line, "cmdstat_")) continue;
    if (absl::ConsumePrefix(&line, "cmdstat_ping:calls=")) {
      ASSERT_TRUE(absl::SimpleAtoi(line.substr(0, line.find(',')), &pings)) << line;
      continue;
    }
    // The fixture's own commands (its AUTH, CONFIG RESETSTAT) only.
    EXPECT_TRUE(absl::StartsWith(line, "cmdstat_auth:") || absl::StartsWith(line, "cmdstat_config"))
        << line;
  }
  EXPECT_GE(pings, 3);
  EXPECT_LE(pings, 6);
}

// Starting with Redis down is not an error: it subscribes once Redis is up.
TEST_F(EventNudgeSubscriberTest, RedisDownAtStartIsNotAnError) {
  ASSERT_THAT(redis_->Stop(), IsOk());
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<EventNudgeSubscriber> subscriber,
                       EventNudgeSubscriber::Start(Options()));
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_EQ(subscriber->subscribed_partitions(), 0);
  ASSERT_THAT(redis_->Restart(), IsOk());
  EXPECT_TRUE(Eventually([&] { return subscriber->subscribed_partitions() == 64; }));
}

TEST_F(EventNudgeSubscriberTest, StartValidatesOptions) {
  EventNudgeOptions options = Options();
  options.on_nudge = nullptr;
  EXPECT_FALSE(EventNudgeSubscriber::Start(options).ok());
  options = Options();
  options.key_prefix = "bad{prefix}";
  EXPECT_FALSE(EventNudgeSubscriber::Start(options).ok());
  options = Options();
  options.timings.keepalive_interval = absl::ZeroDuration();
  EXPECT_FALSE(EventNudgeSubscriber::Start(options).ok());
}

// A user without the channel permission (an ACL from before nudges): ending holds still works
// (SPUBLISH is a redis.pcall), and the subscriber, refused, keeps trying without crashing until
// the permission is granted.
TEST(EventNudgesAclTest, WithoutChannelPermissionHoldsStillEndAndTheSubscriberRetries) {
  ASSERT_OK_AND_ASSIGN(std::string rules, testing::AppAclRulesLine());
  const std::string old_rules = absl::StrReplaceAll(rules, {{" &orderhold:*", ""}});
  ASSERT_NE(old_rules, rules);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<RedisServer> redis, StartRedis(old_rules));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<RedisHoldStore> store, StoreFor(redis->port()));
  const std::string user = UserIn(3);
  ASSERT_THAT(Place(*store, user, "o1", absl::Hours(1)), IsOk());
  ASSERT_OK_AND_ASSIGN(EndHoldResult ended, End(*store, user, "o1", HoldOutcome::kPaid));
  EXPECT_EQ(ended.result, EndHoldResult::Result::kEnded);
  EXPECT_EQ(EventCount(*redis, store->keys(), 3), 1);

  const int64_t errors_before = ErrorReplies(*redis);
  Recorder recorder;
  EventNudgeOptions options = SubscriberOptions(
      std::make_shared<redis::StandaloneTopology>(redis::HostPort{"127.0.0.1", redis->port()}),
      recorder);
  options.timings.refused_retry = absl::Milliseconds(200);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<EventNudgeSubscriber> subscriber,
                       EventNudgeSubscriber::Start(options));
  // Refused again and again (INFO's total_error_replies counts the 64 NOPERMs of each try; 7.0
  // has no per-reason counter, and ACL LOG shows each refusal as a new entry), never subscribed.
  ASSERT_TRUE(Eventually(
      [&] { return ErrorReplies(*redis) >= errors_before + 3 * KeySchema::kPartitionCount; },
      absl::Seconds(5)));
  EXPECT_EQ(subscriber->subscribed_partitions(), 0);
  // Granted: the next retry subscribes.
  ASSERT_THAT(redis->Command({"ACL", "SETUSER", kUser, "&orderhold:*"}), IsOk());
  EXPECT_TRUE(Eventually([&] { return subscriber->subscribed_partitions() == 64; }));
}

// A hold ended in one partition of each primary of `cluster` (`owner`: the primary serving each
// partition's channel): its nudge reaches `recorder`.
void ExpectANudgeFromEachPrimary(RedisCluster& cluster, RedisHoldStore& store, Recorder& recorder,
                                 const std::vector<int>& owner) {
  for (int node = 0; node < cluster.primary_count(); ++node) {
    const int p = static_cast<int>(std::find(owner.begin(), owner.end(), node) - owner.begin());
    ASSERT_LT(p, KeySchema::kPartitionCount);
    const std::string user = UserIn(p);
    ASSERT_THAT(Place(store, user, "o1", absl::Hours(1)), IsOk());
    const int before = recorder.count(p);
    ASSERT_THAT(End(store, user, "o1", HoldOutcome::kCancelled), IsOk());
    EXPECT_TRUE(Eventually([&] { return recorder.count(p) > before; }, absl::Seconds(2)))
        << "partition " << p << " on node " << node;
  }
}

// While partition `moved`'s slot is MIGRATING from primary `from` to `to`, a script whose keys are
// all still on the source runs there and its nudge arrives (SPUBLISH is served by the source until
// the migration ends; a channel in KEYS would have made the script TRYAGAIN: see the prelude).
// The slot is left stable on `from`.
void EndWhileTheSlotMigrates(RedisCluster& cluster, RedisHoldStore& store, Recorder& recorder,
                             int moved, int from, int to) {
  const int slot = redis::HashSlot(store.keys().NudgeChannel(moved));
  const std::string early = UserIn(moved, 1);
  ASSERT_THAT(Place(store, early, "a", absl::Hours(1)), IsOk());
  ASSERT_THAT(Place(store, early, "b", absl::Hours(1)), IsOk());
  // "c" stays: ending a user's last hold while the slot migrates deletes the holds key, and Redis
  // refuses end_hold.lua's next read of it (set_earliest) as a non-local key.
  ASSERT_THAT(Place(store, early, "c", absl::Hours(1)), IsOk());
  ASSERT_THAT(End(store, early, "a", HoldOutcome::kPaid), IsOk());  // creates its outcome keys
  ASSERT_THAT(cluster.SetImporting(slot, to, from), IsOk());
  ASSERT_THAT(cluster.SetMigrating(slot, from, to), IsOk());
  const int before_migrating = recorder.count(moved);
  ASSERT_OK_AND_ASSIGN(EndHoldResult while_migrating,
                       End(store, early, "b", HoldOutcome::kCancelled));
  EXPECT_EQ(while_migrating.result, EndHoldResult::Result::kEnded);
  EXPECT_TRUE(
      Eventually([&] { return recorder.count(moved) > before_migrating; }, absl::Seconds(2)));
  ASSERT_THAT(cluster.SetStable(slot, from), IsOk());
  ASSERT_THAT(cluster.SetStable(slot, to), IsOk());
}

// A Redis Cluster of 3 primaries: one subscriber connection per primary, each holding the
// channels of the slots it serves; nudges from holds ended on every primary arrive; after a
// partition's slot moves to another primary, it is subscribed there and its nudges arrive again.
TEST(EventNudgesClusterTest, OneConnectionPerPrimaryAndFollowsAMovedSlot) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<RedisCluster> cluster,
                       RedisCluster::Start({.replicas_per_primary = 0}));
  redis::ClusterTopologyOptions topology_options;
  for (int i = 0; i < cluster->primary_count(); ++i) {
    topology_options.seeds.push_back(redis::HostPort{"127.0.0.1", cluster->node(i).port()});
  }
  topology_options.node.user = kUser;
  topology_options.node.password = kPassword;
  ASSERT_OK_AND_ASSIGN(std::shared_ptr<redis::ClusterTopology> topology,
                       redis::ClusterTopology::Create(topology_options));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<RedisHoldStore> store,
                       StoreFor(cluster->node(0).port(), topology));
  Recorder recorder;
  EventNudgeOptions options = SubscriberOptions(topology, recorder);
  options.node.client_name = "orderhold-nudges";  // the cluster fixture's ACL has +client|setname
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<EventNudgeSubscriber> subscriber,
                       EventNudgeSubscriber::Start(options));
  ASSERT_TRUE(Eventually([&] { return subscriber->subscribed_partitions() == 64; }));
  EXPECT_TRUE(recorder.AllAtLeast(1));

  const KeySchema& keys = store->keys();
  // Which primary serves each partition's channel.
  std::vector<int> owner(KeySchema::kPartitionCount);
  std::vector<int> per_node(cluster->primary_count(), 0);
  for (int p = 0; p < KeySchema::kPartitionCount; ++p) {
    ASSERT_OK_AND_ASSIGN(owner[p], cluster->PrimaryFor(redis::HashSlot(keys.NudgeChannel(p))));
    ++per_node[owner[p]];
  }
  for (int i = 0; i < cluster->primary_count(); ++i) {
    ASSERT_OK_AND_ASSIGN(std::string clients, cluster->Command(i, {"CLIENT", "LIST"}));
    EXPECT_THAT(ShardSubscribers(clients), ::testing::ElementsAre(per_node[i]))
        << "node " << i << ":\n"
        << clients;
  }
  // A hold ended in one partition of each primary: its nudge arrives.
  ExpectANudgeFromEachPrimary(*cluster, *store, recorder, owner);

  // Move partition 0's slot (with its keys) to another primary.
  const int moved = 0;
  const int slot = redis::HashSlot(keys.NudgeChannel(moved));
  const int from = owner[moved];
  const int to = (from + 1) % cluster->primary_count();
  EndWhileTheSlotMigrates(*cluster, *store, recorder, moved, from, to);

  const int reported = recorder.count(moved);
  ASSERT_THAT(cluster->MigrateSlot(slot, from, to), IsOk());
  const absl::Time migrated = absl::Now();
  ASSERT_TRUE(Eventually(
      [&] {
        absl::StatusOr<std::string> n =
            cluster->Command(to, {"PUBSUB", "SHARDNUMSUB", keys.NudgeChannel(moved)});
        return n.ok() && absl::EndsWith(*n, "\n1") && recorder.count(moved) > reported &&
               subscriber->subscribed_partitions() == 64;
      },
      absl::Seconds(10)));
  std::printf("partition %d subscribed on its new primary %s after the slot moved\n", moved,
              absl::FormatDuration(absl::Now() - migrated).c_str());
  ASSERT_OK_AND_ASSIGN(std::string old_count,
                       cluster->Command(from, {"PUBSUB", "SHARDNUMSUB", keys.NudgeChannel(moved)}));
  EXPECT_TRUE(absl::EndsWith(old_count, "\n0")) << old_count;
  const std::string user = UserIn(moved);
  ASSERT_TRUE(Eventually([&] { return Place(*store, user, "m1", absl::Hours(1)).ok(); }));
  const int before = recorder.count(moved);
  ASSERT_THAT(End(*store, user, "m1", HoldOutcome::kPaid), IsOk());
  EXPECT_TRUE(Eventually([&] { return recorder.count(moved) > before; }, absl::Seconds(2)));
  // Still one connection per primary.
  for (int i = 0; i < cluster->primary_count(); ++i) {
    ASSERT_OK_AND_ASSIGN(std::string clients, cluster->Command(i, {"CLIENT", "LIST"}));
    EXPECT_EQ(ShardSubscribers(clients).size(), 1u) << "node " << i << ":\n" << clients;
  }
}

// Sentinel: one connection to the primary Sentinel names; after a failover, the subscriber follows
// the topology to the new primary, reports every partition again, and nudges published there
// arrive. The data nodes' app user has the rules of deploy/redis/orderhold.acl.
TEST(EventNudgesSentinelTest, FollowsTheFailoverToTheNewPrimary) {
  testing::SentinelGroupOptions group_options;
  ASSERT_OK_AND_ASSIGN(group_options.app_acl_rules, testing::AppAclRulesLine());
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<testing::SentinelGroup> group,
                       testing::SentinelGroup::Start(group_options));
  redis::SentinelOptions sentinel_options;
  for (int i = 0; i < group->sentinel_count(); ++i) {
    sentinel_options.sentinels.push_back({"127.0.0.1", group->sentinel_port(i)});
  }
  sentinel_options.master_name = group->master_name();
  sentinel_options.poll_interval = absl::Milliseconds(200);
  ASSERT_OK_AND_ASSIGN(std::shared_ptr<redis::SentinelTopology> topology,
                       redis::SentinelTopology::Create(sentinel_options));
  Recorder recorder;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<EventNudgeSubscriber> subscriber,
                       EventNudgeSubscriber::Start(SubscriberOptions(topology, recorder)));
  ASSERT_TRUE(Eventually([&] { return subscriber->subscribed_partitions() == 64; }));
  ASSERT_OK_AND_ASSIGN(std::string clients, group->node(0).Command({"CLIENT", "LIST"}));
  EXPECT_THAT(ShardSubscribers(clients), ::testing::ElementsAre(64)) << clients;

  ASSERT_THAT(group->Failover(), IsOk());
  ASSERT_THAT(group->WaitForPrimary(group->node(1).port(), absl::Seconds(10)), IsOk());
  const absl::Time switched = absl::Now();
  ASSERT_TRUE(Eventually(
      [&] {
        absl::StatusOr<std::string> now = group->node(1).Command({"CLIENT", "LIST"});
        return now.ok() && ShardSubscribers(*now) == std::vector<int>{64} &&
               subscriber->subscribed_partitions() == 64 && recorder.AllAtLeast(2);
      },
      absl::Seconds(10)));
  std::printf("subscribed on the new primary %s after Sentinel named it\n",
              absl::FormatDuration(absl::Now() - switched).c_str());
  ASSERT_OK_AND_ASSIGN(clients, group->node(0).Command({"CLIENT", "LIST"}));
  EXPECT_THAT(ShardSubscribers(clients), ::testing::IsEmpty()) << clients;
  const int before = recorder.count(7);
  ASSERT_THAT(group->node(1).Command({"SPUBLISH", KeySchema("orderhold").NudgeChannel(7), ""}),
              IsOk());
  EXPECT_TRUE(Eventually([&] { return recorder.count(7) > before; }, absl::Seconds(2)));
}

// Over TLS (rediss://): the subscriber's connection verifies the server and nudges arrive.
TEST(EventNudgesTlsTest, SubscribesOverTls) {
  ASSERT_OK_AND_ASSIGN(const std::string dir, testing::MakeTempDir("nudges-tls"));
  ASSERT_OK_AND_ASSIGN(const testing::TlsCerts certs, testing::TlsCerts::Create(dir));
  testing::RedisServerOptions server_options;
  server_options.tls = testing::RedisTlsOptions{.cert_file = certs.server_cert(),
                                                .key_file = certs.server_key(),
                                                .ca_cert_file = certs.ca_cert(),
                                                .auth_clients = "no"};
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<RedisServer> redis, RedisServer::Start(server_options));
  redis::RedisTlsOptions tls;
  tls.ca_file = certs.ca_cert();
  Recorder recorder;
  EventNudgeOptions options = SubscriberOptions(
      std::make_shared<redis::StandaloneTopology>(redis::HostPort{"127.0.0.1", redis->tls_port()}),
      recorder);
  options.node.user.clear();
  options.node.password.clear();
  ASSERT_OK_AND_ASSIGN(options.node.tls, redis::TlsContext::Create(tls));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<EventNudgeSubscriber> subscriber,
                       EventNudgeSubscriber::Start(options));
  ASSERT_TRUE(Eventually([&] { return subscriber->subscribed_partitions() == 64; }));
  const int before = recorder.count(40);
  ASSERT_THAT(redis->Command({"SPUBLISH", KeySchema("orderhold").NudgeChannel(40), ""}), IsOk());
  EXPECT_TRUE(Eventually([&] { return recorder.count(40) > before; }, absl::Seconds(2)));
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
}

}  // namespace
}  // namespace orderhold::store
