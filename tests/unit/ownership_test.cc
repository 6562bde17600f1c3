// Rendezvous ownership and the replica registry on the fake store: who owns which partition, what
// a join or leave moves, and the hand-over at stop.
#include "server/reaper/ownership.h"

#include <map>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/fake_clock.h"
#include "tests/testing/fake_hold_store.h"
#include "tests/testing/status_matchers.h"

namespace orderhold::reaper {
namespace {

using ::orderhold::testing::IsOk;
using ::orderhold::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

TEST(OwnerOfTest, SpreadsPartitionsAndMovesOnlyTheLeaversShare) {
  const std::vector<std::string> three = {"a-1", "b-2", "c-3"};
  std::map<std::string, int> counts;
  for (int partition = 0; partition < 64; ++partition) ++counts[OwnerOf(partition, three)];
  ASSERT_EQ(counts.size(), 3u);
  for (const auto& [replica, n] : counts) EXPECT_GE(n, 10) << replica;  // none starved
  // When "b-2" leaves, only its partitions move; the others keep theirs.
  const std::vector<std::string> two = {"a-1", "c-3"};
  for (int partition = 0; partition < 64; ++partition) {
    if (OwnerOf(partition, three) != "b-2") {
      EXPECT_EQ(OwnerOf(partition, two), OwnerOf(partition, three));
    }
  }
  EXPECT_EQ(OwnerOf(0, {}), "");
}

class OwnershipTest : public ::testing::Test {
 protected:
  // Reaps `partition` as `owner` (taking its lease): false when another replica's lease held.
  bool ReapAs(int partition, const std::string& owner) {
    auto result = Await<store::ReapResult>([&](auto done) {
      store_.Reap(partition, store::ReapArgs{100, owner, absl::Seconds(30), std::nullopt}, {},
                  std::move(done));
    });
    EXPECT_THAT(result, IsOk());
    return result.ok() && !result->not_owner;
  }

  orderhold::testing::FakeClock clock_;
  orderhold::testing::FakeHoldStore store_{clock_};
};

TEST_F(OwnershipTest, WithoutReplicaIdOwnsEverythingAndHandsNothingOver) {
  Ownership ownership(store_, "", absl::Seconds(3), absl::Seconds(2));
  EXPECT_THAT(ownership.owned(), IsEmpty());
  auto claimed = ownership.Claim(std::nullopt);
  ASSERT_THAT(claimed, IsOk());
  EXPECT_THAT(*claimed, ElementsAre(0, 1, 2, 3));
  EXPECT_EQ(ownership.owned(), *claimed);
  ownership.HandOver();
  EXPECT_THAT(ownership.owned(), ElementsAre(0, 1, 2, 3));  // nothing registered, nothing to hand
}

TEST_F(OwnershipTest, FailedHeartbeatKeepsTheLastView) {
  Ownership ownership(store_, "replica-a", absl::Seconds(3), absl::Seconds(2));
  ASSERT_THAT(ownership.Claim(std::nullopt), IsOk());
  store_.SetFailure(absl::UnavailableError("down"));
  EXPECT_THAT(ownership.Claim(std::nullopt), StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(ownership.owned(), ElementsAre(0, 1, 2, 3));
}

TEST_F(OwnershipTest, ReleasesTheLeasesItLosesAndHandsOverAtStop) {
  Ownership a(store_, "replica-a", absl::Seconds(3), absl::Seconds(2));
  Ownership b(store_, "replica-b", absl::Seconds(3), absl::Seconds(2));
  ASSERT_THAT(a.Claim(std::nullopt), IsOk());  // a alone: owns everything
  for (int partition : a.owned()) ASSERT_TRUE(ReapAs(partition, "replica-a"));
  ASSERT_THAT(b.Claim(std::nullopt), IsOk());  // b sees both
  ASSERT_THAT(a.Claim(std::nullopt), IsOk());  // a sees both: releases b's share
  ASSERT_FALSE(b.owned().empty());
  ASSERT_EQ(a.owned().size() + b.owned().size(), static_cast<size_t>(store_.partition_count()));
  for (int partition : b.owned()) EXPECT_TRUE(ReapAs(partition, "replica-b")) << partition;
  for (int partition : a.owned()) EXPECT_FALSE(ReapAs(partition, "replica-b")) << partition;

  a.HandOver();  // releases its leases and leaves the registry
  EXPECT_THAT(a.owned(), IsEmpty());
  auto alone = b.Claim(std::nullopt);
  ASSERT_THAT(alone, IsOk());
  EXPECT_THAT(*alone, ElementsAre(0, 1, 2, 3));
  for (int partition : *alone) EXPECT_TRUE(ReapAs(partition, "replica-b")) << partition;
}

}  // namespace
}  // namespace orderhold::reaper
