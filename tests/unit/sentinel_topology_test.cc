// SentinelTopology's pure parts (sentinel_internal): the replies of get-master-addr-by-name,
// +switch-master messages, AUTH, the discovery errors; and Create's validation. The topology
// against real sentinels is in tests/integration/sentinel_topology_test.cc.
#include "server/redis/sentinel_topology.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace orderhold::redis {
namespace {

using ::orderhold::testing::IsOk;
using ::orderhold::testing::StatusIs;
using sentinel_internal::MasterSwitch;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::Optional;
using Type = RedisReply::Type;

constexpr auto kUnavailable = absl::StatusCode::kUnavailable;
const HostPort kSentinel{"127.0.0.1", 26379};

// Replies built field by field (designated initializers of RedisReply trip
// -Wmissing-field-initializers).
RedisReply Reply(Type type, std::string text = "") {
  RedisReply reply;
  reply.type = type;
  reply.str = std::move(text);
  return reply;
}
RedisReply Str(std::string text) { return Reply(Type::kString, std::move(text)); }
RedisReply Array(std::vector<RedisReply> elements) {
  RedisReply reply = Reply(Type::kArray);
  reply.elements = std::move(elements);
  return reply;
}
RedisReply Message(std::string channel, std::string payload) {
  return Array({Str("message"), Str(std::move(channel)), Str(std::move(payload))});
}

TEST(SentinelMasterAddrTest, AnAddressIsTheIpAndPort) {
  auto address =
      sentinel_internal::ParseMasterAddrReply(Array({Str("10.0.0.7"), Str("6380")}), kSentinel);
  ASSERT_THAT(address, IsOk());
  EXPECT_THAT(*address, Optional(HostPort{"10.0.0.7", 6380}));
}

TEST(SentinelMasterAddrTest, NilMeansTheSentinelDoesNotKnowTheName) {
  auto address = sentinel_internal::ParseMasterAddrReply(RedisReply{}, kSentinel);
  ASSERT_THAT(address, IsOk());
  EXPECT_EQ(*address, std::nullopt);
}

TEST(SentinelMasterAddrTest, AnErrorReplyNamesTheSentinelAndQuotesIt) {
  const RedisReply error = Reply(Type::kError, "NOAUTH Authentication required.");
  EXPECT_THAT(sentinel_internal::ParseMasterAddrReply(error, kSentinel),
              StatusIs(kUnavailable, AllOf(HasSubstr("127.0.0.1:26379"),
                                           HasSubstr("NOAUTH Authentication required."))));
}

TEST(SentinelMasterAddrTest, OtherShapesAreErrors) {
  for (const RedisReply& reply :
       {Array({Str("10.0.0.7")}), Array({Str("10.0.0.7"), Str("0")}),
        Array({Str("10.0.0.7"), Str("65536")}), Array({Str("10.0.0.7"), Str("63x")}),
        Array({Str(""), Str("1")}), Str("10.0.0.7:6379"), Reply(Type::kInteger)}) {
    EXPECT_THAT(sentinel_internal::ParseMasterAddrReply(reply, kSentinel),
                StatusIs(kUnavailable, HasSubstr("with no address")));
  }
}

TEST(SentinelSwitchMasterTest, OurMastersSwitchGivesBothAddresses) {
  EXPECT_THAT(sentinel_internal::ParseSwitchMaster(
                  Message("+switch-master", "mymaster 127.0.0.1 6400 127.0.0.1 6401"), "mymaster"),
              Optional(MasterSwitch{{"127.0.0.1", 6400}, {"127.0.0.1", 6401}}));
  EXPECT_THAT(sentinel_internal::ParseSwitchMaster(
                  Message("+switch-master", "m ::1 6400 fe80::1 6401"), "m"),
              Optional(MasterSwitch{{"::1", 6400}, {"fe80::1", 6401}}));
}

TEST(SentinelSwitchMasterTest, AnythingElseIsIgnored) {
  const std::vector<RedisReply> ignored = {
      // another master, also one whose name starts like ours
      Message("+switch-master", "other 127.0.0.1 6400 127.0.0.1 6401"),
      Message("+switch-master", "mymaster2 127.0.0.1 6400 127.0.0.1 6401"),
      // another channel, the subscribe confirmation, a pong
      Message("+sdown", "mymaster 127.0.0.1 6400 127.0.0.1 6401"),
      Array({Str("subscribe"), Str("+switch-master"), Reply(Type::kInteger)}),
      Array({Str("pong"), Str("")}),
      // malformed payloads
      Message("+switch-master", "mymaster 127.0.0.1 6400 127.0.0.1"),
      Message("+switch-master", "mymaster 127.0.0.1 6400 127.0.0.1 port"),
      Message("+switch-master", "mymaster 127.0.0.1 6400 127.0.0.1 6401 extra"),
      Reply(Type::kError, "ERR")};
  for (const RedisReply& reply : ignored) {
    EXPECT_EQ(sentinel_internal::ParseSwitchMaster(reply, "mymaster"), std::nullopt);
  }
}

TEST(SentinelPongTest, OnlyThePongArray) {
  EXPECT_TRUE(sentinel_internal::IsSubscribedPong(Array({Str("pong"), Str("")})));
  EXPECT_FALSE(sentinel_internal::IsSubscribedPong(Message("+switch-master", "pong")));
  EXPECT_FALSE(sentinel_internal::IsSubscribedPong(Reply(Type::kStatus, "PONG")));
}

TEST(SentinelAuthTest, UserAndPasswordPasswordOnlyOrNone) {
  EXPECT_THAT(RedisAuthCommand("u", "p"), ElementsAre("AUTH", "u", "p"));
  EXPECT_THAT(RedisAuthCommand("", "p"), ElementsAre("AUTH", "p"));
  EXPECT_THAT(RedisAuthCommand("", ""), IsEmpty());
}

// One sentinel's answer; built one by one (GCC 12 sees a false maybe-uninitialized in nested
// brace lists of strings).
sentinel_internal::Attempt AttemptOn(int port, absl::Status error) {
  sentinel_internal::Attempt attempt;
  attempt.sentinel.port = port;
  attempt.error = std::move(error);
  return attempt;
}

TEST(SentinelDiscoveryErrorTest, NoneReachableListsEveryError) {
  std::vector<sentinel_internal::Attempt> attempts;
  attempts.push_back(AttemptOn(1, absl::UnavailableError("redis: connect to 127.0.0.1:1: x")));
  attempts.push_back(AttemptOn(2, absl::DeadlineExceededError("redis: 127.0.0.1:2 slow")));
  EXPECT_THAT(
      sentinel_internal::DiscoveryError("mymaster", attempts),
      StatusIs(kUnavailable,
               AllOf(HasSubstr("redis sentinel: no sentinel reachable (tried 2: "),
                     HasSubstr("connect to 127.0.0.1:1: x; "), HasSubstr("127.0.0.1:2 slow"))));
}

TEST(SentinelDiscoveryErrorTest, UnknownMasterWhenOneAnsweredEvenIfOthersFailed) {
  std::vector<sentinel_internal::Attempt> attempts;
  attempts.push_back(AttemptOn(1, absl::UnavailableError("refused")));
  attempts.push_back(AttemptOn(2, absl::OkStatus()));
  attempts.push_back(AttemptOn(3, absl::OkStatus()));
  EXPECT_THAT(
      sentinel_internal::DiscoveryError("mymaster", attempts),
      StatusIs(kUnavailable, AllOf(HasSubstr("redis sentinel: no sentinel knows master 'mymaster'"),
                                   HasSubstr("127.0.0.1:2, 127.0.0.1:3"), HasSubstr("refused"),
                                   Not(HasSubstr("reachable")))));
}

TEST(SentinelTopologyCreateTest, RefusesIncompleteOptionsNamingTheFlag) {
  const auto create = [](void (*edit)(SentinelOptions&)) {
    SentinelOptions options;
    options.sentinels = {kSentinel};
    options.master_name = "mymaster";
    edit(options);
    return SentinelTopology::Create(std::move(options)).status();
  };
  constexpr auto kInvalid = absl::StatusCode::kInvalidArgument;
  EXPECT_THAT(create([](SentinelOptions& o) { o.sentinels.clear(); }),
              StatusIs(kInvalid, HasSubstr("redis_url")));
  EXPECT_THAT(create([](SentinelOptions& o) { o.master_name.clear(); }),
              StatusIs(kInvalid, HasSubstr("redis_sentinel_master")));
  // (--redis_sentinel_username without --redis_sentinel_password is refused by config.cc first.)
  EXPECT_THAT(create([](SentinelOptions& o) { o.node.user = "u"; }),
              StatusIs(kInvalid, HasSubstr("user is given without a password")));
  EXPECT_THAT(create([](SentinelOptions& o) { o.poll_interval = absl::ZeroDuration(); }),
              StatusIs(kInvalid, HasSubstr("poll_interval")));
  EXPECT_THAT(create([](SentinelOptions& o) { o.node.client_name = "two words"; }),
              StatusIs(kInvalid, HasSubstr("client_name")));
}

}  // namespace
}  // namespace orderhold::redis
