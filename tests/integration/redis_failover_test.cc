// The connection layer through failovers that need no Sentinel: a primary demoted by hand (the
// envoy ratelimit #1191 case), a managed Redis' DNS name moving to the promoted replica,
// NOREPLICAS, ROLE at connect, and WAIT (acknowledged means replicated). Real redis-servers on
// free ports; the "DNS name" is a test topology whose answer the test moves, since a test cannot
// edit the resolver (StandaloneTopology re-resolves its name the same way, on every connect).
#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/common/fan_in.h"
#include "server/store/redis_hold_store.h"
#include "tests/testing/eventually.h"
#include "tests/testing/redis_server.h"
#include "tests/testing/status_matchers.h"

namespace orderhold::store {
namespace {

using ::orderhold::testing::Eventually;
using ::orderhold::testing::IsOk;
using ::orderhold::testing::RedisServer;
using ::orderhold::testing::StatusIs;
using ::testing::AnyOf;
using ::testing::HasSubstr;

// A name whose address the test moves, as a managed Redis moves its DNS name at a failover.
// Like DNS, a move does not announce itself (no generation change): only a reconnect sees it.
class MovableTopology final : public RedisTopology {
 public:
  explicit MovableTopology(HostPort address) : address_(std::move(address)) {}
  absl::StatusOr<HostPort> NodeFor(int) override {
    absl::MutexLock lock(&mu_);
    return address_;
  }
  void ReportNotPrimary(const HostPort&) override { ++not_primary_reports; }
  void Move(HostPort address) {
    absl::MutexLock lock(&mu_);
    address_ = std::move(address);
  }
  std::atomic<int> not_primary_reports{0};

 private:
  absl::Mutex mu_;
  HostPort address_ ABSL_GUARDED_BY(mu_);
};

// Makes `replica` a replica of `primary` and waits until its link is up. The primary syncs at
// once (Redis' default waits 5 s for more replicas before a diskless sync).
void Replicate(RedisServer& replica, RedisServer& primary) {
  ASSERT_TRUE(primary.Command({"CONFIG", "SET", "repl-diskless-sync-delay", "0"}).ok());
  ASSERT_TRUE(replica.Command({"REPLICAOF", "127.0.0.1", absl::StrCat(primary.port())}).ok());
  ASSERT_TRUE(Eventually(
      [&] {
        absl::StatusOr<std::string> info = replica.Command({"INFO", "replication"});
        return info.ok() && absl::StrContains(*info, "master_link_status:up");
      },
      absl::Seconds(10)));
}

class RedisFailoverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK_AND_ASSIGN(a_, RedisServer::Start());
    ASSERT_OK_AND_ASSIGN(b_, RedisServer::Start());
    topology_ = std::make_shared<MovableTopology>(HostPort{"127.0.0.1", a_->port()});
  }

  void CreateStore(int wait_replicas = 0) {
    RedisHoldStoreOptions options;
    options.client.topology = topology_;
    options.client.command_timeout = absl::Seconds(1);
    options.client.connect_timeout = absl::Milliseconds(500);
    options.client.retry_backoff = absl::Milliseconds(50);
    options.client.wait_replicas = wait_replicas;
    options.client.wait_timeout = absl::Milliseconds(200);
    options.client.on_reconnect = [this](ReconnectReason reason) {
      if (reason == ReconnectReason::kNotPrimary) ++not_primary_drops_;
    };
    ASSERT_OK_AND_ASSIGN(store_, RedisHoldStore::Create(std::move(options)));
  }

  absl::StatusOr<PlaceHoldResult> Place(const std::string& user, const std::string& order) {
    return Await<PlaceHoldResult>([&](auto done) {
      store_->PlaceHold(PlaceHoldArgs{user, order, absl::Minutes(10), 3},
                        CallOptions{absl::Now() + absl::Seconds(2), std::nullopt}, std::move(done));
    });
  }

  bool HasHold(RedisServer& node, const std::string& user, const std::string& order) {
    absl::StatusOr<std::string> score =
        node.Command({"ZSCORE", store_->keys().UserKey(user), order});
    return score.ok() && *score != "(nil)";
  }

  std::unique_ptr<RedisServer> a_, b_;
  std::shared_ptr<MovableTopology> topology_;
  std::unique_ptr<RedisHoldStore> store_;
  std::atomic<int> not_primary_drops_{0};
};

