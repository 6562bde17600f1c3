// The reaper's single step on the fake store: what it removes, and what it records.
#include "server/reaper/reaper.h"

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/eventually.h"
#include "tests/testing/fake_clock.h"
#include "tests/testing/fake_hold_store.h"
#include "tests/testing/metric_values.h"
#include "tests/testing/status_matchers.h"

namespace orderhold::reaper {
namespace {

using ::orderhold::testing::Eventually;
using ::orderhold::testing::IsOk;
using ::orderhold::testing::MetricValue;
using ::orderhold::testing::StatusIs;

class ReaperTest : public ::testing::Test {
 protected:
  void Place(const std::string& user, const std::string& order, absl::Duration ttl) {
    auto result = Await<store::PlaceHoldResult>([&](auto done) {
      store_.PlaceHold(store::PlaceHoldArgs{user, order, ttl, 10, 0, {}}, {}, std::move(done));
    });
    ASSERT_THAT(result, IsOk());
  }

  // Gives users u0 .. u<n-1> one hold each, due now (placed with a 1 s ttl, then 1 s passes).
  void PlaceDueHolds(int n) {
    for (int i = 0; i < n; ++i) Place(absl::StrCat("u", i), "o", absl::Seconds(1));
    clock_.Advance(absl::Seconds(1));
  }

