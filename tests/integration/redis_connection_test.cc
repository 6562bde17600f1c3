// RedisConnection over plain TCP against a real redis-server: replies of every shape, pipelining,
// deadlines against a hung Redis, and the idle-close check. (TLS: redis_tls_test.cc.)
#include "server/store/redis_connection.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/eventually.h"
#include "tests/testing/redis_server.h"
#include "tests/testing/status_matchers.h"

namespace orderhold::store {
namespace {

using ::orderhold::testing::Eventually;
using ::orderhold::testing::RedisServer;
using ::orderhold::testing::StatusIs;
using ::testing::HasSubstr;
using Type = RedisReply::Type;

absl::Time In(absl::Duration d) { return absl::Now() + d; }

class RedisConnectionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK_AND_ASSIGN(redis_, RedisServer::Start());
    ASSERT_OK_AND_ASSIGN(connection_,
                         RedisConnection::Connect(address(), nullptr, In(absl::Seconds(2))));
  }
  HostPort address() const { return HostPort{"127.0.0.1", redis_->port()}; }

  std::unique_ptr<RedisServer> redis_;
  std::unique_ptr<RedisConnection> connection_;
};

TEST_F(RedisConnectionTest, RepliesOfEveryShapeIncludingErrorsAsReplies) {
  ASSERT_OK_AND_ASSIGN(RedisReply pong, connection_->Run({"PING"}, In(absl::Seconds(2))));
  EXPECT_EQ(pong.type, Type::kStatus);
  EXPECT_EQ(pong.str, "PONG");
  const std::string binary("a\0b\r\nc", 6);
  ASSERT_OK_AND_ASSIGN(RedisReply set,
                       connection_->Run({"SET", "k", binary}, In(absl::Seconds(2))));
  EXPECT_EQ(set.str, "OK");
  ASSERT_OK_AND_ASSIGN(RedisReply get, connection_->Run({"GET", "k"}, In(absl::Seconds(2))));
  EXPECT_EQ(get.type, Type::kString);
  EXPECT_EQ(get.str, binary);
  ASSERT_OK_AND_ASSIGN(RedisReply nil, connection_->Run({"GET", "none"}, In(absl::Seconds(2))));
  EXPECT_EQ(nil.type, Type::kNil);
  ASSERT_OK_AND_ASSIGN(RedisReply list,
                       connection_->Run({"RPUSH", "l", "x", "y"}, In(absl::Seconds(2))));
  EXPECT_EQ(list.type, Type::kInteger);
  EXPECT_EQ(list.integer, 2);
  ASSERT_OK_AND_ASSIGN(RedisReply range,
                       connection_->Run({"LRANGE", "l", "0", "-1"}, In(absl::Seconds(2))));
  ASSERT_EQ(range.type, Type::kArray);
  ASSERT_EQ(range.elements.size(), 2u);
  EXPECT_EQ(range.elements[1].str, "y");
  ASSERT_OK_AND_ASSIGN(RedisReply error, connection_->Run({"INCR", "l"}, In(absl::Seconds(2))));
  EXPECT_EQ(error.type, Type::kError);
  EXPECT_THAT(error.str, ::testing::StartsWith("WRONGTYPE"));
  EXPECT_FALSE(connection_->broken());  // an error reply leaves the stream in step
}

TEST_F(RedisConnectionTest, PipelinesManyCommandsInOneFlushAndLargeValues) {
  const std::string big(1 << 20, 'x');  // larger than any socket buffer: partial writes and reads
  connection_->Append({"SET", "big", big});
  for (int i = 0; i < 1000; ++i) connection_->Append({"INCR", "n"});
  connection_->Append({"GET", "big"});
  ASSERT_TRUE(connection_->Flush(In(absl::Seconds(5))).ok());
  ASSERT_OK_AND_ASSIGN(RedisReply ok, connection_->Read(In(absl::Seconds(5))));
  EXPECT_EQ(ok.str, "OK");
  for (int i = 1; i <= 1000; ++i) {
    ASSERT_OK_AND_ASSIGN(RedisReply n, connection_->Read(In(absl::Seconds(5))));
    ASSERT_EQ(n.integer, i);
  }
  ASSERT_OK_AND_ASSIGN(RedisReply back, connection_->Read(In(absl::Seconds(5))));
  EXPECT_EQ(back.str, big);
}

TEST_F(RedisConnectionTest, HungRedisMissesTheDeadlineAndBreaksTheConnection) {
  ASSERT_TRUE(redis_->Pause().ok());
  const absl::Time start = absl::Now();
  EXPECT_THAT(connection_->Run({"PING"}, In(absl::Milliseconds(200))).status(),
              StatusIs(absl::StatusCode::kDeadlineExceeded, HasSubstr("did not answer")));
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));  // bounded by the deadline, not by Redis
  EXPECT_TRUE(connection_->broken());
  EXPECT_THAT(connection_->Run({"PING"}, In(absl::Seconds(1))).status(),
              StatusIs(absl::StatusCode::kUnavailable));
  ASSERT_TRUE(redis_->Resume().ok());
}

TEST_F(RedisConnectionTest, IdleConnectionClosedByRedisIsNoticedWithoutBlocking) {
  EXPECT_FALSE(connection_->PeerClosed());
  ASSERT_TRUE(redis_->Command({"CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"}).ok());
  EXPECT_TRUE(Eventually([&] { return connection_->PeerClosed(); }, absl::Seconds(5)));
  EXPECT_THAT(connection_->Run({"PING"}, In(absl::Seconds(1))).status(),
              StatusIs(absl::StatusCode::kUnavailable));
}

TEST_F(RedisConnectionTest, RedisGoneIsUnavailableNamingTheAddress) {
  ASSERT_TRUE(redis_->Stop().ok());
  EXPECT_THAT(connection_->Run({"PING"}, In(absl::Seconds(1))).status(),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr(address().ToString())));
  EXPECT_THAT(RedisConnection::Connect(address(), nullptr, In(absl::Seconds(1))).status(),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("refused")));
  EXPECT_THAT(RedisConnection::Connect(HostPort{"no-such-host.invalid", 6379}, nullptr,
                                       In(absl::Seconds(1)))
                  .status(),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("cannot resolve")));
}

TEST(HostPortTest, RendersIpv6InBrackets) {
  EXPECT_EQ((HostPort{"redis.local", 6380}).ToString(), "redis.local:6380");
  EXPECT_EQ((HostPort{"::1", 6379}).ToString(), "[::1]:6379");
}

}  // namespace
}  // namespace orderhold::store
