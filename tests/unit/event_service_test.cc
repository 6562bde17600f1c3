// EventService on a recording event log: validation, what a read plan turns into (budget share,
// claims, partitions to read again, the outcome filter), how acks are split by partition.
#include "server/domain/event_service.h"

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/recording_event_log.h"
#include "tests/testing/status_matchers.h"

namespace orderhold::domain {
namespace {

using ::orderhold::testing::IsOk;
using ::orderhold::testing::StatusIs;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

class EventServiceTest : public ::testing::Test {
 protected:
  ReadResult Read(const WatchSpec& spec, const ReadPlan& plan) {
    ReadResult out;
    service_.Read(spec, plan, {}, [&](ReadResult result) { out = std::move(result); });
    return out;  // the recording log answers inline
  }
  absl::StatusOr<int64_t> Ack(const std::string& group, const std::vector<std::string>& ids) {
    return Await<int64_t>([&](auto done) { service_.Ack(group, "", ids, {}, std::move(done)); });
  }

  orderhold::testing::RecordingEventLog log_{/*partitions=*/4};
  prometheus::Registry registry_;
  metrics::Metrics metrics_{registry_};
  EventService service_{log_, EventPolicy{}, metrics_};
};

TEST_F(EventServiceTest, SubscribeValidatesGroupAndConsumer) {
  auto subscribe = [&](const std::string& group, const std::string& consumer) {
    return Await<bool>([&](auto done) {
      service_.Subscribe(
          WatchSpec{group, consumer, {}, store::GroupStart::kEarliest, "", std::nullopt}, {},
          std::move(done));
    });
  };
  EXPECT_THAT(subscribe("billing", "worker-1"), IsOk());
  EXPECT_THAT(subscribe("bill ing", "worker-1"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("consumer_group")));
  EXPECT_THAT(subscribe("billing", ""),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("consumer")));
}

TEST_F(EventServiceTest, ReadSharesTheBudgetClaimsWherePlannedAndSaysWhatToReadAgain) {
  const WatchSpec spec{"billing", "worker-1", {}, store::GroupStart::kEarliest, "", std::nullopt};
  const int budget = EventPolicy{}.max_events_per_read;
  // Partition 1 has at least its share waiting, partition 3 less.
  log_.SetEventsPerRead(1, budget / 2, store::HoldOutcome::kPaid);
  log_.SetEventsPerRead(3, 1, store::HoldOutcome::kPaid);
  log_.SetCursors(3, "7-0", "5-1");  // 3's claim scan and resume stop before their ends
  ReadResult result =
      Read(spec, ReadPlan{{1, 3}, {3}, {{3, "6-0"}}, /*own=*/{{1, ""}, {3, "4-0"}}});
  ASSERT_THAT(result.status, IsOk());
  EXPECT_EQ(result.events.size(), static_cast<size_t>(budget / 2 + 1));
  EXPECT_THAT(result.again, ElementsAre(1));  // full: more may be waiting; 3 is drained
  // Where 3's claim scan and resume go on; 1 was not claimed and its resume is done.
  EXPECT_THAT(result.claim_next, ElementsAre(std::pair(3, "7-0")));
  EXPECT_THAT(result.own_next, ElementsAre(std::pair(3, "5-1")));
  EXPECT_THAT(log_.TakeReadPartitions(), ElementsAre(1, 3));
  std::vector<store::ReadEventsArgs> reads = log_.TakeReads();
  ASSERT_EQ(reads.size(), 2u);
  for (const store::ReadEventsArgs& args : reads) {
    EXPECT_EQ(args.max_events, budget / 2);  // an equal share of the budget
    EXPECT_TRUE(args.own_pending);
    EXPECT_EQ(args.consumer, "worker-1");
  }
  EXPECT_FALSE(reads[0].claim_idle.has_value());
  EXPECT_EQ(reads[1].claim_idle, EventPolicy{}.ack_timeout);
  EXPECT_EQ(reads[1].claim_after, "6-0");  // the group's cursor, as planned
  EXPECT_EQ(reads[0].own_after, "");
  EXPECT_EQ(reads[1].own_after, "4-0");

  // One partition alone gets the whole budget.
  log_.SetEventsPerRead(1, 0, store::HoldOutcome::kPaid);
  result = Read(spec, ReadPlan{{1}, {}, {}, {}});
  reads = log_.TakeReads();
  ASSERT_EQ(reads.size(), 1u);
  EXPECT_EQ(reads[0].max_events, budget);
  EXPECT_FALSE(reads[0].own_pending);
  EXPECT_THAT(result.again, ::testing::IsEmpty());
}

TEST_F(EventServiceTest, ReadAcksWhatTheOutcomeFilterDrops) {
  const WatchSpec spec{
      "billing", "worker-1",  {store::HoldOutcome::kExpired}, store::GroupStart::kEarliest,
      "",        std::nullopt};
  log_.SetEventsPerRead(2, 2, store::HoldOutcome::kPaid);
  ReadResult result = Read(spec, ReadPlan{{2}, {}, {}, {}});
  ASSERT_THAT(result.status, IsOk());
  EXPECT_THAT(result.events, ::testing::IsEmpty());
  EXPECT_THAT(log_.acks(), ElementsAre(Pair(2, ElementsAre("0-0", "0-1"))));
}

TEST_F(EventServiceTest, AWatchOfATenantReadsOnlyItsTenantsEventsAndAcksTheOthers) {
  // The recorded log's events are of users in no tenant.
  const WatchSpec acme{"acme:billing", "worker-1", {}, store::GroupStart::kEarliest, "", "acme"};
  log_.SetEventsPerRead(2, 2, store::HoldOutcome::kPaid);
  ReadResult result = Read(acme, ReadPlan{{2}, {}, {}, {}});
  ASSERT_THAT(result.status, IsOk());
  EXPECT_THAT(result.events, ::testing::IsEmpty());
  EXPECT_THAT(log_.acks(), ElementsAre(Pair(2, ElementsAre("0-0", "0-1"))));
  // A watch of no tenant (an operator without orderhold-tenant) reads them.
  const WatchSpec none{"billing", "worker-1", {}, store::GroupStart::kEarliest, "", ""};
  result = Read(none, ReadPlan{{2}, {}, {}, {}});
  EXPECT_EQ(result.events.size(), 2u);
}

TEST_F(EventServiceTest, AckSplitsIdsByPartitionAndBoundsTheirNumber) {
  auto acked = Ack("billing", {"1/5-0", "0/7-1", "1/6-0"});
  ASSERT_THAT(acked, IsOk());
  EXPECT_EQ(*acked, 3);
  EXPECT_THAT(log_.acks(),
              ElementsAre(Pair(0, ElementsAre("7-1")), Pair(1, ElementsAre("5-0", "6-0"))));
  EXPECT_THAT(Ack("billing", {}), IsOk());
  EXPECT_THAT(Ack("billing", {"4/5-0"}),  // partitions 0-3
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("event_ids")));
  EXPECT_THAT(Ack("billing", std::vector<std::string>(EventService::kMaxAckIds + 1, "0/1-0")),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr(absl::StrCat("at most ", EventService::kMaxAckIds))));
}

