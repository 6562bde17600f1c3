// EventService on a recording event log and a fake clock: validation, the claim schedule, how
// acks are split by partition.
#include "server/domain/event_service.h"

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/fake_clock.h"
#include "tests/testing/status_matchers.h"

namespace orderhold::domain {
namespace {

using ::orderhold::testing::IsOk;
using ::orderhold::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

// Answers at once: no events, every group new, every acked id pending. Records the calls.
class RecordingEventLog final : public store::HoldEventLog {
 public:
  int event_partition_count() const override { return 2; }
  void EnsureGroup(int /*partition*/, std::string /*group*/, store::GroupStart /*start*/,
                   store::CallOptions /*options*/, store::Callback<bool> done) override {
    std::move(done)(true);
  }
  void ReadEvents(int /*partition*/, store::ReadEventsArgs args, store::CallOptions /*options*/,
                  store::Callback<std::vector<store::StoredEvent>> done) override {
    {
      absl::MutexLock lock(&mu_);
      reads_.push_back(std::move(args));
    }
    std::move(done)(std::vector<store::StoredEvent>{});
  }
  void AckEvents(int partition, std::string /*group*/, std::vector<std::string> stream_ids,
                 store::CallOptions /*options*/, store::Callback<int64_t> done) override {
    const auto n = static_cast<int64_t>(stream_ids.size());
    {
      absl::MutexLock lock(&mu_);
      acks_[partition] = std::move(stream_ids);
    }
    std::move(done)(n);
  }
  void TrimEvents(int /*partition*/, absl::Time /*cutoff*/, store::CallOptions /*options*/,
                  store::Callback<store::TrimEventsResult> done) override {
    std::move(done)(store::TrimEventsResult{});
  }

  std::vector<store::ReadEventsArgs> TakeReads() {
    absl::MutexLock lock(&mu_);
    return std::exchange(reads_, {});
  }
  std::map<int, std::vector<std::string>> acks() {
    absl::MutexLock lock(&mu_);
    return acks_;
  }

 private:
  absl::Mutex mu_;
  std::vector<store::ReadEventsArgs> reads_ ABSL_GUARDED_BY(mu_);
  std::map<int, std::vector<std::string>> acks_ ABSL_GUARDED_BY(mu_);
};

class EventServiceTest : public ::testing::Test {
 protected:
  absl::StatusOr<std::vector<store::StoredEvent>> Poll(const WatchSpec& spec, WatchCursor& cursor) {
    return Await<std::vector<store::StoredEvent>>(
        [&](auto done) { service_.Poll(spec, cursor, {}, std::move(done)); });
  }
  absl::StatusOr<int64_t> Ack(const std::string& group, const std::vector<std::string>& ids) {
    return Await<int64_t>([&](auto done) { service_.Ack(group, ids, {}, std::move(done)); });
  }

  RecordingEventLog log_;
  orderhold::testing::FakeClock clock_;
  prometheus::Registry registry_;
  metrics::Metrics metrics_{registry_};
  EventService service_{log_, EventPolicy{}, metrics_, clock_};
};

TEST_F(EventServiceTest, SubscribeValidatesGroupAndConsumer) {
  auto subscribe = [&](const std::string& group, const std::string& consumer) {
    return Await<bool>([&](auto done) {
      service_.Subscribe(WatchSpec{group, consumer, {}, store::GroupStart::kEarliest}, {},
                         std::move(done));
    });
  };
  EXPECT_THAT(subscribe("billing", "worker-1"), IsOk());
  EXPECT_THAT(subscribe("bill ing", "worker-1"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("consumer_group")));
  EXPECT_THAT(subscribe("billing", ""),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("consumer")));
}

TEST_F(EventServiceTest, ClaimsPendingEventsAtMostOncePerClaimIntervalOnTheInjectedClock) {
  const WatchSpec spec{"billing", "worker-1", {}, store::GroupStart::kEarliest};
  WatchCursor cursor;
  auto claims = [&] {
    std::vector<store::ReadEventsArgs> reads = log_.TakeReads();
    EXPECT_EQ(reads.size(), 2u);  // one read per partition
    return !reads.empty() && reads[0].claim_idle.has_value();
  };
  ASSERT_THAT(Poll(spec, cursor), IsOk());
  EXPECT_TRUE(claims());
  ASSERT_THAT(Poll(spec, cursor), IsOk());
  EXPECT_FALSE(claims());  // no time passed
  clock_.Advance(EventPolicy{}.claim_interval - absl::Milliseconds(1));
  ASSERT_THAT(Poll(spec, cursor), IsOk());
  EXPECT_FALSE(claims());
  clock_.Advance(absl::Milliseconds(1));
  ASSERT_THAT(Poll(spec, cursor), IsOk());
  EXPECT_TRUE(claims());
}

TEST_F(EventServiceTest, AckSplitsIdsByPartitionAndBoundsTheirNumber) {
  auto acked = Ack("billing", {"1/5-0", "0/7-1", "1/6-0"});
  ASSERT_THAT(acked, IsOk());
  EXPECT_EQ(*acked, 3);
  EXPECT_THAT(log_.acks(),
              ElementsAre(Pair(0, ElementsAre("7-1")), Pair(1, ElementsAre("5-0", "6-0"))));
  EXPECT_THAT(Ack("billing", {}), IsOk());
  EXPECT_THAT(Ack("billing", {"2/5-0"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("event_ids")));
  EXPECT_THAT(Ack("billing", std::vector<std::string>(EventService::kMaxAckIds + 1, "0/1-0")),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr(absl::StrCat("at most ", EventService::kMaxAckIds))));
}

}  // namespace
}  // namespace orderhold::domain
