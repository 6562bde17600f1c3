// The event trimmer's schedule on a recording event log: partitions with consumer groups every
// interval, those without only every idle_interval, unless a group was created there since.
#include "server/reaper/event_trimmer.h"

#include <map>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/fake_clock.h"

namespace orderhold::reaper {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

// Answers TrimEvents at once with the groups set for the partition, and records the partitions
// trimmed since the last Take(). The reads and acks are not used by the trimmer.
class RecordingEventLog : public store::HoldEventLog {
 public:
  int event_partition_count() const override { return 8; }
  void EnsureGroup(int, std::string, store::GroupStart, store::CallOptions,
                   store::Callback<bool> done) override {
    std::move(done)(absl::UnimplementedError("unused"));
  }
  void ReadEvents(int, store::ReadEventsArgs, store::CallOptions,
                  store::Callback<std::vector<store::StoredEvent>> done) override {
    std::move(done)(absl::UnimplementedError("unused"));
  }
  void CheckGroups(int, std::vector<std::string>, std::optional<absl::Duration>, store::CallOptions,
                   store::Callback<std::vector<store::GroupWork>> done) override {
    std::move(done)(absl::UnimplementedError("unused"));
  }
  void AckEvents(int, std::string, std::vector<std::string>, store::CallOptions,
                 store::Callback<int64_t> done) override {
    std::move(done)(absl::UnimplementedError("unused"));
  }
  void TrimEvents(int partition, absl::Time, store::CallOptions,
                  store::Callback<store::TrimEventsResult> done) override {
    trimmed_.push_back(partition);
    store::TrimEventsResult result;
    if (groups_.contains(partition)) result.groups.push_back({groups_[partition], std::nullopt});
    std::move(done)(result);
  }

  void SetGroup(int partition, std::string group) { groups_[partition] = std::move(group); }
  std::vector<int> Take() { return std::exchange(trimmed_, {}); }

 private:
  std::map<int, std::string> groups_;
  std::vector<int> trimmed_;
};

TEST(EventTrimmerTest, PartitionsWithoutGroupsWaitTheIdleIntervalUntilOneIsCreated) {
  orderhold::testing::FakeClock clock;
  RecordingEventLog log;
  prometheus::Registry registry;
  metrics::Metrics metrics(registry);
  EventTrimmer trimmer(log, metrics, clock,
                       EventTrimOptions{.retention = absl::Hours(24),
                                        .interval = absl::Seconds(10),
                                        .idle_interval = absl::Minutes(1)});
  const std::vector<int> owned = {0, 1, 2};
  log.SetGroup(1, "inventory");
  trimmer.MaybeTrim(owned, clock.Now());
  EXPECT_THAT(log.Take(), ElementsAre(0, 1, 2));  // the first trim: every partition

  clock.Advance(absl::Seconds(5));
  trimmer.MaybeTrim(owned, clock.Now());
  EXPECT_THAT(log.Take(), IsEmpty());  // within the interval: nothing

  clock.Advance(absl::Seconds(5));
  trimmer.MaybeTrim(owned, clock.Now());
  EXPECT_THAT(log.Take(), ElementsAre(1));  // the one with a group

  // A group created on partition 2 (its creation publishes a "group" nudge): trimmed at the next
  // interval, and from then on every interval.
  log.SetGroup(2, "billing");
  trimmer.OnGroupCreated(2);
  clock.Advance(absl::Seconds(10));
  trimmer.MaybeTrim(owned, clock.Now());
  EXPECT_THAT(log.Take(), ElementsAre(1, 2));

  // The idle interval after its last trim, partition 0 is trimmed again.
  clock.Advance(absl::Seconds(40));  // 60 s after the first trim
  trimmer.MaybeTrim(owned, clock.Now());
  EXPECT_THAT(log.Take(), ElementsAre(0, 1, 2));
}

}  // namespace
}  // namespace orderhold::reaper
