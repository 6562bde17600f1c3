// Minimal line logger: Debian's abseil 20220623 predates absl/log.
//
// One line per call on stderr, in one of two formats (SetLogFormat, --log_format):
// - text (default): "2026-11-21T10:00:00.123Z I reaper: message".
// - json: one JSON object per line for log pipelines (Loki, Elasticsearch, Cloud Logging):
//   {"time":"2026-11-21T10:00:00.123Z","level":"info","component":"reaper","message":"..."}
//   "time" is RFC 3339 UTC with milliseconds; "level" is info, warning or error; "component" is
//   the message's "<words>: " prefix when it has one (reaper, health, redis cluster, ...) and is
//   then left out of "message"; gRPC's own lines also carry "file" and "line".
// Thread-safe (each line is written with a single fwrite on an unbuffered stream).
#ifndef ORDERHOLD_SERVER_COMMON_LOG_H_
#define ORDERHOLD_SERVER_COMMON_LOG_H_

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace orderhold {

enum class LogLevel { kInfo, kWarning, kError };

// The line format (--log_format=text|json).
enum class LogFormat { kText, kJson };

// Sets the format of every later line, process-wide (default kText). kJson also routes gRPC's own
// log lines (gpr_log) through LogLine, so that stderr carries JSON lines only. Thread-safe, but
// meant to be called once by main before the server starts.
void SetLogFormat(LogFormat format);

// Writes one line in the current format: UTC timestamp, level, `message`.
void LogLine(LogLevel level, absl::string_view message);

// The line (with its "\n") that LogLine writes for `message` at `time` in `format`; `file` and
// `line` are added as fields in JSON when `file` is not empty (gRPC's lines). For tests and
// LogLine.
std::string FormatLogLine(LogFormat format, absl::Time time, LogLevel level,
                          absl::string_view message, absl::string_view file = "", int line = 0);

// LogInfo("a", 1, "b") == LogLine(kInfo, absl::StrCat("a", 1, "b")).
template <typename... Args>
void LogInfo(const Args&... args) {
  LogLine(LogLevel::kInfo, absl::StrCat(args...));
}
template <typename... Args>
void LogWarning(const Args&... args) {
  LogLine(LogLevel::kWarning, absl::StrCat(args...));
}
template <typename... Args>
void LogError(const Args&... args) {
  LogLine(LogLevel::kError, absl::StrCat(args...));
}

}  // namespace orderhold

#endif  // ORDERHOLD_SERVER_COMMON_LOG_H_
