// EventDispatcher on a recording event log and a fake clock: who reads which partition when
// (first read, nudges, shared reads, parking and waking, reads again), the safety sweep and its
// jittered schedule, leaving. No threads, no sleeps: Sweep/SweepIfDue are called directly.
#include "server/domain/event_dispatcher.h"

#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/fake_clock.h"
#include "tests/testing/recording_event_log.h"

namespace orderhold::domain {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;
using Member = EventDispatcher::Member;

constexpr int kPartitions = 4;

class EventDispatcherTest : public ::testing::Test {
 protected:
  // A member whose wakes are counted.
  struct Watch {
    std::shared_ptr<Member> member;
    std::shared_ptr<int> wakes = std::make_shared<int>(0);
    std::shared_ptr<bool> ending = std::make_shared<bool>(false);  // declines wakes
  };
  Watch Join(const std::string& group) {
    Watch watch;
    watch.member = dispatcher_.Join(group, [wakes = watch.wakes, ending = watch.ending] {
      ++*wakes;
      return !*ending;
    });
    return watch;
  }
  // Joins and takes the first read, so the member is parked.
  Watch JoinParked(const std::string& group) {
    Watch watch = Join(group);
    EXPECT_EQ(dispatcher_.TakeWork(watch.member).partitions.size(), size_t{kPartitions});
    EXPECT_TRUE(dispatcher_.TakeWork(watch.member).empty());
    return watch;
  }

