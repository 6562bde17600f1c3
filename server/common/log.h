// Minimal line logger: Debian's abseil 20220623 predates absl/log.
//
// One line per call on stderr: "2026-11-21T10:00:00.123Z I reaper: message". Thread-safe (each line
// is written with a single fwrite on an unbuffered stream).
#ifndef ORDERHOLD_SERVER_COMMON_LOG_H_
#define ORDERHOLD_SERVER_COMMON_LOG_H_

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace orderhold {

enum class LogLevel { kInfo, kWarning, kError };

// Writes one line: UTC timestamp, level letter (I/W/E), `message`.
void LogLine(LogLevel level, absl::string_view message);

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
