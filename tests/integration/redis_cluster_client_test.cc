// RedisClusterClient against a real Redis Cluster (tests/testing/redis_cluster.h, 3 primaries, no
// replicas, the app ACL user with the cluster rules): routing by hash slot with zero redirects in
// steady state, a MOVED after a slot moved behind the client's back, the ASK path (ASKING on the
// same connection) and TRYAGAIN while a slot is MIGRATING/IMPORTING by hand,
// the redirect limit, and health's routing check. Slot moves are undone by each test.
#include "server/redis/redis_cluster_client.h"

#include <cstdio>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "prometheus/counter.h"
#include "prometheus/registry.h"
#include "server/redis/cluster_slots.h"
#include "tests/testing/redis_cluster.h"
#include "tests/testing/status_matchers.h"

namespace orderhold::redis {
namespace {

using ::orderhold::testing::IsOk;
using ::orderhold::testing::RedisCluster;
using ::orderhold::testing::RedisClusterOptions;
using ::orderhold::testing::StatusIs;
using ::testing::HasSubstr;

// Script 0: SET KEYS[1] ARGV[1]; script 1: both keys' values joined by "|" (a multi-key read,
// which a half-migrated slot answers with TRYAGAIN).
const char kSetScript[] =
    "-- KEYS[1] key; ARGV[1] value; returns OK\n"
    "return redis.call('SET', KEYS[1], ARGV[1])";
const char kPairScript[] =
    "-- KEYS[1], KEYS[2] keys of one slot; returns their values joined by '|'\n"
    "return (redis.call('GET', KEYS[1]) or '') .. '|' .. (redis.call('GET', KEYS[2]) or '')";

absl::StatusOr<RedisReply> Call(RedisCaller& client, RedisCommand command,
                                absl::Duration timeout = absl::Seconds(5)) {
  std::promise<absl::StatusOr<RedisReply>> promise;
  client.Submit(
      std::move(command), absl::Now() + timeout,
      [&promise](absl::StatusOr<RedisReply> reply) { promise.set_value(std::move(reply)); });
  return promise.get_future().get();
}

redis::RedisCommand Get(std::string key) {
  return RedisCommand{RedisCommand::kNoScript, {"GET", std::move(key)}};
}
redis::RedisCommand Set(std::string key, std::string value) {
  RedisCommand command{0, {"1", std::move(key), std::move(value)}};
  command.writes = true;
  return command;
}

class RedisClusterClientTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    RedisClusterOptions options;
    options.replicas_per_primary = 0;
    absl::StatusOr<std::unique_ptr<RedisCluster>> cluster = RedisCluster::Start(options);
    ASSERT_THAT(cluster, IsOk());
    cluster_ = std::move(*cluster).release();
  }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }

  // A client on the cluster whose map is refreshed only when something asks (MOVED, failure).
  void SetUp() override {
    ClusterTopologyOptions topology;
    topology.seeds = {HostPort{"127.0.0.1", cluster_->node(0).port()}};
    topology.node.user = cluster_->options().app_user;
    topology.node.password = cluster_->options().app_password;
    topology.refresh_interval = absl::Hours(1);
    topology.refreshes = &refreshes_;
    ASSERT_OK_AND_ASSIGN(topology_, ClusterTopology::Create(std::move(topology)));
    client_ = MakeClient(/*max_redirects=*/5);
  }

  std::unique_ptr<RedisClusterClient> MakeClient(int max_redirects,
                                                 absl::Duration retry_window = absl::Seconds(3)) {
    RedisClusterClientOptions options;
    options.pool.node.user = cluster_->options().app_user;
    options.pool.node.password = cluster_->options().app_password;
    options.pool.connections = 2;
    options.pool.scripts = {kSetScript, kPairScript};
    options.topology = topology_;
    options.max_redirects = max_redirects;
    options.retry_window = retry_window;
    options.moved = &moved_;
    options.ask = &ask_;
    absl::StatusOr<std::unique_ptr<RedisClusterClient>> client =
        RedisClusterClient::Create(std::move(options));
    EXPECT_THAT(client, IsOk());
    return client.ok() ? *std::move(client) : nullptr;
  }

  // A key with hash tag `tag` and its slot, checked against CLUSTER KEYSLOT.
  static int SlotOf(const std::string& key) {
    absl::StatusOr<int> slot = cluster_->KeySlot(key);
    EXPECT_THAT(slot, IsOk());
    EXPECT_EQ(HashSlot(key), slot.value_or(-1)) << key;
    return slot.value_or(-1);
  }

  // Opens a hand-made migration of `slot` from `source` to `destination` (SETSLOT IMPORTING on
  // the destination, then MIGRATING on the source) and MIGRATEs `keys` across.
  static void StartMigration(int slot, int source, int destination,
                             const std::vector<std::string>& keys) {
    ASSERT_THAT(cluster_->SetImporting(slot, destination, source), IsOk());
    ASSERT_THAT(cluster_->SetMigrating(slot, source, destination), IsOk());
    for (const std::string& key : keys) MigrateKey(key, source, destination);
  }
  static void MigrateKey(const std::string& key, int source, int destination) {
    ASSERT_THAT(
        cluster_->Command(
            source, {"MIGRATE", "127.0.0.1", absl::StrCat(cluster_->node(destination).port()), key,
                     "0", "5000", "AUTH", cluster_->options().admin_password}),
        IsOk());
  }

  static RedisCluster* cluster_;
  prometheus::Registry registry_;
  prometheus::Family<prometheus::Counter>& counters_ =
      prometheus::BuildCounter().Name("test_total").Register(registry_);
  prometheus::Counter& moved_ = counters_.Add({{"kind", "moved"}});
  prometheus::Counter& ask_ = counters_.Add({{"kind", "ask"}});
  prometheus::Counter& refreshes_ = counters_.Add({{"kind", "refreshes"}});
  std::shared_ptr<ClusterTopology> topology_;
  std::unique_ptr<RedisClusterClient> client_;
};