// Groups belong to callers: the registry caps each caller's groups, and with enforce_owners
// another caller can neither watch nor ack a group it does not own. DeleteGroup gives the place
// back and destroys the group on every partition.
class EventServiceGroupsTest : public ::testing::Test {
 protected:
  absl::Status Subscribe(const std::string& group, const std::string& caller) {
    return Await<bool>([&](auto done) {
             service_.Subscribe(
                 WatchSpec{group, "c", {}, store::GroupStart::kEarliest, caller, std::nullopt}, {},
                 std::move(done));
           })
        .status();
  }
  absl::Status Ack(const std::string& group, const std::string& caller) {
    return Await<int64_t>(
               [&](auto done) { service_.Ack(group, caller, {"1/1-0"}, {}, std::move(done)); })
        .status();
  }

  static EventPolicy Policy() {
    EventPolicy policy;
    policy.max_groups_per_caller = 2;
    policy.enforce_owners = true;
    return policy;
  }

  const EventPolicy policy_ = Policy();
  orderhold::testing::RecordingEventLog log_{/*partitions=*/4};
  prometheus::Registry registry_;
  metrics::Metrics metrics_{registry_};
  EventService service_{log_, policy_, metrics_};
};

TEST_F(EventServiceGroupsTest, ACallerOwnsAtMostMaxGroups) {
  EXPECT_THAT(Subscribe("g1", "uri:spiffe://x/consumer"), IsOk());
  EXPECT_THAT(Subscribe("g2", "uri:spiffe://x/consumer"), IsOk());
  EXPECT_THAT(Subscribe("g1", "uri:spiffe://x/consumer"), IsOk());  // its own again: no new place
  const absl::Status third = Subscribe("g3", "uri:spiffe://x/consumer");
  EXPECT_THAT(third,
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("max_consumer_groups 2")));
  EXPECT_TRUE(third.GetPayload("type.googleapis.com/google.rpc.QuotaFailure").has_value());
  // Another caller has places of its own.
  EXPECT_THAT(Subscribe("g3", "uri:spiffe://x/other"), IsOk());
  // Deleting one gives its owner the place back.
  EXPECT_THAT(Await<bool>([&](auto done) {
                service_.DeleteGroup("g2", "uri:spiffe://x/consumer", {}, std::move(done));
              }),
              IsOk());
  EXPECT_THAT(log_.TakeDestroys(), ElementsAre(0, 1, 2, 3));
  EXPECT_THAT(Subscribe("g4", "uri:spiffe://x/consumer"), IsOk());
}

