#include "client/bench/call_log.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "google/protobuf/util/time_util.h"

namespace orderhold::client::bench {
namespace {

using google::protobuf::util::TimeUtil;

// `{"m":...,"t1":...` without the closing brace.
void AppendHead(const CallLine& line, std::string* out) {
  absl::StrAppend(out, "{\"m\":\"", MethodMixKey(line.method), "\",\"u\":");
  AppendJsonString(line.user_id, out);
  if (!line.order_id.empty()) {
    out->append(",\"o\":");
    AppendJsonString(line.order_id, out);
  }
  if (!line.scope.empty()) {
    out->append(",\"s\":");
    AppendJsonString(line.scope, out);
    absl::StrAppend(out, ",\"q\":", std::max<int64_t>(1, line.quantity));
  }
  absl::StrAppend(out, ",\"c\":", line.code, ",\"t0\":", line.start_unix_us,
                  ",\"t1\":", line.done_unix_us);
}

void AppendExpire(const orderhold::v1::Hold& hold, std::string* out) {
  absl::StrAppend(out, ",\"exp\":", TimeUtil::TimestampToMilliseconds(hold.expire_time()));
}

const char* Bool(bool b) { return b ? "true" : "false"; }

}  // namespace

void AppendJsonString(absl::string_view s, std::string* out) {
  out->push_back('"');
  for (const char c : s) {
    if (c == '"' || c == '\\') {
      out->push_back('\\');
      out->push_back(c);
    } else if (static_cast<unsigned char>(c) < 0x20) {
      absl::StrAppendFormat(out, "\\u%04x", static_cast<unsigned char>(c));
    } else {
      out->push_back(c);
    }
  }
  out->push_back('"');
}

void AppendCallLine(const CallLine& line, const orderhold::v1::PlaceHoldResponse& r,
                    std::string* out) {
  AppendHead(line, out);
  if (line.code == 0) {
    absl::StrAppend(out, ",\"created\":", Bool(r.created()));
    AppendExpire(r.hold(), out);
  }
  out->append("}\n");
}

void AppendCallLine(const CallLine& line, const orderhold::v1::PayResponse& r, std::string* out) {
  AppendHead(line, out);
  if (line.code == 0) absl::StrAppend(out, ",\"already\":", Bool(r.already_paid()));
  out->append("}\n");
}

void AppendCallLine(const CallLine& line, const orderhold::v1::CancelHoldResponse& r,
                    std::string* out) {
  AppendHead(line, out);
  if (line.code == 0) absl::StrAppend(out, ",\"already\":", Bool(r.already_cancelled()));
  out->append("}\n");
}

void AppendCallLine(const CallLine& line, const orderhold::v1::ExtendHoldResponse& r,
                    std::string* out) {
  AppendHead(line, out);
  if (line.code == 0) AppendExpire(r.hold(), out);
  out->append("}\n");
}

void AppendCallLine(const CallLine& line, const orderhold::v1::GetHoldResponse& r,
                    std::string* out) {
  AppendHead(line, out);
  if (line.code == 0) {
    absl::StrAppend(out, ",\"outcome\":", static_cast<int>(r.outcome()));
    AppendExpire(r.hold(), out);
  }
  out->append("}\n");
}

void AppendCallLine(const CallLine& line, const orderhold::v1::ListHoldsResponse& r,
                    std::string* out) {
  AppendHead(line, out);
  if (line.code == 0) absl::StrAppend(out, ",\"n\":", r.holds_size());
  out->append("}\n");
}

void AppendCallLine(const CallLine& line, const orderhold::v1::ReleaseHoldsResponse& r,
                    std::string* out) {
  AppendHead(line, out);
  if (line.code == 0) {
    out->append(",\"released\":[");
    for (int i = 0; i < r.holds_size(); ++i) {
      if (i > 0) out->push_back(',');
      AppendJsonString(r.holds(i).order_id(), out);
    }
    out->push_back(']');
  }
  out->append("}\n");
}

absl::StatusOr<std::unique_ptr<CallLog>> CallLog::Open(const std::string& path) {
  std::FILE* file = std::fopen(path.c_str(), "w");
  if (file == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("--call_log: cannot open ", path, ": ", std::strerror(errno)));
  }
  // A full buffer is one write(2) per ~10,000 lines; setvbuf must come before the first write.
  std::setvbuf(file, nullptr, _IOFBF, 1 << 20);
  return std::unique_ptr<CallLog>(new CallLog(file));
}

CallLog::CallLog(std::FILE* file) : file_(file) {}

CallLog::~CallLog() { Close(); }

void CallLog::Write(absl::string_view lines) {
  if (std::fwrite(lines.data(), 1, lines.size(), file_) != lines.size()) failed_ = true;
}

bool CallLog::Close() {
  if (file_ != nullptr) {
    if (std::fclose(file_) != 0) failed_ = true;
    file_ = nullptr;
  }
  return !failed_;
}

}  // namespace orderhold::client::bench