  orderhold::testing::RecordingEventLog log_{kPartitions};
  orderhold::testing::FakeClock clock_;
  EventPolicy policy_;
  EventDispatcher dispatcher_{log_, policy_, clock_};
};

TEST_F(EventDispatcherTest, FirstReadCoversEveryPartitionAndOwnPendingThenTheMemberParks) {
  Watch a = Join("billing");
  ReadPlan first = dispatcher_.TakeWork(a.member);
  EXPECT_THAT(first.partitions, ElementsAre(0, 1, 2, 3));
  EXPECT_THAT(first.own,
              ElementsAre(std::pair(0, ""), std::pair(1, ""), std::pair(2, ""), std::pair(3, "")));
  EXPECT_THAT(first.claims, IsEmpty());
  EXPECT_TRUE(dispatcher_.TakeWork(a.member).empty());  // parked: no Redis call while idle
  EXPECT_TRUE(dispatcher_.TakeWork(a.member).empty());  // asking again does not park it twice
  dispatcher_.OnNudge(2);
  EXPECT_EQ(*a.wakes, 1);
  ReadPlan next = dispatcher_.TakeWork(a.member);
  EXPECT_THAT(next.partitions, ElementsAre(2));
  EXPECT_THAT(next.own, IsEmpty());
}

// A resume that filled its budget goes on where it stopped, at the member's next TakeWork only
// (its own pending events are no other member's work).
TEST_F(EventDispatcherTest, AnUnfinishedResumeGoesOnAtTheMembersNextTakeWork) {
  Watch a = Join("billing");
  Watch b = JoinParked("billing");
  ReadPlan first = dispatcher_.TakeWork(a.member);
  ReadResult result;
  result.own_next = {{1, "9-0"}};
  dispatcher_.ReadDone(a.member, first, result);
  EXPECT_EQ(*b.wakes, 0);
  ReadPlan next = dispatcher_.TakeWork(a.member);
  EXPECT_THAT(next.partitions, ElementsAre(1));
  EXPECT_THAT(next.own, ElementsAre(std::pair(1, "9-0")));
  EXPECT_THAT(next.claims, IsEmpty());
  dispatcher_.ReadDone(a.member, next, ReadResult{});
  EXPECT_TRUE(dispatcher_.TakeWork(a.member).empty());
}

// Claiming goes on through the whole pending list: a scan that stopped raises the claim flag again
// with its cursor, for whichever member of the group reads next; a scan that reached the end
// forgets it, so the next sweep's claims start at the beginning. Other groups keep their own.
TEST_F(EventDispatcherTest, AClaimScanGoesOnFromItsCursorUntilTheEndOfThePendingList) {
  Watch a1 = Join("billing");
  Watch a2 = Join("billing");
  Watch b = Join("audit");
  for (Watch* w : {&a1, &a2, &b}) {
    ReadPlan first = dispatcher_.TakeWork(w->member);
    dispatcher_.ReadDone(w->member, first, ReadResult{});
    ASSERT_TRUE(dispatcher_.TakeWork(w->member).empty());  // parked
  }
  log_.SetWork(2, {{"billing", false, true}, {"audit", false, true}});
  dispatcher_.Sweep();
  ReadPlan claim = dispatcher_.TakeWork(a1.member);
  EXPECT_THAT(claim.claims, ElementsAre(2));
  EXPECT_THAT(claim.claim_after, IsEmpty());  // from the start of the list
  ReadResult stopped;
  stopped.claim_next = {{2, "15-3"}};
  dispatcher_.ReadDone(a1.member, claim, stopped);
  // a2 (parked) is woken and goes on from the cursor.
  EXPECT_EQ(*a2.wakes, 1);
  ReadPlan more = dispatcher_.TakeWork(a2.member);
  EXPECT_THAT(more.claims, ElementsAre(2));
  EXPECT_THAT(more.claim_after, ElementsAre(std::pair(2, "15-3")));
  dispatcher_.ReadDone(a2.member, more, ReadResult{});  // reached the end
  EXPECT_TRUE(dispatcher_.TakeWork(a2.member).empty());
  EXPECT_TRUE(dispatcher_.TakeWork(a1.member).empty());
  // audit's claim is untouched by billing's, from the start.
  ReadPlan audit = dispatcher_.TakeWork(b.member);
  EXPECT_THAT(audit.claims, ElementsAre(2));
  EXPECT_THAT(audit.claim_after, IsEmpty());
  // The next sweep's billing claim starts over.
  dispatcher_.Sweep();
  ReadPlan again = dispatcher_.TakeWork(a1.member);
  EXPECT_THAT(again.claims, ElementsAre(2));
  EXPECT_THAT(again.claim_after, IsEmpty());
}

// watched(): whether any watch is open here (the event nudges are subscribed only then).
TEST_F(EventDispatcherTest, WatchedWhileAnyMemberOfAnyGroupIsJoined) {
  EXPECT_FALSE(dispatcher_.watched());
  Watch a = Join("billing");
  Watch b = Join("inventory");
  EXPECT_TRUE(dispatcher_.watched());
  dispatcher_.Leave(a.member);
  EXPECT_TRUE(dispatcher_.watched());
  dispatcher_.Leave(b.member);
  EXPECT_FALSE(dispatcher_.watched());
}

TEST_F(EventDispatcherTest, ANudgeWakesOneParkedMemberPerGroupAndTheReadIsShared) {
  Watch a1 = JoinParked("billing");
  Watch a2 = JoinParked("billing");
  Watch b = JoinParked("audit");
  dispatcher_.OnNudge(1);
  EXPECT_EQ(*a1.wakes, 1);  // the longest parked of the group
  EXPECT_EQ(*a2.wakes, 0);
  EXPECT_EQ(*b.wakes, 1);  // every group reads the partition: each sees every event
  EXPECT_THAT(dispatcher_.TakeWork(a1.member).partitions, ElementsAre(1));
  EXPECT_TRUE(dispatcher_.TakeWork(a2.member).empty());  // already taken by a1: one read each
  EXPECT_THAT(dispatcher_.TakeWork(b.member).partitions, ElementsAre(1));
  // Out-of-range partitions are ignored.
  dispatcher_.OnNudge(kPartitions);
  dispatcher_.OnNudge(-1);
  EXPECT_EQ(*a2.wakes, 0);
}

TEST_F(EventDispatcherTest, AWakeDeclinedByAnEndingWatchGoesToTheNextParkedMember) {
  Watch a1 = JoinParked("billing");
  Watch a2 = JoinParked("billing");
  Watch a3 = JoinParked("billing");
  *a1.ending = true;  // finished, OnDone (Leave) not yet run
  dispatcher_.OnNudge(1);
  EXPECT_EQ(*a1.wakes, 1);
  EXPECT_EQ(*a2.wakes, 1);  // the flag did not wait for the next nudge
  EXPECT_EQ(*a3.wakes, 0);
  EXPECT_THAT(dispatcher_.TakeWork(a2.member).partitions, ElementsAre(1));
}

TEST_F(EventDispatcherTest, NudgesWhileEveryMemberIsBusyWaitForTheNextTakeWork) {
  Watch a = Join("billing");
  ASSERT_FALSE(dispatcher_.TakeWork(a.member).empty());  // reading: not parked
  dispatcher_.OnNudge(3);
  dispatcher_.OnNudge(0);
  dispatcher_.OnNudge(3);
  EXPECT_EQ(*a.wakes, 0);
  EXPECT_THAT(dispatcher_.TakeWork(a.member).partitions, ElementsAre(0, 3));
}

TEST_F(EventDispatcherTest, AFullReadIsReadAgainByAnotherParkedMember) {
  Watch a1 = Join("billing");
  Watch a2 = JoinParked("billing");
  ASSERT_FALSE(dispatcher_.TakeWork(a1.member).empty());
  ReadResult full;
  full.again = {2, 3};
  dispatcher_.ReadDone(a1.member, ReadPlan{}, full);
  EXPECT_EQ(*a2.wakes, 1);
  EXPECT_THAT(dispatcher_.TakeWork(a2.member).partitions, ElementsAre(2, 3));
}

TEST_F(EventDispatcherTest, SweepChecksEveryPartitionOnceForAllGroupsAndRaisesWhatItFinds) {
  dispatcher_.Sweep();
  EXPECT_THAT(log_.TakeChecks(), IsEmpty());  // no member: nothing to ask Redis

  Watch a = JoinParked("billing");
  Watch b = JoinParked("audit");
  log_.SetWork(1, {store::GroupWork{"billing", true, false}});
  log_.SetWork(2,
               {store::GroupWork{"billing", false, true}, store::GroupWork{"audit", true, true}});
  log_.SetCheckError(3, absl::UnavailableError("redis down"));
  bool done = false;
  dispatcher_.Sweep([&] { done = true; });
  EXPECT_TRUE(done);
  std::vector<orderhold::testing::RecordingEventLog::Check> checks = log_.TakeChecks();
  ASSERT_EQ(checks.size(), size_t{kPartitions});  // one call per partition, whatever the groups
  for (const auto& check : checks) {
    EXPECT_THAT(check.groups, UnorderedElementsAre("billing", "audit"));
    EXPECT_EQ(check.claim_idle, policy_.ack_timeout);
  }
  EXPECT_EQ(*a.wakes, 1);
  EXPECT_EQ(*b.wakes, 1);
  ReadPlan billing = dispatcher_.TakeWork(a.member);
  // 3 failed: every group reads it, and meets the error as a polling watch would.
  EXPECT_THAT(billing.partitions, ElementsAre(1, 2, 3));
  EXPECT_THAT(billing.claims, ElementsAre(2));
  ReadPlan audit = dispatcher_.TakeWork(b.member);
  EXPECT_THAT(audit.partitions, ElementsAre(2, 3));
  EXPECT_THAT(audit.claims, ElementsAre(2));
}

TEST_F(EventDispatcherTest, SweepsComeEveryHalfToOneClaimIntervalOnTheInjectedClock) {
  Watch a = JoinParked("billing");
  const absl::Time start = clock_.Now();
  absl::Time due = dispatcher_.next_sweep();
  EXPECT_GE(due, start + policy_.claim_interval / 2);
  EXPECT_LT(due, start + policy_.claim_interval);
  clock_.Advance(due - start - absl::Milliseconds(1));
  EXPECT_FALSE(dispatcher_.SweepIfDue());
  EXPECT_THAT(log_.TakeChecks(), IsEmpty());
  std::vector<absl::Duration> gaps;
  for (int i = 0; i < 20; ++i) {
    clock_.Advance(dispatcher_.next_sweep() - clock_.Now());
    const absl::Time now = clock_.Now();
    EXPECT_TRUE(dispatcher_.SweepIfDue());
    EXPECT_EQ(log_.TakeChecks().size(), size_t{kPartitions});
    EXPECT_FALSE(dispatcher_.SweepIfDue());  // not twice for one due time
    gaps.push_back(dispatcher_.next_sweep() - now);
  }
  for (absl::Duration gap : gaps) {
    EXPECT_GE(gap, policy_.claim_interval / 2);
    EXPECT_LT(gap, policy_.claim_interval);
  }
  // Jittered: not all the same.
  EXPECT_NE(*std::min_element(gaps.begin(), gaps.end()),
            *std::max_element(gaps.begin(), gaps.end()));
}

TEST_F(EventDispatcherTest, LeavingStopsWakesAndTheLastMemberTakesItsGroupAlong) {
  Watch a1 = JoinParked("billing");
  Watch a2 = JoinParked("billing");
  dispatcher_.Leave(a1.member);
  dispatcher_.OnNudge(0);
  EXPECT_EQ(*a1.wakes, 0);  // gone: the nudge wakes the next one
  EXPECT_EQ(*a2.wakes, 1);
  dispatcher_.Leave(a2.member);
  dispatcher_.OnNudge(0);
  dispatcher_.Sweep();
  EXPECT_THAT(log_.TakeChecks(), IsEmpty());  // no group left
  EXPECT_EQ(*a2.wakes, 1);
  // A member that joins later starts with a full read, as any first read.
  Watch late = Join("billing");
  EXPECT_THAT(dispatcher_.TakeWork(late.member).partitions, ElementsAre(0, 1, 2, 3));
}

}  // namespace
}  // namespace orderhold::domain