// A tenant's own max_consumer_groups (--tenants) replaces the server's (2 here) for its groups; a
// caller of a tenant without one, or of no tenant, keeps the server's.
TEST_F(EventServiceGroupsTest, ATenantsMaxConsumerGroupsReplacesTheServersForItsGroupsOnly) {
  TenantLimits acme;
  acme.max_consumer_groups = 1;
  TenantTable tenants;
  tenants.Set({{"acme", acme}, {"beta", TenantLimits{}}}, {});
  service_.set_tenants(&tenants);
  EXPECT_THAT(Subscribe("acme:g1", "uri:spiffe://x/acme"), IsOk());
  EXPECT_THAT(Subscribe("acme:g2", "uri:spiffe://x/acme"),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       AllOf(HasSubstr("consumer_group \"g2\" is new"),
                             HasSubstr("max_consumer_groups 1"))));
  // beta's caller and one in no tenant: the server's 2.
  EXPECT_THAT(Subscribe("beta:g1", "uri:spiffe://x/beta"), IsOk());
  EXPECT_THAT(Subscribe("beta:g2", "uri:spiffe://x/beta"), IsOk());
  EXPECT_THAT(Subscribe("beta:g3", "uri:spiffe://x/beta"),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("max_consumer_groups 2")));
  EXPECT_THAT(Subscribe("g1", "uri:spiffe://x/none"), IsOk());
  EXPECT_THAT(Subscribe("g2", "uri:spiffe://x/none"), IsOk());
  EXPECT_THAT(Subscribe("g3", "uri:spiffe://x/none"),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("max_consumer_groups 2")));
}

TEST_F(EventServiceGroupsTest, AnotherCallerCannotWatchOrAckAGroupItDoesNotOwn) {
  ASSERT_THAT(Subscribe("billing", "uri:spiffe://x/consumer"), IsOk());
  EXPECT_THAT(Subscribe("billing", "uri:spiffe://x/stranger"),
              StatusIs(absl::StatusCode::kPermissionDenied, HasSubstr("another caller")));
  EXPECT_THAT(Ack("billing", "uri:spiffe://x/stranger"),
              StatusIs(absl::StatusCode::kPermissionDenied));
  EXPECT_THAT(Ack("nobody-has-this", "uri:spiffe://x/consumer"),
              StatusIs(absl::StatusCode::kPermissionDenied));
  EXPECT_THAT(Ack("billing", "uri:spiffe://x/consumer"), IsOk());
  EXPECT_THAT(log_.acks(), ElementsAre(Pair(1, ElementsAre("1-0"))));
}

