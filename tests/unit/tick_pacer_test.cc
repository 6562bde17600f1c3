#include "server/reaper/tick_pacer.h"

#include <optional>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace orderhold::reaper {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::Optional;

const absl::Time kStart = absl::FromUnixSeconds(1795000000);

// Starts every call Next() allows at `now`.
std::vector<int> StartAll(TickPacer& pacer, absl::Time now) {
  std::vector<int> started;
  while (std::optional<int> partition = pacer.Next(now)) started.push_back(*partition);
  return started;
}

TEST(TickPacerTest, FirstCallsAreSpreadEvenlyOverTheWindow) {
  TickPacer pacer({0, 1, 2, 3}, kStart, {absl::Milliseconds(400), 4, 10});
  EXPECT_THAT(StartAll(pacer, kStart), ElementsAre(0));
  EXPECT_EQ(pacer.next_slot(), kStart + absl::Milliseconds(100));
  EXPECT_THAT(StartAll(pacer, kStart + absl::Milliseconds(99)), IsEmpty());
  EXPECT_THAT(StartAll(pacer, kStart + absl::Milliseconds(100)), ElementsAre(1));
  // Late: every slot that has come may start (within the in-flight bound).
  EXPECT_THAT(StartAll(pacer, kStart + absl::Milliseconds(350)), ElementsAre(2, 3));
  EXPECT_EQ(pacer.next_slot(), absl::InfiniteFuture());
  EXPECT_FALSE(pacer.finished());
  for (int partition : {0, 1, 2, 3}) pacer.Done(partition, false);
  EXPECT_TRUE(pacer.finished());
  EXPECT_THAT(pacer.left(), IsEmpty());
}

TEST(TickPacerTest, SkippedFirstCallsAreNeitherStartedNorWaitedFor) {
  TickPacer pacer({0, 1, 2, 3}, kStart, {absl::Milliseconds(400), 4, 10});
  EXPECT_THAT(StartAll(pacer, kStart), ElementsAre(0));
  pacer.Skip(1);
  pacer.Skip(3);
  EXPECT_EQ(pacer.next_slot(), kStart + absl::Milliseconds(200));  // 2 keeps its own slot
  EXPECT_THAT(StartAll(pacer, kStart + absl::Milliseconds(200)), ElementsAre(2));
  EXPECT_EQ(pacer.next_slot(), absl::InfiniteFuture());  // 3's slot is not waited for
  pacer.Done(0, false);
  pacer.Done(2, false);
  EXPECT_TRUE(pacer.finished());
}

TEST(TickPacerTest, NoWindowStartsAllAtOnceButNeverMoreThanMaxInFlight) {
  TickPacer pacer({5, 6, 7, 8, 9}, kStart, {absl::ZeroDuration(), 2, 10});
  EXPECT_THAT(StartAll(pacer, kStart), ElementsAre(5, 6));
  EXPECT_TRUE(pacer.full());
  EXPECT_EQ(pacer.in_flight(), 2);
  EXPECT_THAT(StartAll(pacer, kStart + absl::Hours(1)), IsEmpty());  // time does not help
  pacer.Done(6, false);
  EXPECT_FALSE(pacer.full());
  EXPECT_THAT(StartAll(pacer, kStart), ElementsAre(7));
  pacer.Done(5, false);
  pacer.Done(7, false);
  EXPECT_THAT(StartAll(pacer, kStart), ElementsAre(8, 9));
  pacer.Done(8, false);
  pacer.Done(9, false);
  EXPECT_TRUE(pacer.finished());
}

TEST(TickPacerTest, FullBatchesAreFollowedUpAtOnceAheadOfPacedFirstCalls) {
  TickPacer pacer({0, 1, 2}, kStart, {absl::Seconds(3), 1, 10});
  EXPECT_THAT(pacer.Next(kStart), Optional(0));
  EXPECT_TRUE(pacer.first_call(0));
  pacer.Done(0, /*more=*/true);
  EXPECT_FALSE(pacer.first_call(0));
  // Partition 1's slot is 1 s away, but partition 0's backlog goes on now: a paced stream, not a
  // pause.
  EXPECT_THAT(pacer.Next(kStart), Optional(0));
  pacer.Done(0, true);
  // At partition 1's slot a follow-up of 0 is still ready: it comes first, one call at a time.
  EXPECT_THAT(pacer.Next(kStart + absl::Seconds(1)), Optional(0));
  EXPECT_EQ(pacer.Next(kStart + absl::Seconds(1)), std::nullopt);  // max_in_flight 1
  pacer.Done(0, false);
  EXPECT_THAT(pacer.Next(kStart + absl::Seconds(1)), Optional(1));
  pacer.Done(1, false);
  EXPECT_THAT(pacer.Next(kStart + absl::Seconds(2)), Optional(2));
  pacer.Done(2, false);
  EXPECT_TRUE(pacer.finished());
}

TEST(TickPacerTest, APartitionStopsAtMaxCallsAndIsLeftForTheNextTick) {
  TickPacer pacer({4}, kStart, {absl::ZeroDuration(), 2, 3});
  for (int call = 0; call < 3; ++call) {
    ASSERT_THAT(pacer.Next(kStart), Optional(4));
    EXPECT_EQ(pacer.Next(kStart), std::nullopt);  // one partition is never called twice at once
    pacer.Done(4, /*more=*/true);
  }
  EXPECT_EQ(pacer.Next(kStart), std::nullopt);
  EXPECT_TRUE(pacer.finished());
  EXPECT_THAT(pacer.left(), ElementsAre(4));
}

TEST(TickPacerTest, AbandonStartsNothingMoreButWaitsForCallsInFlight) {
  TickPacer pacer({0, 1, 2}, kStart, {absl::ZeroDuration(), 1, 10});
  EXPECT_THAT(pacer.Next(kStart), Optional(0));
  pacer.Abandon();
  EXPECT_FALSE(pacer.finished());  // 0 is still in flight
  pacer.Done(0, true);
  EXPECT_EQ(pacer.Next(kStart), std::nullopt);
  EXPECT_EQ(pacer.next_slot(), absl::InfiniteFuture());
  EXPECT_TRUE(pacer.finished());
}

TEST(TickPacerTest, NothingToDoIsFinishedAtOnce) {
  TickPacer pacer({}, kStart, {absl::Seconds(1), 2, 10});
  EXPECT_TRUE(pacer.finished());
  EXPECT_EQ(pacer.Next(kStart), std::nullopt);
}

}  // namespace
}  // namespace orderhold::reaper