// envoy ratelimit #1191: after the primary is demoted, pooled connections answered READONLY
// forever. Here READONLY drops the connection and the topology is asked again; ROLE at connect
// refuses the replica; once the name points to the new primary, calls are served — no restart.
TEST_F(RedisFailoverTest, PrimaryDemotedByHandIsDroppedAndCallsRecoverOnTheNewPrimary) {
  Replicate(*b_, *a_);
  CreateStore();
  ASSERT_THAT(Place("alice", "before"), IsOk());
  // Every pooled connection is up and idle on A (the pool has several: place a few holds).
  for (int i = 0; i < 8; ++i) ASSERT_THAT(Place(absl::StrCat("u", i), "warm"), IsOk());
  ASSERT_TRUE(Eventually([&] { return HasHold(*b_, "alice", "before"); }, absl::Seconds(5)));

  // Failover by hand: B promoted, A demoted to B's replica; the name still says A.
  ASSERT_TRUE(b_->Command({"REPLICAOF", "NO", "ONE"}).ok());
  Replicate(*a_, *b_);
  for (int i = 0; i < 5; ++i) {
    EXPECT_THAT(Place("bob", absl::StrCat("while-demoted-", i)).status(),
                StatusIs(absl::StatusCode::kUnavailable,
                         AnyOf(HasSubstr("READONLY"), HasSubstr("not the primary"))));
  }
  EXPECT_GE(not_primary_drops_.load() + topology_->not_primary_reports.load(), 1);

  topology_->Move(HostPort{"127.0.0.1", b_->port()});  // the DNS name follows the failover
  ASSERT_TRUE(Eventually([&] { return Place("carol", "after").ok(); }, absl::Seconds(5)));
  EXPECT_TRUE(HasHold(*b_, "carol", "after"));
  EXPECT_TRUE(HasHold(*b_, "alice", "before"));  // replicated before the failover
  for (int i = 0; i < 5; ++i) EXPECT_FALSE(HasHold(*b_, "bob", absl::StrCat("while-demoted-", i)));
}

TEST_F(RedisFailoverTest, NoReplicasIsUnavailableAndRecoversWhenReplicasAreBack) {
  CreateStore();
  ASSERT_TRUE(a_->Command({"CONFIG", "SET", "min-replicas-to-write", "1"}).ok());
  EXPECT_THAT(Place("alice", "o1").status(),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("NOREPLICAS")));
  EXPECT_FALSE(HasHold(*a_, "alice", "o1"));  // refused before the script ran
  Replicate(*b_, *a_);
  ASSERT_TRUE(Eventually([&] { return Place("alice", "o1").ok(); }, absl::Seconds(5)));
  EXPECT_TRUE(HasHold(*a_, "alice", "o1"));
}

// WAIT 1: with no replica nothing is acknowledged although the script ran; the caller's retry
// with the same order id, once a replica has caught up, gets the hold back (created=false).
TEST_F(RedisFailoverTest, WaitReplicasAcknowledgesOnlyReplicatedWrites) {
  CreateStore(/*wait_replicas=*/1);
  EXPECT_THAT(Place("alice", "o1").status(),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("not yet replicated")));
  EXPECT_TRUE(HasHold(*a_, "alice", "o1"));  // it ran; only the acknowledgement is withheld
  Replicate(*b_, *a_);
  ASSERT_OK_AND_ASSIGN(PlaceHoldResult retry, Place("alice", "o1"));
  EXPECT_EQ(retry.outcome, PlaceHoldResult::Outcome::kAlreadyHeld);
  ASSERT_OK_AND_ASSIGN(PlaceHoldResult fresh, Place("alice", "o2"));
  EXPECT_EQ(fresh.outcome, PlaceHoldResult::Outcome::kCreated);
  EXPECT_TRUE(HasHold(*b_, "alice", "o2"));  // acknowledged means on the replica
  // Reads do not wait: ListHolds answers even when the replica goes away.
  ASSERT_TRUE(b_->Stop().ok());
  auto list = Await<ListHoldsResult>([&](auto done) {
    store_->ListHolds("alice", CallOptions{absl::Now() + absl::Seconds(2), std::nullopt},
                      std::move(done));
  });
  EXPECT_THAT(list, IsOk());
  EXPECT_THAT(Place("alice", "o3").status(),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("not yet replicated")));
}

}  // namespace
}  // namespace orderhold::store