RedisCluster* RedisClusterClientTest::cluster_ = nullptr;

TEST(CommandSlotTest, ScriptsGoByTheirFirstKeyOtherCommandsByTheirFirstArgument) {
  EXPECT_EQ(CommandSlot(RedisCommand{0, {"2", "{user1}a", "{user2}b", "arg"}}), HashSlot("user1"));
  EXPECT_EQ(CommandSlot(RedisCommand{0, {"0", "arg"}}), RedisTopology::kAnySlot);
  EXPECT_EQ(
      CommandSlot(RedisCommand{RedisCommand::kNoScript, {"XACK", "p:{7}:events", "group", "1-0"}}),
      HashSlot("7"));
  EXPECT_EQ(CommandSlot(RedisCommand{RedisCommand::kNoScript, {"TIME"}}), RedisTopology::kAnySlot);
}

TEST_F(RedisClusterClientTest, CreateRefusesADatabaseOtherThanZeroAndNoTopology) {
  RedisClusterClientOptions options;
  options.topology = topology_;
  options.pool.db = 2;
  EXPECT_THAT(RedisClusterClient::Create(options),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("only database 0")));
  options.pool.db = 0;
  options.topology = nullptr;
  EXPECT_THAT(RedisClusterClient::Create(options), StatusIs(absl::StatusCode::kInvalidArgument));
}

// Keys of 64 tags land on all three primaries, each written and read back in one hop.
TEST_F(RedisClusterClientTest, RoutesEveryTagToItsPrimaryWithoutRedirects) {
  std::vector<int> per_primary(3, 0);
  for (int tag = 0; tag < 64; ++tag) {
    const std::string key = absl::StrCat("orderhold:{", tag, "}:k");
    ASSERT_OK_AND_ASSIGN(int owner, cluster_->PrimaryFor(SlotOf(key)));
    ++per_primary.at(owner);
    ASSERT_THAT(Call(*client_, Set(key, absl::StrCat("v", tag))), IsOk()) << key;
    ASSERT_OK_AND_ASSIGN(RedisReply reply, Call(*client_, Get(key)));
    EXPECT_EQ(reply.str, absl::StrCat("v", tag));
  }
  EXPECT_THAT(per_primary, ::testing::Each(::testing::Gt(0)));
  ASSERT_OK_AND_ASSIGN(RedisReply time,
                       Call(*client_, RedisCommand{RedisCommand::kNoScript, {"TIME"}}));
  EXPECT_EQ(time.elements.size(), 2u);
  EXPECT_EQ(moved_.Value(), 0);
  EXPECT_EQ(ask_.Value(), 0);
  EXPECT_THAT(client_->CheckRouting(), IsOk());
}

// A slot moved behind the client's back: MOVED, map updated, resent, one redirect counted; the
// next command goes straight to the new owner. With max_redirects 0 the MOVED is the answer.
TEST_F(RedisClusterClientTest, FollowsMovedAndRemembersTheNewOwner) {
  const std::string key = "orderhold:{moved}:k";
  const int slot = SlotOf(key);
  ASSERT_OK_AND_ASSIGN(const int from, cluster_->PrimaryFor(slot));
  const int to = (from + 1) % 3;
  ASSERT_THAT(Call(*client_, Set(key, "before")), IsOk());
  std::unique_ptr<RedisClusterClient> strict = MakeClient(/*max_redirects=*/0);
  ASSERT_THAT(cluster_->MigrateSlot(slot, from, to), IsOk());

  EXPECT_THAT(Call(*strict, Get(key)),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("more than 0 redirects")));
  ASSERT_OK_AND_ASSIGN(RedisReply reply, Call(*client_, Get(key)));
  EXPECT_EQ(reply.str, "before");
  const double moved = moved_.Value();
  EXPECT_GE(moved, 1);
  ASSERT_OK_AND_ASSIGN(const HostPort owner, topology_->NodeFor(slot));
  EXPECT_EQ(owner.port, cluster_->node(to).port());
  ASSERT_THAT(Call(*client_, Set(key, "after")), IsOk());
  EXPECT_EQ(moved_.Value(), moved);
  EXPECT_EQ(ask_.Value(), 0);
  ASSERT_THAT(cluster_->MigrateSlot(slot, to, from), IsOk());
}

