// SentinelTopology against real sentinels (tests/testing/sentinel_group.h: a primary, a replica
// and three sentinels on free ports): resolution in order, the two discovery errors, sentinels
// down at start, every way a failover is seen (+switch-master, poll, resubscription after the
// sentinel dropped the subscription, ReportNotPrimary), and sentinel AUTH. Each failover path
// prints how long it took ("[ MEASURED ]" lines).
#include "server/redis/sentinel_topology.h"

#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "prometheus/counter.h"
#include "tests/testing/eventually.h"
#include "tests/testing/sentinel_group.h"
#include "tests/testing/status_matchers.h"

namespace orderhold::redis {
namespace {

using ::orderhold::testing::Eventually;
using ::orderhold::testing::IsOk;
using ::orderhold::testing::SentinelGroup;
using ::orderhold::testing::SentinelGroupOptions;
using ::orderhold::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr auto kUnavailable = absl::StatusCode::kUnavailable;
constexpr absl::Duration kResolveTimeout = absl::Seconds(10);
// Far longer than any wait here: a topology with this poll interval can only learn of a failover
// through pub/sub or ReportNotPrimary.
constexpr absl::Duration kNoPoll = absl::Seconds(60);

std::unique_ptr<SentinelGroup> StartGroup(SentinelGroupOptions options = {}) {
  absl::StatusOr<std::unique_ptr<SentinelGroup>> group = SentinelGroup::Start(std::move(options));
  EXPECT_THAT(group, IsOk());
  return group.ok() ? std::move(*group) : nullptr;
}

// Options for `group`'s sentinels, in the order of `sentinel_indices`.
redis::SentinelOptions OptionsFor(SentinelGroup& group,
                                  std::vector<int> sentinel_indices = {0, 1, 2}) {
  SentinelOptions options;
  for (int i : sentinel_indices) options.sentinels.push_back({"127.0.0.1", group.sentinel_port(i)});
  options.master_name = group.master_name();
  options.poll_interval = absl::Milliseconds(200);
  return options;
}

std::unique_ptr<SentinelTopology> CreateTopology(SentinelOptions options) {
  absl::StatusOr<std::unique_ptr<SentinelTopology>> topology =
      SentinelTopology::Create(std::move(options));
  EXPECT_THAT(topology, IsOk());
  return topology.ok() ? std::move(*topology) : nullptr;
}

bool PrimaryIs(SentinelTopology& topology, int port) {
  const absl::StatusOr<HostPort> primary = topology.NodeFor(RedisTopology::kAnySlot);
  return primary.ok() && *primary == HostPort{"127.0.0.1", port};
}

// Waits until NodeFor's error contains `text`; returns the last answer's status.
absl::Status WaitForError(SentinelTopology& topology, absl::string_view text) {
  absl::Status last;
  Eventually([&] {
    last = topology.NodeFor(RedisTopology::kAnySlot).status();
    return absl::StrContains(last.message(), text);
  });
  return last;
}

// The clients of sentinel `i` (CLIENT LIST [TYPE pubsub]) whose line contains every one of
// `fields` (e.g. "name=orderhold-poll").
int CountClients(SentinelGroup& group, int i, std::vector<std::string> fields,
                 bool pubsub_only = false) {
  std::vector<std::string> command = {"CLIENT", "LIST"};
  if (pubsub_only) command.insert(command.end(), {"TYPE", "pubsub"});
  absl::StatusOr<std::string> list = group.SentinelCommand(i, command);
  if (!list.ok()) return -1;
  int count = 0;
  for (absl::string_view line : absl::StrSplit(*list, '\n', absl::SkipWhitespace())) {
    bool all = true;
    for (const std::string& field : fields) all = all && absl::StrContains(line, field);
    count += all ? 1 : 0;
  }
  return count;
}

bool SubscribedOn(SentinelGroup& group, int i, const std::string& client_name = "orderhold") {
  return CountClients(group, i, {absl::StrCat("name=", client_name, "-subscription")},
                      /*pubsub_only=*/true) > 0;
}

void ReportMeasured(absl::string_view what, absl::Duration took) {
  std::cout << "[ MEASURED ] " << what << ": " << absl::FormatDuration(took) << std::endl;
}

TEST(SentinelTopologyTest, ResolvesInOrderAndNamesAnUnknownMaster) {
  std::unique_ptr<SentinelGroup> group = StartGroup();
  ASSERT_NE(group, nullptr);
  ASSERT_OK_AND_ASSIGN(const int primary_port, group->PrimaryPort());

  std::unique_ptr<SentinelTopology> topology = CreateTopology(OptionsFor(*group));
  ASSERT_NE(topology, nullptr);
  EXPECT_TRUE(Eventually([&] { return PrimaryIs(*topology, primary_port); }, kResolveTimeout))
      << topology->NodeFor(RedisTopology::kAnySlot).status();
  EXPECT_THAT(topology->NodeFor(12345), IsOk());
  EXPECT_EQ(topology->generation(), 1u);  // first primary: a change, not a failover
  EXPECT_TRUE(topology->verify_role());

  SentinelOptions unknown = OptionsFor(*group);
  unknown.master_name = "no-such-master";
  std::unique_ptr<SentinelTopology> lost = CreateTopology(std::move(unknown));
  ASSERT_NE(lost, nullptr);
  EXPECT_THAT(WaitForError(*lost, "knows"),
              StatusIs(kUnavailable,
                       AllOf(HasSubstr("redis sentinel: no sentinel knows master 'no-such-master'"),
                             Not(HasSubstr("reachable")))));

  topology.reset();  // so that only `second` below talks to the sentinels
  lost.reset();
  // First sentinel down: the second answers and moves to the front, so once the first is back it
  // is not asked (nor subscribed to) again.
  ASSERT_THAT(group->StopSentinel(0), IsOk());
  std::unique_ptr<SentinelTopology> second = CreateTopology(OptionsFor(*group));
  ASSERT_NE(second, nullptr);
  EXPECT_TRUE(Eventually([&] { return PrimaryIs(*second, primary_port); }, kResolveTimeout))
      << second->NodeFor(RedisTopology::kAnySlot).status();
  ASSERT_THAT(group->RestartSentinel(0), IsOk());
  // Several polls (200 ms) go by; each would have gone to sentinel 0 had it stayed first.
  absl::SleepFor(absl::Seconds(1));
  EXPECT_EQ(CountClients(*group, 0, {"name=orderhold-"}), 0);
  EXPECT_GE(CountClients(*group, 1, {"name=orderhold-poll", "cmd=sentinel"}), 1);
  EXPECT_TRUE(SubscribedOn(*group, 1));

  // Stopping does not wait for a poll interval.
  const absl::Time stop = absl::Now();
  second.reset();
  EXPECT_LT(absl::Now() - stop, absl::Seconds(2));
}

TEST(SentinelTopologyTest, AllSentinelsDownAtStartThenResolvesWhenTheyAreBack) {
  std::unique_ptr<SentinelGroup> group = StartGroup();
  ASSERT_NE(group, nullptr);
  ASSERT_OK_AND_ASSIGN(const int primary_port, group->PrimaryPort());
  for (int i = 0; i < group->sentinel_count(); ++i) ASSERT_THAT(group->StopSentinel(i), IsOk());

  std::unique_ptr<SentinelTopology> topology = CreateTopology(OptionsFor(*group));
  ASSERT_NE(topology, nullptr);
  EXPECT_THAT(
      WaitForError(*topology, "reachable"),
      StatusIs(kUnavailable, AllOf(HasSubstr("redis sentinel: no sentinel reachable (tried 3: "),
                                   HasSubstr(absl::StrCat(":", group->sentinel_port(0))),
                                   HasSubstr(absl::StrCat(":", group->sentinel_port(2))))));

  for (int i = 0; i < group->sentinel_count(); ++i) ASSERT_THAT(group->RestartSentinel(i), IsOk());
  EXPECT_TRUE(Eventually([&] { return PrimaryIs(*topology, primary_port); }, kResolveTimeout))
      << topology->NodeFor(RedisTopology::kAnySlot).status();
  EXPECT_TRUE(Eventually([&] { return SubscribedOn(*group, 0); }, kResolveTimeout));
}

// One SENTINEL FAILOVER, watched by four topologies, one per way of learning about it:
// - `pubsub`: subscribed (on sentinel 1), no poll: +switch-master;
// - `poll`: no subscription, polls every 200 ms;
// - `resubscribed`: subscribed on sentinel 0, which then drops its pub/sub clients; no poll: the
//   subscription must come back by itself to see the switch;
// - `reported`: no subscription, no poll: ReportNotPrimary(old primary) once the sentinels know.
TEST(SentinelTopologyTest, FailoverIsSeenThroughEveryPath) {
  std::unique_ptr<SentinelGroup> group = StartGroup();
  ASSERT_NE(group, nullptr);
  ASSERT_OK_AND_ASSIGN(const int old_port, group->PrimaryPort());
  const int new_port = group->node(1).port();
  ASSERT_NE(old_port, new_port);

  struct Watcher {
    std::string name;
    prometheus::Counter failovers;
    std::unique_ptr<SentinelTopology> topology;
    uint64_t generation = 0;
    absl::Duration took = absl::InfiniteDuration();
  };
  auto make = [&](std::string name, std::vector<int> order, bool subscribe, absl::Duration poll) {
    auto watcher = std::make_unique<Watcher>();
    watcher->name = std::move(name);
    SentinelOptions options = OptionsFor(*group, std::move(order));
    options.subscribe = subscribe;
    options.poll_interval = poll;
    options.node.client_name = absl::StrCat("orderhold-", watcher->name);
    options.failovers = &watcher->failovers;
    watcher->topology = CreateTopology(std::move(options));
    return watcher;
  };
  std::vector<std::unique_ptr<Watcher>> watchers;
  watchers.push_back(make("pubsub", {1, 2, 0}, true, kNoPoll));
  watchers.push_back(make("poll", {0, 1, 2}, false, absl::Milliseconds(200)));
  watchers.push_back(make("resubscribed", {0, 1, 2}, true, kNoPoll));
  watchers.push_back(make("reported", {0, 1, 2}, false, kNoPoll));
  Watcher& reported = *watchers[3];
  for (auto& watcher : watchers) {
    ASSERT_NE(watcher->topology, nullptr);
    ASSERT_TRUE(
        Eventually([&] { return PrimaryIs(*watcher->topology, old_port); }, kResolveTimeout))
        << watcher->name << ": " << watcher->topology->NodeFor(RedisTopology::kAnySlot).status();
    watcher->generation = watcher->topology->generation();
  }
  ASSERT_TRUE(Eventually([&] { return SubscribedOn(*group, 1, "orderhold-pubsub"); }));
  ASSERT_TRUE(Eventually([&] { return SubscribedOn(*group, 0, "orderhold-resubscribed"); }));
  EXPECT_FALSE(SubscribedOn(*group, 0, "orderhold-poll"));

  // The sentinel drops the subscription; it comes back (on sentinel 0, first in its order).
  ASSERT_OK_AND_ASSIGN(const int killed, group->KillSentinelPubsubClients(0));
  EXPECT_GE(killed, 1);
  const absl::Time killed_at = absl::Now();
  ASSERT_TRUE(Eventually([&] { return SubscribedOn(*group, 0, "orderhold-resubscribed"); }));
  ReportMeasured("pub/sub clients killed -> subscribed again", absl::Now() - killed_at);

  const absl::Time start = absl::Now();
  ASSERT_THAT(group->Failover(), IsOk());
  bool reported_yet = false;
  absl::Duration sentinels_took = absl::InfiniteDuration();
  absl::Time reported_at;
  Eventually(
      [&] {
        bool all = true;
        for (auto& watcher : watchers) {
          if (watcher->took == absl::InfiniteDuration() &&
              PrimaryIs(*watcher->topology, new_port)) {
            watcher->took = absl::Now() - (watcher.get() == &reported ? reported_at : start);
          }
          all = all && watcher->took != absl::InfiniteDuration();
        }
        // Once a sentinel answers the new address, the data layer would have seen READONLY (or a
        // ROLE "slave") on the old primary sooner or later: report it.
        if (!reported_yet && group->PrimaryPort().value_or(0) == new_port) {
          sentinels_took = absl::Now() - start;
          EXPECT_TRUE(PrimaryIs(*reported.topology, old_port)) << "learnt before the report";
          reported_at = absl::Now();
          reported.topology->ReportNotPrimary({"127.0.0.1", old_port});
          reported_yet = true;
        }
        return all;
      },
      absl::Seconds(15), absl::Milliseconds(5));

  ReportMeasured("SENTINEL FAILOVER -> a sentinel answers the new primary", sentinels_took);
  for (auto& watcher : watchers) {
    SCOPED_TRACE(watcher->name);
    EXPECT_TRUE(PrimaryIs(*watcher->topology, new_port))
        << watcher->topology->NodeFor(RedisTopology::kAnySlot).status();
    EXPECT_EQ(watcher->topology->generation(), watcher->generation + 1);
    EXPECT_EQ(watcher->failovers.Value(), 1);
    ReportMeasured(watcher.get() == &reported
                       ? "ReportNotPrimary -> NodeFor changed"
                       : absl::StrCat("SENTINEL FAILOVER -> NodeFor changed (", watcher->name, ")"),
                   watcher->took);
  }
}

TEST(SentinelTopologyTest, AuthenticatesToSentinels) {
  SentinelGroupOptions options;
  options.sentinel_password = "sentinel-secret";
  options.sentinel_acl_users = {
      "ohsentinel on >spw -@all +auth +client|setname +ping +sentinel|get-master-addr-by-name "
      "+subscribe &*",
      // The guide's minimal client ACL has no SUBSCRIBE: polling must do.
      "ohpoll on >ppw -@all +auth +client|setname +ping +sentinel|get-master-addr-by-name"};
  std::unique_ptr<SentinelGroup> group = StartGroup(std::move(options));
  ASSERT_NE(group, nullptr);
  ASSERT_OK_AND_ASSIGN(const int primary_port, group->PrimaryPort());

  auto with = [&](std::string username, std::string password) {
    SentinelOptions topology_options = OptionsFor(*group);
    topology_options.node.user = std::move(username);
    topology_options.node.password = std::move(password);
    return CreateTopology(std::move(topology_options));
  };
  std::unique_ptr<SentinelTopology> none = with("", "");
  std::unique_ptr<SentinelTopology> wrong = with("", "not-the-password");
  std::unique_ptr<SentinelTopology> password = with("", "sentinel-secret");
  std::unique_ptr<SentinelTopology> user = with("ohsentinel", "spw");
  std::unique_ptr<SentinelTopology> poll_only = with("ohpoll", "ppw");
  for (auto* topology : {none.get(), wrong.get(), password.get(), user.get(), poll_only.get()}) {
    ASSERT_NE(topology, nullptr);
  }

  EXPECT_THAT(WaitForError(*none, "reachable"),
              StatusIs(kUnavailable,
                       AllOf(HasSubstr("no sentinel reachable (tried 3"), HasSubstr("NOAUTH"))));
  EXPECT_THAT(WaitForError(*wrong, "reachable"),
              StatusIs(kUnavailable, AllOf(HasSubstr("refused AUTH: WRONGPASS"),
                                           Not(HasSubstr("not-the-password")))));
  for (auto* topology : {password.get(), user.get(), poll_only.get()}) {
    EXPECT_TRUE(Eventually([&] { return PrimaryIs(*topology, primary_port); }, kResolveTimeout))
        << topology->NodeFor(RedisTopology::kAnySlot).status();
  }
  EXPECT_TRUE(Eventually([&] {
    return CountClients(*group, 0, {"name=orderhold-subscription", "user=ohsentinel"}, true) > 0;
  }));
  EXPECT_EQ(CountClients(*group, 0, {"user=ohpoll"}, /*pubsub_only=*/true), 0);
}

}  // namespace
}  // namespace orderhold::redis
