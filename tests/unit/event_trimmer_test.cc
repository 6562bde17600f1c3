// The event trimmer's schedule on the recording event log: partitions with consumer groups every
// interval, those without only every idle_interval, unless a group was created there since.
#include "server/reaper/event_trimmer.h"

#include <map>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/fake_clock.h"
#include "tests/testing/metric_values.h"
#include "tests/testing/recording_event_log.h"

namespace orderhold::reaper {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

TEST(EventTrimmerTest, PartitionsWithoutGroupsWaitTheIdleIntervalUntilOneIsCreated) {
  orderhold::testing::FakeClock clock;
  orderhold::testing::RecordingEventLog log(8);
  prometheus::Registry registry;
  metrics::Metrics metrics(registry);
  EventTrimmer trimmer(log, metrics, clock,
                       EventTrimOptions{.retention = absl::Hours(24),
                                        .interval = absl::Seconds(10),
                                        .idle_interval = absl::Minutes(1)});
  const std::vector<int> owned = {0, 1, 2};
  log.SetTrimGroups(1, {"inventory"});
  trimmer.MaybeTrim(owned, clock.Now());
  EXPECT_THAT(log.TakeTrims(), ElementsAre(0, 1, 2));  // the first trim: every partition

  clock.Advance(absl::Seconds(5));
  trimmer.MaybeTrim(owned, clock.Now());
  EXPECT_THAT(log.TakeTrims(), IsEmpty());  // within the interval: nothing

  clock.Advance(absl::Seconds(5));
  trimmer.MaybeTrim(owned, clock.Now());
  EXPECT_THAT(log.TakeTrims(), ElementsAre(1));  // the one with a group

  // A group created on partition 2 (its creation publishes a "group" nudge): trimmed at the next
  // interval, and from then on every interval.
  log.SetTrimGroups(2, {"billing"});
  trimmer.OnGroupCreated(2);
  clock.Advance(absl::Seconds(10));
  trimmer.MaybeTrim(owned, clock.Now());
  EXPECT_THAT(log.TakeTrims(), ElementsAre(1, 2));

  // The idle interval after its last trim, partition 0 is trimmed again.
  clock.Advance(absl::Seconds(40));  // 60 s after the first trim
  trimmer.MaybeTrim(owned, clock.Now());
  EXPECT_THAT(log.TakeTrims(), ElementsAre(0, 1, 2));
}

// --consumer_idle_timeout: a partition's trim checks idle consumers at most every
// consumer_check_interval (XINFO CONSUMERS per group is not free); the other trims do not.
TEST(EventTrimmerTest, IdleConsumersAreCheckedOncePerCheckInterval) {
  orderhold::testing::FakeClock clock;
  orderhold::testing::RecordingEventLog log(2);
  prometheus::Registry registry;
  metrics::Metrics metrics(registry);
  EventTrimmer trimmer(log, metrics, clock,
                       EventTrimOptions{.retention = absl::Hours(24),
                                        .interval = absl::Seconds(10),
                                        .consumer_idle = absl::Hours(1),
                                        .consumer_check_interval = absl::Seconds(30)});
  log.SetTrimGroups(0, {"billing"});
  log.SetTrimGroups(1, {"billing"});
  const absl::Duration none = absl::ZeroDuration(), hour = absl::Hours(1);
  for (const auto& want :
       {std::vector<absl::Duration>{hour, hour}, {none, none}, {none, none}, {hour, hour}}) {
    trimmer.MaybeTrim({0, 1}, clock.Now());
    EXPECT_EQ(log.TakeConsumerIdles(), want);
    clock.Advance(absl::Seconds(10));
  }
}

// A deleted group's orderhold_events_oldest_unacked_age_seconds series goes once no trim has
// reported the group for two idle intervals (the replica that served DeleteConsumerGroup drops
// it at once; the others this way).
TEST(EventTrimmerTest, AGroupNoTrimReportsLosesItsSeries) {
  orderhold::testing::FakeClock clock;
  orderhold::testing::RecordingEventLog log(1);
  prometheus::Registry registry;
  metrics::Metrics metrics(registry);
  EventTrimmer trimmer(log, metrics, clock,
                       EventTrimOptions{.retention = absl::Hours(24),
                                        .interval = absl::Seconds(10),
                                        .idle_interval = absl::Minutes(1)});
  const char* const kSeries = "orderhold_events_oldest_unacked_age_seconds";
  log.SetTrimGroups(0, {"billing"});
  trimmer.MaybeTrim({0}, clock.Now());
  EXPECT_EQ(orderhold::testing::MetricValue(registry, kSeries, {{"group", "billing"}}), 0);
  log.SetTrimGroups(0, {});       // deleted
  for (int i = 0; i < 12; ++i) {  // 2 minutes: still there
    clock.Advance(absl::Seconds(10));
    trimmer.MaybeTrim({0}, clock.Now());
  }
  EXPECT_EQ(orderhold::testing::MetricValue(registry, kSeries, {{"group", "billing"}}), 0);
  clock.Advance(absl::Seconds(61));
  trimmer.MaybeTrim({0}, clock.Now());
  EXPECT_EQ(orderhold::testing::MetricValue(registry, kSeries, {{"group", "billing"}}), -1);
}
}  // namespace
}  // namespace orderhold::reaper
