// ClassifyRedisError: every error code the connection layer acts on, by Redis' own error lines.
#include "server/redis/redis_reply.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace orderhold::redis {
namespace {

TEST(RedisReplyTest, ClassifiesEveryErrorTheClientActsOn) {
  struct Case {
    const char* error;
    RedisErrorKind kind;
  };
  const Case cases[] = {
      {"NOSCRIPT No matching script. Please use EVAL.", RedisErrorKind::kNoScript},
      // FCALL of a function the node lacks (FUNCTION FLUSH or DELETE), as Redis 7.0.15 says it.
      {"ERR Function not found", RedisErrorKind::kNoScript},
      {"ERR Function not foundling", RedisErrorKind::kOther},
      {"READONLY You can't write against a read only replica.", RedisErrorKind::kNotPrimary},
      {"MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.",
       RedisErrorKind::kNotPrimary},
      {"LOADING Redis is loading the dataset in memory", RedisErrorKind::kRetryable},
      {"BUSY Redis is busy running a script.", RedisErrorKind::kRetryable},
      {"NOREPLICAS Not enough good replicas to write.", RedisErrorKind::kRetryable},
      {"OOM command not allowed when used memory > 'maxmemory'.", RedisErrorKind::kRetryable},
      {"TRYAGAIN Multiple keys request during rehashing of slot", RedisErrorKind::kTryAgain},
      {"CLUSTERDOWN The cluster is down", RedisErrorKind::kTryAgain},
      {"MOVED 12304 127.0.0.1:7102", RedisErrorKind::kMoved},
      {"ASK 12304 127.0.0.1:7100", RedisErrorKind::kAsk},
      {"ERR Error running script (call to f_x): @user_script:1: oops", RedisErrorKind::kOther},
      {"WRONGTYPE Operation against a key holding the wrong kind of value", RedisErrorKind::kOther},
      {"NOPERM this user has no permissions to run the 'role' command", RedisErrorKind::kOther},
      {"READONLYISH not a code we know", RedisErrorKind::kOther},
      {"", RedisErrorKind::kOther},
  };
  for (const Case& c : cases) EXPECT_EQ(ClassifyRedisError(c.error), c.kind) << c.error;
}

TEST(RedisReplyTest, EveryErrorReplyIsUnavailableWithRedisOwnMessage) {
  const absl::Status status = RedisErrorStatus("READONLY You can't write against a replica.");
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(status.message(), "redis: READONLY You can't write against a replica.");
}

}  // namespace
}  // namespace orderhold::redis
