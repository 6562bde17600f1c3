// The line logger's two formats (server/common/log.h): text for people, JSON lines for pipelines.
// JSON lines are checked by parsing them back with protobuf's JSON parser, so the test does not
// depend on how the printer chooses to escape.
#include "server/common/log.h"

#include <string>

#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"

namespace orderhold {
namespace {

using ::testing::EndsWith;

const absl::Time kTime = absl::FromUnixMillis(1795255200123);  // 2026-11-21T10:00:00.123Z

google::protobuf::Struct Parse(const std::string& line) {
  google::protobuf::Struct object;
  EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(line, &object).ok()) << line;
  return object;
}

std::string Field(const google::protobuf::Struct& object, const std::string& name) {
  auto it = object.fields().find(name);
  return it == object.fields().end() ? "(absent)" : it->second.string_value();
}

TEST(LogTest, TextLineIsTimeLevelLetterAndMessage) {
  EXPECT_EQ(FormatLogLine(LogFormat::kText, kTime, LogLevel::kWarning, "reaper: tick failed"),
            "2026-11-21T10:00:00.123Z W reaper: tick failed\n");
}

TEST(LogTest, JsonLineHasTimeLevelComponentAndMessageInThatOrder) {
  EXPECT_EQ(FormatLogLine(LogFormat::kJson, kTime, LogLevel::kInfo, "redis cluster: map changed"),
            "{\"time\":\"2026-11-21T10:00:00.123Z\",\"level\":\"info\",\"component\":\"redis "
            "cluster\",\"message\":\"map changed\"}\n");
}

TEST(LogTest, JsonEscapesWhatAMessageMayCarry) {
  const std::string message = "health: Redis said \"ERR\\x\"\nsecond line\ttab \x01 é";
  const std::string line = FormatLogLine(LogFormat::kJson, kTime, LogLevel::kError, message);
  EXPECT_THAT(line, EndsWith("}\n"));
  EXPECT_EQ(line.find('\n'), line.size() - 1) << "one line per entry";
  const google::protobuf::Struct object = Parse(line);
  EXPECT_EQ(Field(object, "level"), "error");
  EXPECT_EQ(Field(object, "component"), "health");
  EXPECT_EQ(Field(object, "message"), message.substr(std::string("health: ").size()));
}

TEST(LogTest, JsonComponentOnlyForAShortLowerCasePrefix) {
  for (const char* message : {"signal 15: NOT_SERVING", "--store=noop: BENCHMARKING ONLY",
                              "stopped", ": empty", "a very long lower case prefix here: x"}) {
    const google::protobuf::Struct object =
        Parse(FormatLogLine(LogFormat::kJson, kTime, LogLevel::kInfo, message));
    EXPECT_EQ(Field(object, "component"), "(absent)") << message;
    EXPECT_EQ(Field(object, "message"), message);
  }
}

TEST(LogTest, JsonCarriesFileAndLineForGrpcLines) {
  const google::protobuf::Struct object = Parse(FormatLogLine(
      LogFormat::kJson, kTime, LogLevel::kError, "grpc: bind failed", "src/core/x.cc", 42));
  EXPECT_EQ(Field(object, "component"), "grpc");
  EXPECT_EQ(Field(object, "file"), "src/core/x.cc");
  EXPECT_EQ(object.fields().at("line").number_value(), 42);
}

TEST(LogTest, InvalidUtf8IsEscapedNotDropped) {
  const google::protobuf::Struct object =
      Parse(FormatLogLine(LogFormat::kJson, kTime, LogLevel::kInfo, "bytes \xff\xfe end"));
  EXPECT_EQ(Field(object, "message"), "bytes \\xff\\xfe end");
}

}  // namespace
}  // namespace orderhold
