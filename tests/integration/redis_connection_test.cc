// RedisConnection over plain TCP against a real redis-server: replies of every shape, pipelining,
// deadlines against a hung Redis, the idle-close check, and TryRead for subscribers (a deadline
// that passes leaves the connection usable). (TLS: redis_tls_test.cc.)
#include "server/redis/redis_connection.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/common/status_macros.h"
#include "tests/testing/eventually.h"
#include "tests/testing/os_util.h"
#include "tests/testing/redis_server.h"
#include "tests/testing/status_matchers.h"

namespace orderhold::redis {
namespace {

using ::orderhold::testing::Eventually;
using ::orderhold::testing::IsOk;
using ::orderhold::testing::RedisServer;
using ::orderhold::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;
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

// A command given as a head ({"EVAL", body}) and a tail of packed arguments (RedisArgs, as every
// RedisCommand sends them) is one command, binary-safe and with empty arguments; nested replies
// of every shape keep their order and types (the reader builds RedisReply in place).
TEST_F(RedisConnectionTest, AHeadAndATailAreOneCommandAndNestedRepliesKeepTheirShape) {
  const std::string binary("v\0\r\n", 4);
  const RedisArgs tail{"1", "k", binary, ""};
  connection_->Append({"EVAL",
                       "redis.call('SET', KEYS[1], ARGV[1]) "
                       "return {redis.call('GET', KEYS[1]), ARGV[2], #ARGV, "
                       "{7, {ok='fine'}, {err='boom'}, false, {}}}"},
                      tail);
  connection_->Append({"PING"});
  ASSERT_TRUE(connection_->Flush(In(absl::Seconds(2))).ok());
  ASSERT_OK_AND_ASSIGN(RedisReply reply, connection_->Read(In(absl::Seconds(2))));
  ASSERT_EQ(reply.type, Type::kArray);
  ASSERT_EQ(reply.elements.size(), 4u);
  EXPECT_EQ(reply.elements[0].type, Type::kString);
  EXPECT_EQ(reply.elements[0].str, binary);
  EXPECT_EQ(reply.elements[1].type, Type::kString);
  EXPECT_EQ(reply.elements[1].str, "");
  EXPECT_EQ(reply.elements[2].type, Type::kInteger);
  EXPECT_EQ(reply.elements[2].integer, 2);
  const RedisReply& nested = reply.elements[3];
  ASSERT_EQ(nested.type, Type::kArray);
  ASSERT_EQ(nested.elements.size(), 5u);
  EXPECT_EQ(nested.elements[0].integer, 7);
  EXPECT_EQ(nested.elements[1].type, Type::kStatus);
  EXPECT_EQ(nested.elements[1].str, "fine");
  EXPECT_EQ(nested.elements[2].type, Type::kError);
  EXPECT_EQ(nested.elements[2].str, "boom");
  EXPECT_EQ(nested.elements[3].type, Type::kNil);
  EXPECT_EQ(nested.elements[4].type, Type::kArray);
  EXPECT_TRUE(nested.elements[4].elements.empty());
  ASSERT_OK_AND_ASSIGN(RedisReply pong, connection_->Read(In(absl::Seconds(2))));
  EXPECT_EQ(pong.str, "PONG");
  EXPECT_FALSE(connection_->broken());
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

// TryRead, for a subscriber: a deadline that passes with nothing to read is not an error and the
// connection stays usable; a pushed message is read; EOF is UNAVAILABLE.
TEST_F(RedisConnectionTest, TryReadWaitsForPushedMessagesWithoutBreaking) {
  ASSERT_OK_AND_ASSIGN(RedisReply subscribed,
                       connection_->Run({"SSUBSCRIBE", "ch"}, In(absl::Seconds(2))));
  ASSERT_EQ(subscribed.type, Type::kArray);
  const absl::Time start = absl::Now();
  ASSERT_OK_AND_ASSIGN(std::optional<RedisReply> nothing,
                       connection_->TryRead(In(absl::Milliseconds(50))));
  EXPECT_FALSE(nothing.has_value());
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(45));
  EXPECT_FALSE(connection_->broken());
  // A deadline already past only looks.
  ASSERT_OK_AND_ASSIGN(nothing, connection_->TryRead(absl::InfinitePast()));
  EXPECT_FALSE(nothing.has_value());
  // Two messages in one read: the second is served from the buffer, even with a past deadline.
  ASSERT_TRUE(redis_->Command({"SPUBLISH", "ch", "one"}).ok());
  ASSERT_TRUE(redis_->Command({"SPUBLISH", "ch", "two"}).ok());
  ASSERT_TRUE(Eventually([&] {
    absl::StatusOr<std::optional<RedisReply>> got = connection_->TryRead(In(absl::Seconds(1)));
    return got.ok() && got->has_value() && (**got).elements.size() == 3 &&
           (**got).elements[2].str == "one";
  }));
  ASSERT_TRUE(Eventually([&] {
    absl::StatusOr<std::optional<RedisReply>> got = connection_->TryRead(absl::InfinitePast());
    return got.ok() && got->has_value() && (**got).elements[2].str == "two";
  }));
  // Still a working connection.
  ASSERT_OK_AND_ASSIGN(RedisReply pong, connection_->Run({"PING"}, In(absl::Seconds(2))));
  EXPECT_EQ(pong.type, Type::kArray);  // RESP2 answers PING in subscribed mode with {"pong", ""}
  ASSERT_TRUE(redis_->Command({"CLIENT", "KILL", "TYPE", "pubsub"}).ok());
  EXPECT_THAT(connection_->TryRead(In(absl::Seconds(2))).status(),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("closed")));
  EXPECT_TRUE(connection_->broken());
}

// Bytes of a reply that is not complete at the deadline are kept for the next TryRead (a fake
// server that sends a reply in two parts).
TEST(RedisConnectionTryReadTest, KeepsAPartialReplyAcrossDeadlines) {
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(listener, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  ASSERT_EQ(listen(listener, 1), 0);
  socklen_t length = sizeof(address);
  ASSERT_EQ(getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length), 0);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<RedisConnection> connection,
                       RedisConnection::Connect(HostPort{"127.0.0.1", ntohs(address.sin_port)},
                                                nullptr, In(absl::Seconds(2))));
  const int peer = accept(listener, nullptr, nullptr);
  ASSERT_GE(peer, 0);
  const std::string first = "*3\r\n$8\r\nsmessage\r\n$2\r\nch\r\n$3\r\nab";
  const std::string rest = "c\r\n";
  ASSERT_EQ(write(peer, first.data(), first.size()), static_cast<ssize_t>(first.size()));
  ASSERT_OK_AND_ASSIGN(std::optional<RedisReply> partial,
                       connection->TryRead(In(absl::Milliseconds(50))));
  EXPECT_FALSE(partial.has_value());
  EXPECT_FALSE(connection->broken());
  ASSERT_EQ(write(peer, rest.data(), rest.size()), static_cast<ssize_t>(rest.size()));
  ASSERT_OK_AND_ASSIGN(std::optional<RedisReply> whole, connection->TryRead(In(absl::Seconds(2))));
  ASSERT_TRUE(whole.has_value());
  ASSERT_EQ(whole->elements.size(), 3u);
  EXPECT_EQ(whole->elements[2].str, "abc");
  close(peer);
  close(listener);
}

