// RedisArgs: packed command arguments read back as they were pushed, binary-safe, and formatted
// by the connection exactly as a vector of strings is.
#include "server/redis/redis_args.h"

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace orderhold::redis {
namespace {

std::vector<std::string> Unpacked(const RedisArgs& args) {
  std::vector<std::string> out;
  for (size_t i = 0; i < args.size(); ++i) out.emplace_back(args[i]);
  return out;
}

TEST(RedisArgsTest, ReadsBackWhatWasPushedInOrder) {
  RedisArgs args;
  EXPECT_TRUE(args.empty());
  args.Push("EVALSHA");
  args.PushInt(7);
  args.PushInt(-12);
  args.PushInt(std::numeric_limits<int64_t>::min());
  args.PushCat({"oh:{3}:", "u:", "alice"});
  args.Push("");
  args.PushCat({});
  args.Push(std::string("a\0b\r\n", 5));  // binary-safe: NUL, CR, LF
  EXPECT_THAT(Unpacked(args),
              ::testing::ElementsAre("EVALSHA", "7", "-12", "-9223372036854775808",
                                     "oh:{3}:u:alice", "", "", std::string("a\0b\r\n", 5)));
  EXPECT_EQ(args.size(), 8u);
  EXPECT_EQ(args.bytes(), 7u + 1 + 3 + 20 + 14 + 5);
}

TEST(RedisArgsTest, BracedListsAndVectorsMakeTheSameArgs) {
  const std::string long_key(100, 'k');  // past std::string's inline room
  const RedisArgs from_list{"SET", long_key, ""};
  const RedisArgs from_vector(std::vector<std::string>{"SET", long_key, ""});
  EXPECT_EQ(from_list, from_vector);
  EXPECT_THAT(Unpacked(from_list), ::testing::ElementsAre("SET", long_key, ""));
  EXPECT_FALSE(from_list == (RedisArgs{"SET", long_key}));
  // The same bytes split differently are other arguments.
  EXPECT_FALSE((RedisArgs{"ab", "c"}) == (RedisArgs{"a", "bc"}));
}

TEST(RedisArgsTest, ManyMoreArgumentsThanInlineAndACopyIsIndependent) {
  RedisArgs args;
  args.Reserve(3, 10);  // too small a reservation only costs allocations
  for (int i = 0; i < 1000; ++i) args.PushInt(i);
  RedisArgs copy = args;
  copy.Push("last");
  ASSERT_EQ(args.size(), 1000u);
  ASSERT_EQ(copy.size(), 1001u);
  for (size_t i = 0; i < args.size(); ++i) EXPECT_EQ(args[i], std::to_string(i));
  EXPECT_EQ(copy[1000], "last");
}

}  // namespace
}  // namespace orderhold::redis
