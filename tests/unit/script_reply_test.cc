// ReplyReader (server/store/script_reply.h), which the generated parsers of the store's scripts
// use: fields by name, and one INTERNAL error naming the element for a reply of another shape.
#include "server/store/script_reply.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace orderhold::store::lua {
namespace {

using redis::RedisReply;
using ::testing::HasSubstr;

RedisReply Int(long long n) {
  RedisReply r;
  r.type = RedisReply::Type::kInteger;
  r.integer = n;
  return r;
}
RedisReply Str(std::string s) {
  RedisReply r;
  r.type = RedisReply::Type::kString;
  r.str = std::move(s);
  return r;
}
RedisReply Array(std::vector<RedisReply> elements) {
  RedisReply r;
  r.type = RedisReply::Type::kArray;
  r.elements = std::move(elements);
  return r;
}

// As a generated Parse reads {now int, details str, page array, rest...}.
absl::Status Read(const RedisReply& reply, ReplyReader::Shape shape, int64_t* now,
                  absl::string_view* details, absl::Span<const RedisReply>* page,
                  absl::Span<const RedisReply>* rest) {
  ReplyReader r(reply, "test.lua", 3, shape);
  r.Int("now", now);
  r.Str("details", details);
  r.Array("page", page);
  if (shape == ReplyReader::Shape::kArrayAndTail) r.Rest("rest", rest);
  return r.status();
}

TEST(ScriptReplyTest, ReadsEachElementByItsNameAndTheTail) {
  const RedisReply reply =
      Array({Str("1732000000000"), Str("d"), Array({Int(1), Int(2)}), Int(7), Int(8)});
  int64_t now = 0;
  absl::string_view details;
  absl::Span<const RedisReply> page, rest;
  ASSERT_TRUE(Read(reply, ReplyReader::Shape::kArrayAndTail, &now, &details, &page, &rest).ok());
  EXPECT_EQ(now, 1732000000000);  // a score string reads as a number
  EXPECT_EQ(details, "d");
  EXPECT_EQ(page.size(), 2u);
  ASSERT_EQ(rest.size(), 2u);
  EXPECT_EQ(rest.front().integer, 7);
}

TEST(ScriptReplyTest, AReplyOfAnotherShapeIsOneInternalErrorNamingWhatIsWrong) {
  int64_t now = 0;
  absl::string_view details;
  absl::Span<const RedisReply> page, rest;
  const auto internal = [](const std::string& what) {
    return ::orderhold::testing::StatusIs(absl::StatusCode::kInternal,
                                          HasSubstr("unexpected Redis reply to test.lua: " + what));
  };
  // Too few, too many (no tail), not an array, an element of the wrong type.
  EXPECT_THAT(
      Read(Array({Int(1), Str("")}), ReplyReader::Shape::kArray, &now, &details, &page, &rest),
      internal("2 elements, wanted 3"));
  EXPECT_THAT(Read(Array({Int(1), Str(""), Array({}), Int(4)}), ReplyReader::Shape::kArray, &now,
                   &details, &page, &rest),
              internal("4 elements, wanted 3"));
  EXPECT_THAT(Read(Int(1), ReplyReader::Shape::kArray, &now, &details, &page, &rest),
              internal("not an array"));
  EXPECT_THAT(Read(Array({Int(1), Int(2), Array({})}), ReplyReader::Shape::kArray, &now, &details,
                   &page, &rest),
              internal("details is not a string"));
  EXPECT_THAT(Read(Array({Str("x"), Str(""), Array({})}), ReplyReader::Shape::kArray, &now,
                   &details, &page, &rest),
              internal("now is not a number"));
  EXPECT_THAT(Read(Array({Int(1), Str(""), Str("")}), ReplyReader::Shape::kArray, &now, &details,
                   &page, &rest),
              internal("page is not an array"));
}

TEST(ScriptReplyTest, AScalarReplyIsItsOneValue) {
  int64_t created = 0;
  const RedisReply one = Int(1);
  ReplyReader ok(one, "ensure_group.lua", 1, ReplyReader::Shape::kScalar);
  ok.Int("created", &created);
  EXPECT_TRUE(ok.status().ok());
  EXPECT_EQ(created, 1);
  const RedisReply array = Array({});
  ReplyReader bad(array, "ensure_group.lua", 1, ReplyReader::Shape::kScalar);
  bad.Int("created", &created);
  EXPECT_THAT(bad.status(), ::orderhold::testing::StatusIs(absl::StatusCode::kInternal,
                                                           HasSubstr("created is not a number")));
}

}  // namespace
}  // namespace orderhold::store::lua
