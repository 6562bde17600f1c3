// ClusterTopology against a real Redis Cluster (tests/testing/redis_cluster.h: 3 primaries, one
// replica each, the app ACL user): the slot map from a seed list naming one replica, NodeFor
// agreeing with the cluster's own view, a graceful failover followed through Refresh() with the
// generation and failover counter (also when a MOVED to the new primary came first), and a seed
// that is down at start then comes back (found through NodeFor() or through CheckCoverage() alone).
#include "server/redis/cluster_topology.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "prometheus/counter.h"
#include "prometheus/registry.h"
#include "server/redis/cluster_slots.h"
#include "tests/testing/eventually.h"
#include "tests/testing/redis_cluster.h"
#include "tests/testing/status_matchers.h"

namespace orderhold::redis {
namespace {

using ::orderhold::testing::Eventually;
using ::orderhold::testing::IsOk;
using ::orderhold::testing::RedisCluster;
using ::orderhold::testing::StatusIs;
using ::testing::HasSubstr;

redis::HostPort Node(RedisCluster& cluster, int i) {
  return HostPort{"127.0.0.1", cluster.node(i).port()};
}

redis::ClusterTopologyOptions Options(RedisCluster& cluster, std::vector<int> seeds) {
  ClusterTopologyOptions options;
  for (int i : seeds) options.seeds.push_back(Node(cluster, i));
  options.node.user = cluster.options().app_user;
  options.node.password = cluster.options().app_password;
  return options;
}

class ClusterTopologyTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    absl::StatusOr<std::unique_ptr<RedisCluster>> cluster = RedisCluster::Start();
    ASSERT_THAT(cluster, IsOk());
    cluster_ = std::move(*cluster).release();
  }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }

  // Stops a node that does not serve slot 0 (`seed`) and makes `topology` with it as the only
  // seed, no periodic refresh (1 h) and requested ones 20 ms apart: only a refresh the topology
  // asks for itself can bring the map back once the node restarts.
  static void StartWithSeedDown(int& seed, std::unique_ptr<ClusterTopology>& topology) {
    ASSERT_OK_AND_ASSIGN(const int owner, cluster_->PrimaryFor(0));
    seed = owner == 0 ? cluster_->InitialReplica(0) : 0;
    ASSERT_THAT(cluster_->node(seed).Stop(), IsOk());
    ClusterTopologyOptions options = Options(*cluster_, {seed});
    options.min_refresh_interval = absl::Milliseconds(20);
    options.refresh_interval = absl::Hours(1);
    ASSERT_OK_AND_ASSIGN(topology, ClusterTopology::Create(options));
  }

  static RedisCluster* cluster_;
};

RedisCluster* ClusterTopologyTest::cluster_ = nullptr;

TEST_F(ClusterTopologyTest, CreateValidatesOptions) {
  EXPECT_THAT(ClusterTopology::Create({}), StatusIs(absl::StatusCode::kInvalidArgument));
  ClusterTopologyOptions options = Options(*cluster_, {0});
  options.node.password.clear();
  EXPECT_THAT(ClusterTopology::Create(options), StatusIs(absl::StatusCode::kInvalidArgument));
  options = Options(*cluster_, {0});
  options.node.connect_timeout = absl::ZeroDuration();
  EXPECT_THAT(ClusterTopology::Create(options), StatusIs(absl::StatusCode::kInvalidArgument));
}

// Resolves every slot from one replica as the only seed; follows a graceful failover.
TEST_F(ClusterTopologyTest, ResolvesEverySlotAndFollowsFailover) {
  RedisCluster& cluster = *cluster_;
  prometheus::Registry registry;
  auto& family = prometheus::BuildCounter().Name("test_total").Register(registry);
  prometheus::Counter& failovers = family.Add({{"kind", "failovers"}});
  prometheus::Counter& refreshes = family.Add({{"kind", "refreshes"}});
  ClusterTopologyOptions options = Options(cluster, {cluster.InitialReplica(1)});
  options.failovers = &failovers;
  options.refreshes = &refreshes;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<ClusterTopology> topology, ClusterTopology::Create(options));
  EXPECT_GE(refreshes.Value(), 1);
  const std::optional<SlotMap> map = topology->slot_map();
  ASSERT_TRUE(map.has_value());
  EXPECT_TRUE(map->CoversAllSlots());
  EXPECT_EQ(map->Primaries().size(), 3u);
  for (int slot = 0; slot < kClusterSlotCount; ++slot) {
    ASSERT_THAT(topology->NodeFor(slot), IsOk()) << slot;
  }
  const std::string key = "orderhold:{17}:u:alice";
  const std::vector<int> slots = {0, 5460, 5461, 10922, 16383, HashSlot(key)};
  for (int slot : slots) {
    ASSERT_OK_AND_ASSIGN(const int owner, cluster.PrimaryFor(slot));
    EXPECT_EQ(topology->NodeFor(slot).value_or(HostPort{}), Node(cluster, owner)) << slot;
  }
  ASSERT_OK_AND_ASSIGN(const HostPort any, topology->NodeFor(RedisTopology::kAnySlot));
  EXPECT_NE(std::find(map->Primaries().begin(), map->Primaries().end(), any),
            map->Primaries().end());
  EXPECT_THAT(topology->NodeFor(kClusterSlotCount), StatusIs(absl::StatusCode::kInvalidArgument));

  // Graceful failover of the key's primary to its replica.
  const int slot = HashSlot(key);
  ASSERT_OK_AND_ASSIGN(const int owner, cluster.PrimaryFor(slot));
  const int replica = cluster.InitialReplica(owner);
  const uint64_t generation = topology->generation();
  ASSERT_THAT(cluster.Failover(replica), IsOk());
  ASSERT_THAT(cluster.WaitForPrimary(slot, replica, absl::Seconds(10)), IsOk());
  // The node asked may learn the new epoch a little after the replica: poll through Refresh().
  EXPECT_TRUE(Eventually(
      [&] {
        absl::StatusOr<HostPort> node = topology->Refresh(slot, absl::Now() + absl::Seconds(2));
        return node.ok() && *node == Node(cluster, replica);
      },
      absl::Seconds(10), absl::Milliseconds(50)));
  EXPECT_GT(topology->generation(), generation);
  EXPECT_EQ(failovers.Value(), 1);
  // RequestRefresh() alone (no waiting) is also answered.
  const double before = refreshes.Value();
  topology->RequestRefresh();
  EXPECT_TRUE(Eventually([&] { return refreshes.Value() > before; }, absl::Seconds(5)));
}

