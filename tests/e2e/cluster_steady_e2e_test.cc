// Redis Cluster in steady state, end to end: an App in --redis_mode=cluster
// whose --redis_url names ONE replica of a real 3 primaries + 3 replicas cluster, as the app user
// of deploy/redis/orderhold.acl plus the cluster rules (RedisCluster's default ACL, i.e. the ACL
// line the README gives for cluster mode). From that one seed it must learn the whole slot map
// (CLUSTER SHARDS on a replica lists every primary) and send every script straight to the
// primary of its slot: thousands of PlaceHold/ListHolds/Pay calls for users in all 64 partitions
// (so on all three primaries) are served with zero MOVED and zero ASK redirects counted, and
// health is SERVING. Oracle: every hold answered created is on its primary until paid, no user is
// ever granted more than one live hold here, and every paid hold is exactly one event in its
// partition's stream and one delivery to a consumer group.
#include <atomic>
#include <cstdio>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "client/orderhold_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/app.h"
#include "tests/testing/eventually.h"
#include "tests/testing/grpc_health.h"
#include "tests/testing/hold_event_watcher.h"
#include "tests/testing/metric_values.h"
#include "tests/testing/parsed_redis_url.h"
#include "tests/testing/redis_cluster.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/stored_holds.h"

namespace orderhold {
namespace {

using ::grpc::health::v1::HealthCheckResponse;
using ::orderhold::testing::Eventually;
using ::orderhold::testing::Health;
using ::orderhold::testing::IsOk;
using ::orderhold::testing::MetricValue;
using ::orderhold::testing::ParsedRedisUrl;
using ::orderhold::testing::RedisCluster;
using ::orderhold::testing::Watcher;

constexpr int kUsersPerPartition = 4;  // 256 users
constexpr int kRounds = 5;             // per user: PlaceHold, ListHolds, Pay, each round
constexpr int kWorkers = 4;            // concurrent callers, each with its own users

TEST(ClusterSteadyE2eTest, OneReplicaAsSeedFindsEveryPrimaryAndServesWithoutRedirects) {
  const absl::Time started = absl::Now();
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<RedisCluster> cluster, RedisCluster::Start());
  ASSERT_EQ(cluster->primary_count(), 3);
  const int seed = cluster->InitialReplica(1);

  Config config;
  config.grpc_address = "127.0.0.1:0";
  config.redis_mode = RedisMode::kCluster;
  config.redis_url = ParsedRedisUrl(cluster->SeedUrl({seed}));  // one replica, nothing else
  config.redis_timeout = absl::Milliseconds(500);
  config.health_check_interval = absl::Milliseconds(50);
  config.reap_interval = absl::Milliseconds(200);
  prometheus::Registry registry;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<App> app, App::Start(config, registry));
  auto client = client::OrderHoldClient::Connect(absl::StrCat("127.0.0.1:", app->grpc_port()),
                                                 client::ClientOptions{absl::Seconds(10), ""});
  ASSERT_TRUE(Eventually([&] { return Health(app->grpc_port()) == HealthCheckResponse::SERVING; }));

  // Users in every partition; the partitions' slots are on all three primaries.
  const store::KeySchema& keys = app->redis_store()->keys();
  std::vector<std::string> users;
  std::map<int, int> per_partition;
  for (int i = 0; static_cast<int>(users.size()) < kUsersPerPartition * 64; ++i) {
    std::string user = absl::StrCat("user-", i);
    if (per_partition[store::KeySchema::PartitionOf(user)]++ < kUsersPerPartition) {
      users.push_back(std::move(user));
    }
  }
  ASSERT_EQ(per_partition.size(), static_cast<size_t>(store::KeySchema::kPartitionCount));
  std::set<int> owners;
  for (int partition = 0; partition < store::KeySchema::kPartitionCount; ++partition) {
    ASSERT_OK_AND_ASSIGN(const int slot, cluster->KeySlot(keys.BucketIndexKey(partition)));
    ASSERT_OK_AND_ASSIGN(const int owner, cluster->PrimaryFor(slot));
    owners.insert(owner);
  }
  ASSERT_EQ(owners, (std::set<int>{0, 1, 2}));

  Watcher billing(
      *client,
      [] {
        v1::WatchHoldEventsRequest request;
        request.set_consumer_group("billing");
        request.set_consumer("b1");
        return request;
      }(),
      /*ack=*/true);