TEST(HostPortTest, RendersIpv6InBrackets) {
  EXPECT_EQ((HostPort{"redis.local", 6380}).ToString(), "redis.local:6380");
  EXPECT_EQ((HostPort{"::1", 6379}).ToString(), "[::1]:6379");
}

// --redis_password_file: the password is read at every new connection, so a rotation (an ACL user
// holding the old and the new password for a while) needs no restart; a trailing newline is not
// part of it; an unreadable file fails the connection, naming the file and never a password.
TEST_F(RedisConnectionTest, APasswordFileIsReadAtEveryNewConnection) {
  ASSERT_OK_AND_ASSIGN(std::string dir, testing::MakeTempDir("password-file"));
  const std::string file = dir + "/password";
  auto write = [&](const std::string& text) { std::ofstream(file) << text; };
  ASSERT_THAT(redis_->Command({"ACL", "SETUSER", "app", "on", ">first", "~*", "+@all"}), IsOk());
  NodeOptions node;
  node.user = "app";
  node.password_file = file;
  auto whoami = [&]() -> absl::StatusOr<std::string> {
    ORDERHOLD_ASSIGN_OR_RETURN(
        auto c, ConnectAuthenticated(address(), node, "", "test", In(absl::Seconds(2))));
    c->Append({"ACL", "WHOAMI"});
    ORDERHOLD_RETURN_IF_ERROR(c->Flush(In(absl::Seconds(2))));
    ORDERHOLD_ASSIGN_OR_RETURN(RedisReply reply, c->Read(In(absl::Seconds(2))));
    return reply.str;
  };
  write("first\n");  // as `kubectl create secret --from-file` or an editor leaves it
  EXPECT_EQ(whoami().value_or("error"), "app");
  // The rotation: the user takes the new password beside the old, the file changes, the old goes.
  ASSERT_THAT(redis_->Command({"ACL", "SETUSER", "app", ">second"}), IsOk());
  write("second");
  ASSERT_THAT(redis_->Command({"ACL", "SETUSER", "app", "<first"}), IsOk());
  EXPECT_EQ(whoami().value_or("error"), "app");
  write("first");
  EXPECT_THAT(whoami(), StatusIs(absl::StatusCode::kUnavailable, HasSubstr("refused AUTH")));
  std::filesystem::remove(file);
  const absl::Status missing = whoami().status();
  EXPECT_THAT(missing, StatusIs(absl::StatusCode::kUnavailable,
                                AllOf(HasSubstr("password file"), HasSubstr(file))));
  EXPECT_THAT(missing.message(), Not(HasSubstr("second")));
  std::filesystem::remove_all(dir);
}
}  // namespace
}  // namespace orderhold::redis