// A MOVED to the promoted replica patched into the map before the refresh that reads the new map
// (a call redirected first) still counts the failover: it is counted against the map the last
// refresh read. Before, the patch made the replica a primary already and the refresh saw the old
// primary leave with none joining: the failover was never counted.
TEST_F(ClusterTopologyTest, FailoverIsCountedWhenAMovedToTheNewPrimaryCameFirst) {
  RedisCluster& cluster = *cluster_;
  prometheus::Registry registry;
  prometheus::Counter& failovers =
      prometheus::BuildCounter().Name("test_total").Register(registry).Add({});
  ClusterTopologyOptions options = Options(cluster, {0});
  options.failovers = &failovers;
  options.refresh_interval = absl::Hours(1);  // only the refreshes this test causes
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<ClusterTopology> topology, ClusterTopology::Create(options));
  // A shard no other test of this process has failed over: its primary is an initial one.
  int slot = -1;
  int owner = -1;
  for (const int candidate : {16383, 5461, 0}) {
    ASSERT_OK_AND_ASSIGN(owner, cluster.PrimaryFor(candidate));
    slot = candidate;
    if (owner < cluster.primary_count()) break;
  }
  ASSERT_LT(owner, cluster.primary_count());
  const int replica = cluster.InitialReplica(owner);
  ASSERT_THAT(cluster.Failover(replica), IsOk());
  ASSERT_THAT(cluster.WaitForPrimary(slot, replica, absl::Seconds(10)), IsOk());
  topology->ReportMoved(slot, Node(cluster, replica));    // patches one slot, requests a refresh
  const int other = slot == 16383 ? slot - 1 : slot + 1;  // same shard, not patched
  EXPECT_TRUE(Eventually(
      [&] {
        absl::StatusOr<HostPort> node = topology->Refresh(other, absl::Now() + absl::Seconds(2));
        return node.ok() && *node == Node(cluster, replica);
      },
      absl::Seconds(10), absl::Milliseconds(50)));
  EXPECT_EQ(failovers.Value(), 1);
}

// Every seed down at start: UNAVAILABLE (Create still succeeds), then NodeFor() alone resolves
// once the seed is back (an unroutable slot requests a refresh).
TEST_F(ClusterTopologyTest, SeedDownAtStartThenBack) {
  RedisCluster& cluster = *cluster_;
  int seed = 0;
  std::unique_ptr<ClusterTopology> topology;
  ASSERT_NO_FATAL_FAILURE(StartWithSeedDown(seed, topology));
  EXPECT_THAT(topology->NodeFor(0),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("no primary known for slot 0")));
  EXPECT_THAT(topology->Refresh(0, absl::Now() + absl::Seconds(2)),
              StatusIs(absl::StatusCode::kUnavailable));
  ASSERT_THAT(cluster.node(seed).Restart(), IsOk());
  ASSERT_THAT(cluster.WaitForClusterOk(absl::Seconds(10)), IsOk());
  // No periodic refresh in this test: NodeFor() on a slot it cannot route asks for one itself.
  EXPECT_TRUE(Eventually([&] { return topology->NodeFor(0).ok(); }, absl::Seconds(10),
                         absl::Milliseconds(50)));
  ASSERT_OK_AND_ASSIGN(const int now_owner, cluster.PrimaryFor(0));
  EXPECT_EQ(topology->NodeFor(0).value_or(HostPort{}), Node(cluster, now_owner));
}

// The same with health checks only (a server out of traffic while NOT_SERVING): a failing
// CheckCoverage() asks for a refresh itself, so the map comes back without the periodic one.
TEST_F(ClusterTopologyTest, CoverageCheckAloneRefreshesOnceTheSeedIsBack) {
  RedisCluster& cluster = *cluster_;
  int seed = 0;
  std::unique_ptr<ClusterTopology> topology;
  ASSERT_NO_FATAL_FAILURE(StartWithSeedDown(seed, topology));
  EXPECT_THAT(topology->CheckCoverage(), StatusIs(absl::StatusCode::kUnavailable));
  ASSERT_THAT(cluster.node(seed).Restart(), IsOk());
  ASSERT_THAT(cluster.WaitForClusterOk(absl::Seconds(10)), IsOk());
  EXPECT_TRUE(Eventually([&] { return topology->CheckCoverage().ok(); }, absl::Seconds(10),
                         absl::Milliseconds(50)));
}

}  // namespace
}  // namespace orderhold::redis