  // Each round, each user: a new hold (created, the only live one), listed, paid. The last
  // round's holds stay unpaid, to be found on their primaries.
  const absl::Time calls_start = absl::Now();
  std::atomic<int> calls{0};
  absl::Mutex mu;
  std::vector<std::string> failures;  // guarded by mu
  std::vector<std::thread> workers;
  for (int w = 0; w < kWorkers; ++w) {
    workers.emplace_back([&, w] {
      auto fail = [&](const std::string& what) {
        absl::MutexLock lock(&mu);
        failures.push_back(what);
      };
      for (int round = 0; round < kRounds; ++round) {
        for (size_t u = w; u < users.size(); u += kWorkers) {
          const std::string& user = users[u];
          const std::string order = absl::StrCat("o", round);
          auto placed = client->PlaceHold(user, order, absl::Minutes(10));
          ++calls;
          if (!placed.ok() || !placed->created()) {
            fail(absl::StrCat(user, "/", order, " placed: ", placed.status().ToString()));
            continue;
          }
          auto listed = client->ListHolds(user);
          ++calls;
          if (!listed.ok() || listed->holds_size() != 1 || listed->holds(0).order_id() != order) {
            fail(absl::StrCat(user, "/", order, " listed: ", listed.status().ToString()));
          }
          if (round == kRounds - 1) continue;
          auto paid = client->Pay(user, order);
          ++calls;
          if (!paid.ok() || paid->already_paid()) {
            fail(absl::StrCat(user, "/", order, " paid: ", paid.status().ToString()));
          }
        }
      }
    });
  }
  for (std::thread& worker : workers) worker.join();
  const absl::Duration calls_took = absl::Now() - calls_start;
  {
    absl::MutexLock lock(&mu);
    EXPECT_THAT(failures, ::testing::IsEmpty());
  }
  EXPECT_EQ(calls.load(), static_cast<int>(users.size()) * (3 * kRounds - 1));  // 3584

  // No redirect: every command went to its slot's primary at once.
  EXPECT_EQ(MetricValue(registry, "orderhold_redis_redirects_total", {{"kind", "moved"}}), 0);
  EXPECT_EQ(MetricValue(registry, "orderhold_redis_redirects_total", {{"kind", "ask"}}), 0);
  EXPECT_GE(MetricValue(registry, "orderhold_redis_topology_refreshes_total"), 1);
  EXPECT_EQ(MetricValue(registry, "orderhold_redis_failovers_total"), 0);
  EXPECT_EQ(Health(app->grpc_port()), HealthCheckResponse::SERVING);

  // The unpaid holds are on the primaries of their slots (so every primary served some).
  std::map<int, int> holds_on;
  for (const std::string& user : users) {
    const std::string key = keys.HoldsBucketKey(user);
    ASSERT_OK_AND_ASSIGN(const int slot, cluster->KeySlot(key));
    ASSERT_OK_AND_ASSIGN(const int owner, cluster->PrimaryFor(slot));
    ASSERT_OK_AND_ASSIGN(
        std::string score,
        cluster->Command(owner, testing::StoredHoldsCommand(keys, user, "score",
                                                            absl::StrCat("o", kRounds - 1))));
    EXPECT_NE(score, "(nil)") << user;
    ++holds_on[owner];
  }
  EXPECT_EQ(holds_on.size(), 3u);

  // Every paid hold: one entry in its partition's stream, one delivery to the group.
  const size_t paid = users.size() * (kRounds - 1);
  int64_t stream_entries = 0;
  for (int partition = 0; partition < store::KeySchema::kPartitionCount; ++partition) {
    const std::string key = keys.EventsKey(partition);
    ASSERT_OK_AND_ASSIGN(const int slot, cluster->KeySlot(key));
    ASSERT_OK_AND_ASSIGN(const int owner, cluster->PrimaryFor(slot));
    ASSERT_OK_AND_ASSIGN(std::string length, cluster->Command(owner, {"XLEN", key}));
    stream_entries += std::stoll(length);
  }
  EXPECT_EQ(stream_entries, static_cast<int64_t>(paid));
  ASSERT_TRUE(billing.WaitFor(paid, absl::Seconds(30))) << billing.status();
  std::set<std::string> holds, ids;
  for (const v1::HoldEvent& event : billing.events()) {
    EXPECT_EQ(event.outcome(), v1::PAID);
    holds.insert(absl::StrCat(event.hold().user_id(), "/", event.hold().order_id()));
    ids.insert(event.event_id());
  }
  EXPECT_EQ(holds.size(), paid);
  EXPECT_EQ(ids.size(), paid);
  // Still none after the event traffic (reads and acks of the streams are routed by key too).
  EXPECT_EQ(MetricValue(registry, "orderhold_redis_redirects_total", {{"kind", "moved"}}), 0);
  EXPECT_EQ(MetricValue(registry, "orderhold_redis_redirects_total", {{"kind", "ask"}}), 0);
  std::printf(
      "[cluster steady] %d calls through one replica seed in %.2f s, 0 redirects; "
      "case %.2f s\n",
      calls.load(), absl::ToDoubleSeconds(calls_took),
      absl::ToDoubleSeconds(absl::Now() - started));
}

}  // namespace
}  // namespace orderhold
