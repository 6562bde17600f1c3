// RedisArgs: packed command arguments read back as they were pushed, binary-safe, any count. (The
// bytes they put on the wire are checked against a real redis-server by the caller contract and
// the integration tests: every command goes through them.)
#include "server/redis/redis_args.h"

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
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

TEST(RedisArgsTest, BracedListsCopyTheirArgumentsAndCompareElementWise) {
  std::string long_key(100, 'k');  // past std::string's inline room
  const RedisArgs from_list{"SET", long_key, ""};
  RedisArgs pushed;
  pushed.Push("SET");
  pushed.Push(long_key);
  pushed.Push("");
  long_key.assign("changed");  // a copy was taken, not a view
  EXPECT_EQ(from_list, pushed);
  EXPECT_THAT(Unpacked(from_list), ::testing::ElementsAre("SET", std::string(100, 'k'), ""));
  EXPECT_FALSE(from_list == (RedisArgs{"SET", std::string(100, 'k')}));
  // The same bytes split differently are other arguments.
  EXPECT_FALSE((RedisArgs{"ab", "c"}) == (RedisArgs{"a", "bc"}));
  // ForEach walks the same arguments as operator[].
  std::vector<std::string> walked;
  from_list.ForEach([&walked](absl::string_view arg) { walked.emplace_back(arg); });
  EXPECT_EQ(walked, Unpacked(from_list));
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