// A slot half-way through a hand-made migration (cluster-spec.md "ASK redirection"): a key
// already on the destination is served there after ASKING (counted as ask, map unchanged); a
// key still on the source is served by it; a script over one key of each gets TRYAGAIN, retried
// until the migration completes, then MOVED to the new owner.
TEST_F(RedisClusterClientTest, AskWithAskingAndTryAgainWhileASlotMigrates) {
  const std::string moved_key = "orderhold:{ask}:a";
  const std::string staying_key = "orderhold:{ask}:b";
  const int slot = SlotOf(moved_key);
  ASSERT_OK_AND_ASSIGN(const int source, cluster_->PrimaryFor(slot));
  const int destination = (source + 1) % 3;
  ASSERT_THAT(Call(*client_, Set(moved_key, "A")), IsOk());
  ASSERT_THAT(Call(*client_, Set(staying_key, "B")), IsOk());

  ASSERT_NO_FATAL_FAILURE(StartMigration(slot, source, destination, {moved_key}));

  ASSERT_OK_AND_ASSIGN(RedisReply reply, Call(*client_, Get(moved_key)));
  EXPECT_EQ(reply.str, "A");
  EXPECT_EQ(ask_.Value(), 1);
  EXPECT_EQ(moved_.Value(), 0);
  ASSERT_OK_AND_ASSIGN(const HostPort owner, topology_->NodeFor(slot));
  EXPECT_EQ(owner.port, cluster_->node(source).port());  // ASK leaves the map alone
  ASSERT_OK_AND_ASSIGN(reply, Call(*client_, Get(staying_key)));
  EXPECT_EQ(reply.str, "B");

  // TRYAGAIN until the operator finishes the migration ~300 ms later.
  RedisCommand pair{1, {"2", moved_key, staying_key}};
  std::future<absl::StatusOr<RedisReply>> pending = std::async(
      std::launch::async, [&] { return Call(*client_, std::move(pair), absl::Seconds(5)); });
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_EQ(pending.wait_for(std::chrono::seconds(0)), std::future_status::timeout)
      << "answered before the migration finished";
  ASSERT_NO_FATAL_FAILURE(MigrateKey(staying_key, source, destination));
  for (int node = 0; node < 3; ++node) {
    ASSERT_THAT(cluster_->Command(node, {"CLUSTER", "SETSLOT", absl::StrCat(slot), "NODE",
                                         cluster_->NodeId(destination)}),
                IsOk());
  }
  ASSERT_OK_AND_ASSIGN(reply, pending.get());
  EXPECT_EQ(reply.str, "A|B");
  // A retry after the last key moved found it on the destination: by MOVED once the source knows
  // the new owner, or by ASK when the retry fell between the MIGRATE and the source's SETSLOT NODE
  // (the source then still migrates the slot and no longer has either key: seen once in CI).
  EXPECT_GE(moved_.Value() + ask_.Value(), 2)
      << "moved " << moved_.Value() << ", ask " << ask_.Value();
  ASSERT_THAT(cluster_->WaitForPrimary(slot, destination, absl::Seconds(10)), IsOk());
  ASSERT_THAT(cluster_->MigrateSlot(slot, destination, source), IsOk());
}

// TRYAGAIN that outlasts the retry window ends UNAVAILABLE with Redis' message, in time.
TEST_F(RedisClusterClientTest, TryAgainPastTheRetryWindowIsUnavailable) {
  const std::string a = "orderhold:{stuck}:a";
  const std::string b = "orderhold:{stuck}:b";
  const int slot = SlotOf(a);
  ASSERT_OK_AND_ASSIGN(const int source, cluster_->PrimaryFor(slot));
  const int destination = (source + 2) % 3;
  ASSERT_THAT(Call(*client_, Set(a, "1")), IsOk());
  ASSERT_NO_FATAL_FAILURE(StartMigration(slot, source, destination, {}));
  // b does not exist on the source: the pair is half there.
  std::unique_ptr<RedisClusterClient> brief = MakeClient(5, absl::Milliseconds(500));
  const absl::Time start = absl::Now();
  EXPECT_THAT(Call(*brief, RedisCommand{1, {"2", a, b}}, absl::Seconds(10)),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("TRYAGAIN")));
  EXPECT_LT(absl::Now() - start, absl::Seconds(8));  // the 0.5 s window, not the 10 s deadline
  ASSERT_THAT(cluster_->SetStable(slot, source), IsOk());
  ASSERT_THAT(cluster_->SetStable(slot, destination), IsOk());
  EXPECT_THAT(Call(*client_, RedisCommand{1, {"2", a, b}}), IsOk());
}

