#include "server/common/log.h"

#include <grpc/support/log.h>

#include <atomic>
#include <cstdio>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/time/clock.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"

namespace orderhold {
namespace {

std::atomic<LogFormat> log_format{LogFormat::kText};

// `text` as a JSON string literal, quotes included. Protobuf's JSON printer does the escaping
// (quotes, backslashes, control characters; UTF-8 passed through). It drops bytes that are not
// UTF-8 without saying so, so the literal is read back: when it lost something, the text's bytes
// are C-escaped (\xff, ASCII) first. Only for log lines, where the second pass costs nothing.
std::string JsonString(absl::string_view text) {
  google::protobuf::Value value;
  value.set_string_value(std::string(text));
  std::string json;
  google::protobuf::Value read_back;
  if (google::protobuf::util::MessageToJsonString(value, &json).ok() &&
      google::protobuf::util::JsonStringToMessage(json, &read_back).ok() &&
      read_back.string_value() == text) {
    return json;
  }
  value.set_string_value(absl::CHexEscape(text));
  json.clear();
  return google::protobuf::util::MessageToJsonString(value, &json).ok() ? json : "\"\"";
}

// The "<words>: " prefix our messages start with ("reaper: ", "redis cluster: "): lower-case
// letters and spaces, at most 24 characters. Empty when there is none.
absl::string_view Component(absl::string_view message) {
  const size_t colon = message.find(": ");
  if (colon == absl::string_view::npos || colon == 0 || colon > 24) return "";
  for (char c : message.substr(0, colon)) {
    if (!absl::ascii_islower(c) && c != ' ') return "";
  }
  return message.substr(0, colon);
}

void GrpcLogToLogLine(gpr_log_func_args* args) {
  const LogLevel level =
      args->severity == GPR_LOG_SEVERITY_ERROR ? LogLevel::kError : LogLevel::kInfo;
  const std::string line =
      FormatLogLine(log_format.load(), absl::Now(), level, absl::StrCat("grpc: ", args->message),
                    args->file, args->line);
  std::fwrite(line.data(), 1, line.size(), stderr);
}

}  // namespace

void SetLogFormat(LogFormat format) {
  log_format.store(format);
  if (format == LogFormat::kJson) gpr_set_log_function(&GrpcLogToLogLine);
}

std::string FormatLogLine(LogFormat format, absl::Time time, LogLevel level,
                          absl::string_view message, absl::string_view file, int line) {
  const std::string when = absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", time, absl::UTCTimeZone());
  if (format == LogFormat::kText) {
    const char letter = level == LogLevel::kInfo ? 'I' : level == LogLevel::kWarning ? 'W' : 'E';
    return absl::StrCat(when, " ", absl::string_view(&letter, 1), " ", message, "\n");
  }
  const char* name = level == LogLevel::kInfo      ? "info"
                     : level == LogLevel::kWarning ? "warning"
                                                   : "error";
  std::string json = absl::StrCat("{\"time\":\"", when, "\",\"level\":\"", name, "\"");
  if (absl::string_view component = Component(message); !component.empty()) {
    absl::StrAppend(&json, ",\"component\":", JsonString(component));
    message.remove_prefix(component.size() + 2);
  }
  if (!file.empty()) absl::StrAppend(&json, ",\"file\":", JsonString(file), ",\"line\":", line);
  absl::StrAppend(&json, ",\"message\":", JsonString(message), "}\n");
  return json;
}

void LogLine(LogLevel level, absl::string_view message) {
  const std::string line = FormatLogLine(log_format.load(), absl::Now(), level, message);
  std::fwrite(line.data(), 1, line.size(), stderr);
}

}  // namespace orderhold
