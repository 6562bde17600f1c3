// orderhold-bench --call_log: one JSON object per line for every call the generator completed, so
// a checker can replay what the client saw (tests/soak/oracle.py replays it against the events a
// consumer group received). A line names the call and says how it was answered:
//
//   {"m":"place","u":"u7","o":"b00c0ffee-17","c":0,"t0":1764140000123456,"t1":1764140000124001,
//    "created":true,"exp":1764140010123}
//
//   m    the method (MethodMixKey: place, pay, cancel, extend, get, list, release)
//   u    the request's user_id; o its order_id (absent for list and release)
//   s, q a place's scope and quantity (1 when unset), only when it has a scope (--scopes)
//   c    the gRPC status code (0 OK, 8 RESOURCE_EXHAUSTED, 14 UNAVAILABLE, ...)
//   t0   when the call was started, t1 when its completion ran: Unix time in microseconds (the
//        system clock, which Redis' TIME also reads on one machine)
//   and, only when c is 0, what the answer said:
//     place   "created" (PlaceHoldResponse.created), "exp" (hold.expire_time, Unix ms)
//     pay     "already" (already_paid)       cancel  "already" (already_cancelled)
//     extend  "exp" (the hold's expire_time after the call, Unix ms)
//     get     "outcome" (HoldOutcome number; 0 = live), "exp"
//     list    "n" (how many live holds the user had)
//     release "released" (the order ids of the holds it ended, CANCELLED)
// Lines are written in completion order, not start order.
#ifndef ORDERHOLD_CLIENT_BENCH_CALL_LOG_H_
#define ORDERHOLD_CLIENT_BENCH_CALL_LOG_H_

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "client/bench/method.h"
#include "orderhold/v1/orderhold.pb.h"

namespace orderhold::client::bench {

// What every line has. user_id and order_id are copied as they are: the generator makes them of
// [A-Za-z0-9-] only, so they need no JSON escaping (AppendCallLine escapes them anyway).
struct CallLine {
  Method method = Method::kPlaceHold;
  absl::string_view user_id;
  absl::string_view order_id;    // empty: left out (ListHolds, ReleaseHolds)
  absl::string_view scope = {};  // a PlaceHold's scope; empty: left out, with the quantity
  int64_t quantity = 0;          // a PlaceHold's quantity as sent (0: 1)
  int code = 0;
  int64_t start_unix_us = 0;
  int64_t done_unix_us = 0;
};

// Appends `s` to `out` as a JSON string (RFC 8259): quotes, backslash and control characters
// escaped (\uXXXX), every other byte as it is (the generator's ids and the server's messages are
// UTF-8). Pure.
void AppendJsonString(absl::string_view s, std::string* out);

// Appends one line (with its '\n') to `out`: `line`'s fields, then the answer's (only when
// line.code is 0; see the file comment). One overload per response type. Pure.
void AppendCallLine(const CallLine& line, const orderhold::v1::PlaceHoldResponse& r,
                    std::string* out);
void AppendCallLine(const CallLine& line, const orderhold::v1::PayResponse& r, std::string* out);
void AppendCallLine(const CallLine& line, const orderhold::v1::CancelHoldResponse& r,
                    std::string* out);
void AppendCallLine(const CallLine& line, const orderhold::v1::ExtendHoldResponse& r,
                    std::string* out);
void AppendCallLine(const CallLine& line, const orderhold::v1::GetHoldResponse& r,
                    std::string* out);
void AppendCallLine(const CallLine& line, const orderhold::v1::ListHoldsResponse& r,
                    std::string* out);
void AppendCallLine(const CallLine& line, const orderhold::v1::ReleaseHoldsResponse& r,
                    std::string* out);

// The file the lines go to. Write is thread-safe: each line is one fwrite, and glibc locks the
// stream for each, so lines never interleave; stdio buffers 1 MiB, so a line costs no system call
// most of the time. The file is flushed and closed by the destructor (or Close).
class CallLog {
 public:
  // Creates or truncates `path`. INVALID_ARGUMENT naming the path and errno's text when it
  // cannot be opened.
  static absl::StatusOr<std::unique_ptr<CallLog>> Open(const std::string& path);
  ~CallLog();
  CallLog(const CallLog&) = delete;
  CallLog& operator=(const CallLog&) = delete;

  // Appends `lines` (whole lines, each ending in '\n').
  void Write(absl::string_view lines);
  // Flushes and closes; false when a write or the close failed (disk full). Idempotent.
  bool Close();

 private:
  explicit CallLog(std::FILE* file);
  std::FILE* file_;
  std::atomic<bool> failed_{false};
};

}  // namespace orderhold::client::bench

#endif  // ORDERHOLD_CLIENT_BENCH_CALL_LOG_H_