  orderhold::testing::FakeClock clock_;
  orderhold::testing::FakeHoldStore store_{clock_};
  prometheus::Registry registry_;
  metrics::Metrics metrics_{registry_};
};

TEST_F(ReaperTest, RemovesDueHoldsAndRecordsLagPerHold) {
  ReaperOptions options;
  options.max_users_per_call = 1;  // forces several calls per partition
  Reaper reaper(store_, metrics_, options, clock_);
  for (int i = 0; i < 5; ++i) Place(absl::StrCat("u", i), "o", absl::Seconds(1));
  Place("u0", "later", absl::Seconds(60));

  clock_.Advance(absl::Seconds(3));
  auto stats = reaper.RunOnce();
  ASSERT_THAT(stats, IsOk());
  EXPECT_EQ(stats->reaped, 5);
  EXPECT_FALSE(stats->backlog_left);
  EXPECT_EQ(MetricValue(registry_, "orderhold_holds_expired_total"), 5);
  EXPECT_EQ(MetricValue(registry_, "orderhold_reaper_lag_seconds"), 5);  // one sample per hold
  EXPECT_EQ(MetricValue(registry_, "orderhold_reaper_tick_duration_seconds"), 1);
  EXPECT_EQ(MetricValue(registry_, "orderhold_reaper_last_success_timestamp_seconds"),
            absl::ToDoubleSeconds(clock_.Now() - absl::UnixEpoch()));

  // Lag = reap time - expire time: 2 s for each of those holds.
  for (const auto& family : registry_.Collect()) {
    if (family.name == "orderhold_reaper_lag_seconds") {
      EXPECT_DOUBLE_EQ(family.metric[0].histogram.sample_sum, 5 * 2.0);
    }
  }
  auto again = reaper.RunOnce();
  ASSERT_THAT(again, IsOk());
  EXPECT_EQ(again->reaped, 0);
}

TEST_F(ReaperTest, StoreErrorIsReturnedNotThrownAndLastSuccessUnchanged) {
  Reaper reaper(store_, metrics_, ReaperOptions{}, clock_);
  store_.SetFailure(absl::UnavailableError("down"));
  EXPECT_THAT(reaper.RunOnce(), StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_EQ(MetricValue(registry_, "orderhold_reaper_last_success_timestamp_seconds"), 0);
  store_.SetFailure(absl::OkStatus());
  EXPECT_THAT(reaper.RunOnce(), IsOk());
}

TEST_F(ReaperTest, SmallCallsOneAtATimeDrainABacklogInOneTickAndReportTheirCost) {
  ReaperOptions options;
  options.max_users_per_call = 3;
  options.max_in_flight = 1;
  Reaper reaper(store_, metrics_, options, clock_);
  PlaceDueHolds(40);
  auto stats = reaper.RunOnce();
  ASSERT_THAT(stats, IsOk());
  EXPECT_EQ(stats->reaped, 40);
  EXPECT_FALSE(stats->backlog_left);
  // One first call per partition, plus a follow-up for every full batch of 3.
  EXPECT_GT(stats->calls, orderhold::testing::FakeHoldStore::kPartitions);
  EXPECT_EQ(MetricValue(registry_, "orderhold_reaper_tick_redis_seconds"), 1);  // one tick seen
  EXPECT_EQ(MetricValue(registry_, "orderhold_reaper_calls_in_flight"), 0);
}

// A replica killed (kill -9) part-way through a tick has already ended holds in Redis, each with
// its event: they must be in the counters scraped before the kill, so every call's holds are
// counted when the call ends, not when the tick does. Here a tick stalls after its first calls
// (the fake clock does not reach the next call's slot) while the counters are read.
TEST_F(ReaperTest, EachCallsHoldsAreCountedWhenTheCallEndsNotAtTheEndOfTheTick) {
  ReaperOptions options;
  options.pace_window = absl::Seconds(1);
  options.max_in_flight = 1;
  options.max_users_per_call = 1;
  Reaper reaper(store_, metrics_, options, clock_);
  PlaceDueHolds(40);
  absl::StatusOr<ReapStats> stats;
  std::thread tick([&] { stats = reaper.RunOnce(); });
  ASSERT_TRUE(
      Eventually([&] { return MetricValue(registry_, "orderhold_reaper_lag_seconds") >= 1; }));
  const double lag_samples = MetricValue(registry_, "orderhold_reaper_lag_seconds");
  EXPECT_EQ(MetricValue(registry_, "orderhold_holds_expired_total"), lag_samples);
  EXPECT_EQ(MetricValue(registry_, "orderhold_events_appended_total"), lag_samples);
  clock_.Advance(absl::Seconds(1));  // every slot of the tick has come
  tick.join();
  ASSERT_THAT(stats, IsOk());
  EXPECT_EQ(stats->reaped, 40);
  EXPECT_EQ(MetricValue(registry_, "orderhold_holds_expired_total"), 40);  // none twice
  EXPECT_EQ(MetricValue(registry_, "orderhold_events_appended_total"), 40);
  EXPECT_EQ(MetricValue(registry_, "orderhold_reaper_lag_seconds"), 40);
}

TEST_F(ReaperTest, BacklogBeyondBoundIsLeftForNextTick) {
  ReaperOptions options;
  options.max_users_per_call = 1;
  options.max_calls_per_partition = 1;
  Reaper reaper(store_, metrics_, options, clock_);
  PlaceDueHolds(40);
  auto first = reaper.RunOnce();
  ASSERT_THAT(first, IsOk());
  EXPECT_TRUE(first->backlog_left);
  EXPECT_LE(first->reaped, orderhold::testing::FakeHoldStore::kPartitions);
  int total = first->reaped;
  for (int tick = 0; tick < 40 && total < 40; ++tick) total += reaper.RunOnce()->reaped;
  EXPECT_EQ(total, 40);
}

TEST_F(ReaperTest, BackgroundLoopReapsAndStops) {
  ReaperOptions options;
  options.interval = absl::Milliseconds(10);
  Reaper reaper(store_, metrics_, options, clock_);
  Place("u", "o", absl::Seconds(1));
  clock_.Advance(absl::Seconds(2));
  reaper.Start();
  EXPECT_TRUE(
      Eventually([&] { return MetricValue(registry_, "orderhold_holds_expired_total") >= 1; }));
  reaper.Stop();
  EXPECT_EQ(MetricValue(registry_, "orderhold_holds_expired_total"), 1);
}

TEST_F(ReaperTest, ReplicasDividePartitionsAndEachHoldIsReapedOnce) {
  ReaperOptions a_options, b_options;
  a_options.replica_id = "replica-a";
  b_options.replica_id = "replica-b";
  prometheus::Registry b_registry;
  metrics::Metrics b_metrics(b_registry);
  Reaper a(store_, metrics_, a_options, clock_);
  Reaper b(store_, b_metrics, b_options, clock_);
  ASSERT_THAT(a.RunOnce(), IsOk());  // a alone: owns everything
  EXPECT_EQ(a.owned().size(), static_cast<size_t>(store_.partition_count()));
  ASSERT_THAT(b.RunOnce(), IsOk());  // b sees both
  ASSERT_THAT(a.RunOnce(), IsOk());  // a sees both and releases b's share
  for (int i = 0; i < 40; ++i) Place(absl::StrCat("user-", i), "o", absl::Seconds(1));
  clock_.Advance(absl::Seconds(2));
  auto from_a = a.RunOnce();
  auto from_b = b.RunOnce();
  ASSERT_THAT(from_a, IsOk());
  ASSERT_THAT(from_b, IsOk());
  EXPECT_EQ(from_a->owned + from_b->owned, store_.partition_count());
  EXPECT_EQ(from_b->not_owner, 0);
  EXPECT_EQ(from_a->reaped + from_b->reaped, 40);
  // a stops (releases and leaves): b owns everything at its next tick.
  a.Stop();
  auto alone = b.RunOnce();
  ASSERT_THAT(alone, IsOk());
  EXPECT_EQ(alone->owned, store_.partition_count());
  EXPECT_EQ(alone->not_owner, 0);
}

TEST_F(ReaperTest, StandbyReapsADeadOwnersPartitionsOnceTheyAreOverdue) {
  ReaperOptions a_options, b_options;
  a_options.replica_id = "replica-a";
  b_options.replica_id = "replica-b";
  a_options.standby_after = b_options.standby_after = absl::Milliseconds(1500);
  prometheus::Registry b_registry;
  metrics::Metrics b_metrics(b_registry);
  Reaper a(store_, metrics_, a_options, clock_);
  {
    Reaper b(store_, b_metrics, b_options, clock_);
    ASSERT_THAT(a.RunOnce(), IsOk());
    ASSERT_THAT(b.RunOnce(), IsOk());
    ASSERT_THAT(a.RunOnce(), IsOk());  // settled: a and b share the partitions
    ASSERT_GT(b.owned().size(), 0u);
  }
  // b "dies" without handing over: put its registry entry back as a killed process leaves it
  // (its leases do not matter to standby reaping).
  ASSERT_THAT(Await<std::vector<std::string>>([&](auto done) {
                store_.Heartbeat("replica-b", absl::Seconds(3), {}, std::move(done));
              }),
              IsOk());
  for (int i = 0; i < 40; ++i) Place(absl::StrCat("user-", i), "o", absl::Seconds(1));
  clock_.Advance(absl::Milliseconds(1200));  // due 0.2 s ago
  auto first = a.RunOnce();
  ASSERT_THAT(first, IsOk());
  EXPECT_EQ(first->standby_reaped, 0);  // b's holds are not overdue enough yet
  EXPECT_LT(first->reaped, 40);
  clock_.Advance(absl::Milliseconds(1500));  // due 1.7 s ago; b is still in the registry
  auto second = a.RunOnce();
  ASSERT_THAT(second, IsOk());
  EXPECT_GT(second->standby_reaped, 0);
  EXPECT_EQ(first->reaped + second->reaped, 40);
  EXPECT_LT(second->owned, store_.partition_count());  // reaped without taking b's partitions over
}

// Peeks (ReaperOptions::peek_batch): an idle tick is one round trip of peeks and no reap call;
// only partitions with something due are called.
TEST_F(ReaperTest, AnIdleTickOnlyPeeksAndOnlyPartitionsWithDueHoldsAreCalled) {
  Reaper reaper(store_, metrics_, ReaperOptions{}, clock_);
  auto idle = reaper.RunOnce();
  ASSERT_THAT(idle, IsOk());
  EXPECT_EQ(idle->peeks, orderhold::testing::FakeHoldStore::kPartitions);
  EXPECT_EQ(idle->calls, 0);
  EXPECT_EQ(store_.peeks(), orderhold::testing::FakeHoldStore::kPartitions);
  EXPECT_EQ(store_.reap_calls(), 0);
  EXPECT_EQ(MetricValue(registry_, "orderhold_reaper_last_success_timestamp_seconds"),
            absl::ToDoubleSeconds(clock_.Now() - absl::UnixEpoch()));

  Place("due", "o", absl::Seconds(1));
  Place("later", "o", absl::Seconds(60));
  clock_.Advance(absl::Seconds(1));
  auto busy = reaper.RunOnce();
  ASSERT_THAT(busy, IsOk());
  EXPECT_EQ(busy->reaped, 1);
  EXPECT_EQ(busy->calls, 1);  // the partition of "due" alone, whatever "later"'s is
  EXPECT_EQ(store_.reap_calls(), 1);
  EXPECT_EQ(MetricValue(registry_, "orderhold_holds_expired_total"), 1);

  // The partition that reaped is called without a peek the next tick (under load a peek would
  // only delay its call); the others are peeked.
  auto next = reaper.RunOnce();
  ASSERT_THAT(next, IsOk());
  EXPECT_EQ(next->peeks, orderhold::testing::FakeHoldStore::kPartitions - 1);
  EXPECT_EQ(next->calls, 1);
  EXPECT_EQ(next->reaped, 0);
  // It reaped nothing: peeked again the tick after.
  auto quiet = reaper.RunOnce();
  ASSERT_THAT(quiet, IsOk());
  EXPECT_EQ(quiet->peeks, orderhold::testing::FakeHoldStore::kPartitions);
  EXPECT_EQ(quiet->calls, 0);
}

// Due nudges (SetDueNudges): after one look at every partition, an idle replica looks at none
// until a hold may be due by the next tick (its partition's next_due), a due nudge comes for a
// partition, or idle_look_interval passes; while the nudges are not all subscribed it looks at
// every partition every tick.
TEST_F(ReaperTest, WithDueNudgesAnIdleReplicaLooksOnlyAtWhatMayBeDue) {
  constexpr int kPartitions = orderhold::testing::FakeHoldStore::kPartitions;
  ReaperOptions options;
  options.idle_look_interval = absl::Seconds(30);
  Reaper reaper(store_, metrics_, options, clock_);
  std::atomic<bool> subscribed = true;
  reaper.SetDueNudges([&subscribed] { return subscribed.load(); });
  Place("later", "o", absl::Seconds(5));
  const int later = orderhold::testing::FakeHoldStore::PartitionOf("later");

  auto first = reaper.RunOnce();  // nothing known yet: every partition
  ASSERT_THAT(first, IsOk());
  EXPECT_EQ(first->peeks, kPartitions);
  EXPECT_EQ(first->skipped, 0);
  clock_.Advance(absl::Seconds(1));
  auto idle = reaper.RunOnce();  // nothing due by the next tick anywhere
  ASSERT_THAT(idle, IsOk());
  EXPECT_EQ(idle->peeks + idle->calls, 0);
  EXPECT_EQ(idle->skipped, kPartitions);

  // A hold placed elsewhere without a nudge is not seen; with one, its partition is looked at.
  Place("nudged", "o", absl::Seconds(1));
  const int nudged = orderhold::testing::FakeHoldStore::PartitionOf("nudged");
  ASSERT_NE(nudged, later);
  clock_.Advance(absl::Seconds(1));
  reaper.OnDueNudge(nudged);
  auto woken = reaper.RunOnce();
  ASSERT_THAT(woken, IsOk());
  EXPECT_EQ(woken->peeks, 1);  // that partition alone: peeked, then called
  EXPECT_EQ(woken->calls, 1);
  EXPECT_EQ(woken->reaped, 1);
  EXPECT_EQ(woken->skipped, kPartitions - 1);

  // "later" comes due within the next tick: its partition alone is looked at, then called.
  clock_.Advance(absl::Seconds(2));  // t = 4 s; due at 5 s
  auto before_due = reaper.RunOnce();
  ASSERT_THAT(before_due, IsOk());
  EXPECT_EQ(before_due->reaped, 0);
  clock_.Advance(absl::Seconds(1));
  auto due = reaper.RunOnce();
  ASSERT_THAT(due, IsOk());
  EXPECT_EQ(due->reaped, 1);
  EXPECT_EQ(due->peeks, 0);  // known due: called without a peek

  // idle_look_interval after the first look, every partition is looked at again.
  clock_.Advance(absl::Seconds(30));
  auto safety = reaper.RunOnce();
  ASSERT_THAT(safety, IsOk());
  EXPECT_EQ(safety->skipped, 0);
  // A subscription missing: every partition, every tick.
  subscribed = false;
  clock_.Advance(absl::Seconds(1));
  auto unsubscribed = reaper.RunOnce();
  ASSERT_THAT(unsubscribed, IsOk());
  EXPECT_EQ(unsubscribed->skipped, 0);
  EXPECT_EQ(unsubscribed->peeks, kPartitions);
}

TEST_F(ReaperTest, WithoutPeeksEveryPartitionIsCalled) {
  ReaperOptions options;
  options.peek_batch = 0;
  Reaper reaper(store_, metrics_, options, clock_);
  auto idle = reaper.RunOnce();
  ASSERT_THAT(idle, IsOk());
  EXPECT_EQ(idle->peeks, 0);
  EXPECT_EQ(idle->calls, orderhold::testing::FakeHoldStore::kPartitions);
  EXPECT_EQ(store_.peeks(), 0);
}

// The partitions a peek found idle are not waited for: with an hour-long window and nothing due,
// the tick ends after the first group's peek, without the clock moving (a tick that waited for
// their slots would block until the test moves the clock on).
TEST_F(ReaperTest, PartitionsPeekedIdleAreNotWaitedFor) {
  ReaperOptions options;
  options.pace_window = absl::Hours(1);
  options.peek_batch = 2;  // two groups over the 4 partitions: the second group's slot is late
  Reaper reaper(store_, metrics_, options, clock_);
  Place("later", "o", absl::Hours(2));  // not due within a group's 30 minutes of slots
  std::atomic<bool> done = false;
  absl::StatusOr<ReapStats> stats;
  std::thread tick([&] {
    stats = reaper.RunOnce();
    done = true;
  });
  // The first group's peek happens at once; the second group's slot is 30 minutes in.
  ASSERT_TRUE(Eventually([&] { return store_.peeks() == 2; }));
  EXPECT_FALSE(done.load());
  clock_.Advance(absl::Minutes(30));
  const bool ended = Eventually([&] { return done.load(); });
  if (!ended) clock_.Advance(absl::Hours(1));  // let the tick end before failing
  tick.join();
  EXPECT_TRUE(ended);
  ASSERT_THAT(stats, IsOk());
  EXPECT_EQ(stats->peeks, 4);
  EXPECT_EQ(stats->calls, 0);
}

// A partition whose oldest hold comes due within its group's slots is called at its slot.
TEST_F(ReaperTest, AHoldDueWithinTheGroupsSlotsIsReapedThisTick) {
  using orderhold::testing::FakeHoldStore;
  ReaperOptions options;
  options.pace_window = absl::Seconds(4);  // slots 1 s apart; one group of 4: 4 s of slots
  Reaper reaper(store_, metrics_, options, clock_);
  // A user of the last partition (slot at +3 s), its hold due at +2.5 s: not due at the peek,
  // due by its partition's slot.
  std::string user;
  for (int i = 0; user.empty(); ++i) {
    const std::string candidate = absl::StrCat("soon", i);
    if (FakeHoldStore::PartitionOf(candidate) == FakeHoldStore::kPartitions - 1) user = candidate;
  }
  Place(user, "o", absl::Milliseconds(2500));
  absl::StatusOr<ReapStats> stats;
  std::thread tick([&] { stats = reaper.RunOnce(); });
  ASSERT_TRUE(Eventually([&] { return store_.peeks() == 4; }));
  clock_.Advance(absl::Seconds(4));  // every slot has come
  tick.join();
  ASSERT_THAT(stats, IsOk());
  EXPECT_EQ(stats->peeks, 4);
  EXPECT_EQ(stats->calls, 1);  // that partition alone, at its slot
  EXPECT_EQ(stats->reaped, 1);
}

}  // namespace
}  // namespace orderhold::reaper