// No map at all (the only seed is a closed port): health's routing check says so, and a command
// is retried within its window, then UNAVAILABLE naming the slot.
TEST_F(RedisClusterClientTest, NoMapIsUnavailableForHealthAndCommands) {
  ClusterTopologyOptions options;
  options.seeds = {HostPort{"127.0.0.1", 1}};
  options.node.connect_timeout = absl::Milliseconds(100);
  ASSERT_OK_AND_ASSIGN(std::shared_ptr<ClusterTopology> nowhere,
                       ClusterTopology::Create(std::move(options)));
  RedisClusterClientOptions client_options;
  client_options.topology = nowhere;
  client_options.retry_window = absl::Milliseconds(300);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<RedisClusterClient> client,
                       RedisClusterClient::Create(std::move(client_options)));
  EXPECT_THAT(client->CheckRouting(), StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(Call(*client, Get("orderhold:{x}:k")),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("no primary known for slot")));
  EXPECT_THAT(client_->CheckRouting(), IsOk());
}

// A primary that hangs and is replaced: its node pool is closed with commands still queued behind
// the one in flight. Those never left, so they go to the promoted replica instead of failing
// UNAVAILABLE ("redis client shutting down"); only the one in flight may fail (it may have run).
TEST(RedisClusterClientFailoverTest, QueuedCommandsOfAClosedPoolGoToTheNewPrimary) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<RedisCluster> cluster,
                       RedisCluster::Start({.replicas_per_primary = 1}));
  ClusterTopologyOptions topology_options;
  topology_options.seeds = {HostPort{"127.0.0.1", cluster->node(0).port()}};
  topology_options.node.user = cluster->options().app_user;
  topology_options.node.password = cluster->options().app_password;
  topology_options.refresh_interval = absl::Hours(1);  // refreshed when asked (below)
  ASSERT_OK_AND_ASSIGN(std::shared_ptr<ClusterTopology> topology,
                       ClusterTopology::Create(std::move(topology_options)));
  RedisClusterClientOptions options;
  options.pool.node.user = cluster->options().app_user;
  options.pool.node.password = cluster->options().app_password;
  options.pool.connections = 1;  // one command in flight, the rest queued
  options.pool.max_pipeline = 1;
  options.pool.command_timeout = absl::Seconds(4);  // the hung primary is replaced before
  options.pool.scripts = {kSetScript, kPairScript};
  options.topology = topology;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<RedisClusterClient> client,
                       RedisClusterClient::Create(std::move(options)));

  const std::string key = "orderhold:{closing}:k";
  ASSERT_OK_AND_ASSIGN(const int slot, cluster->KeySlot(key));
  ASSERT_OK_AND_ASSIGN(const int owner, cluster->PrimaryFor(slot));
  const int replica = cluster->InitialReplica(owner);
  ASSERT_THAT(Call(*client, Set(key, "first")), IsOk());  // the owner's pool is up

  ASSERT_THAT(cluster->node(owner).Pause(), IsOk());
  constexpr int kCommands = 20;
  std::vector<std::future<absl::StatusOr<RedisReply>>> replies;
  for (int i = 0; i < kCommands; ++i) {
    auto promise = std::make_shared<std::promise<absl::StatusOr<RedisReply>>>();
    replies.push_back(promise->get_future());
    client->Submit(
        Set(key, absl::StrCat("v", i)), absl::Now() + absl::Seconds(20),
        [promise](absl::StatusOr<RedisReply> reply) { promise->set_value(std::move(reply)); });
  }
  ASSERT_THAT(cluster->Failover(replica, "TAKEOVER"), IsOk());
  ASSERT_THAT(cluster->WaitForPrimary(slot, replica, absl::Seconds(10)), IsOk());
  topology->RequestRefresh();  // the map no longer names the hung node: its pool is closed

  int ok = 0;
  for (auto& reply : replies) {
    absl::StatusOr<RedisReply> result = reply.get();
    if (result.ok())
      ++ok;
    else
      std::printf("[closed pool] %s\n", result.status().ToString().c_str());
  }
  EXPECT_GE(ok, kCommands - 1) << "only the command in flight may fail";
  ASSERT_THAT(cluster->node(owner).Resume(), IsOk());
}

}  // namespace
}  // namespace orderhold::redis