// DeleteConsumerGroup under owners: the owner and an operator may; another caller is refused and
// nothing is deleted (the registry keeps the group, no stream loses it).
TEST_F(EventServiceGroupsTest, OnlyTheOwnerOrAnOperatorDeletesAGroup) {
  EventPolicy policy = policy_;
  policy.operators = {"uri:spiffe://x/operator"};
  EventService service(log_, policy, metrics_);
  auto remove = [&](const std::string& group, const std::string& caller) {
    return Await<bool>([&](auto done) { service.DeleteGroup(group, caller, {}, std::move(done)); });
  };
  ASSERT_THAT(Subscribe("billing", "uri:spiffe://x/consumer"), IsOk());
  ASSERT_THAT(Subscribe("audit", "uri:spiffe://x/consumer"), IsOk());
  EXPECT_THAT(remove("billing", "uri:spiffe://x/stranger"),
              StatusIs(absl::StatusCode::kPermissionDenied, HasSubstr("another caller")));
  // The same name as a DNS SAN is another identity.
  EXPECT_THAT(remove("billing", "dns:spiffe://x/consumer"),
              StatusIs(absl::StatusCode::kPermissionDenied));
  EXPECT_THAT(log_.TakeDestroys(), ElementsAre());
  EXPECT_THAT(Ack("billing", "uri:spiffe://x/consumer"), IsOk());  // still registered to it
  EXPECT_THAT(remove("billing", "uri:spiffe://x/operator"), IsOk());
  EXPECT_THAT(log_.TakeDestroys(), ElementsAre(0, 1, 2, 3));
  EXPECT_THAT(remove("audit", "uri:spiffe://x/consumer"), IsOk());
  EXPECT_THAT(log_.TakeDestroys(), ElementsAre(0, 1, 2, 3));
}

// A group an earlier release registered to a bare principal keeps its owner: the bare value is
// read by its shape (a URI has a scheme), so the URI SAN's caller owns it and a DNS SAN spelling
// the same text does not.
TEST_F(EventServiceGroupsTest, ABareOwnerOfAnEarlierReleaseIsReadByItsShape) {
  ASSERT_TRUE(Await<store::GroupClaim>([&](auto done) {
                log_.ClaimGroup("legacy", "spiffe://x/consumer", 2, {}, std::move(done));
              }).ok());
  EXPECT_THAT(Subscribe("legacy", "dns:spiffe://x/consumer"),
              StatusIs(absl::StatusCode::kPermissionDenied));
  EXPECT_THAT(Ack("legacy", "dns:spiffe://x/consumer"),
              StatusIs(absl::StatusCode::kPermissionDenied));
  EXPECT_THAT(Subscribe("legacy", "uri:spiffe://x/consumer"), IsOk());
  EXPECT_THAT(Ack("legacy", "uri:spiffe://x/consumer"), IsOk());
  EXPECT_THAT(Await<bool>([&](auto done) {
                service_.DeleteGroup("legacy", "uri:spiffe://x/consumer", {}, std::move(done));
              }),
              IsOk());
}

TEST_F(EventServiceGroupsTest, WithoutEnforcementOwnersAreRecordedButNotChecked) {
  EventPolicy open = policy_;
  open.enforce_owners = false;
  EventService service(log_, open, metrics_);
  auto subscribe = [&](const std::string& caller) {
    return Await<bool>([&](auto done) {
      service.Subscribe(
          WatchSpec{"shared", "c", {}, store::GroupStart::kEarliest, caller, std::nullopt}, {},
          std::move(done));
    });
  };
  EXPECT_THAT(subscribe("a"), IsOk());
  EXPECT_THAT(subscribe("b"), IsOk());
}

}  // namespace
}  // namespace orderhold::domain
