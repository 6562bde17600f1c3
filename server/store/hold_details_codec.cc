#include "server/store/hold_details_codec.h"

#include <charconv>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"

namespace orderhold::store {
namespace {

void AppendString(absl::string_view s, std::string* out) { absl::StrAppend(out, s.size(), ":", s); }

// Reads "<decimal>:" from the front of `in`.
bool ReadNumber(absl::string_view* in, int64_t* out) {
  const size_t colon = in->find(':');
  if (colon == absl::string_view::npos || colon == 0 || colon > 19) return false;
  for (char c : in->substr(0, colon)) {
    if (c < '0' || c > '9') return false;
  }
  // Digits only (checked above), so std::from_chars reads the same number absl::SimpleAtoi
  // would, without its sign, base and whitespace handling; 19 digits can still overflow.
  const std::from_chars_result read = std::from_chars(in->data(), in->data() + colon, *out);
  if (read.ec != std::errc() || read.ptr != in->data() + colon) return false;
  in->remove_prefix(colon + 1);
  return true;
}

// Reads "<n>:<n bytes>" from the front of `in`.
bool ReadString(absl::string_view* in, std::string* out) {
  int64_t n = 0;
  if (!ReadNumber(in, &n) || n < 0 || static_cast<size_t>(n) > in->size()) return false;
  const absl::string_view s = in->substr(0, static_cast<size_t>(n));
  out->assign(s.data(), s.size());
  in->remove_prefix(static_cast<size_t>(n));
  return true;
}

}  // namespace

std::string EncodeDetailsTail(const HoldDetails& details) {
  std::string out = absl::StrCat(details.quantity, ":");
  AppendString(details.scope, &out);
  absl::StrAppend(&out, details.scope_limits.max_holds, ":", details.scope_limits.max_units, ":",
                  details.labels.size(), ":");
  for (const auto& [key, value] : details.labels) {
    AppendString(key, &out);
    AppendString(value, &out);
  }
  return out;
}

bool IsPlain(const HoldDetails& details) {
  return details.scope.empty() && details.quantity == 1 && details.labels.empty();
}

std::optional<DecodedDetails> DecodeDetails(absl::string_view value) {
  DecodedDetails out;
  int64_t place = 0, labels = 0;
  HoldDetails& d = out.details;
  if (!ReadNumber(&value, &out.expire_ms) || !ReadNumber(&value, &place) ||
      !ReadNumber(&value, &d.quantity) || d.quantity < 1 || !ReadString(&value, &d.scope) ||
      !ReadNumber(&value, &d.scope_limits.max_holds) ||
      !ReadNumber(&value, &d.scope_limits.max_units) || !ReadNumber(&value, &labels)) {
    return std::nullopt;
  }
  for (int64_t i = 0; i < labels; ++i) {
    std::string key, label;
    if (!ReadString(&value, &key) || !ReadString(&value, &label)) return std::nullopt;
    d.labels[std::move(key)] = std::move(label);
  }
  if (!value.empty()) return std::nullopt;
  d.place_time = absl::FromUnixMillis(place);
  return out;
}

std::optional<DecodedLife> DecodeLife(absl::string_view value) {
  DecodedLife out;
  int64_t place = 0, cap = 0, ids = 0;
  if (!ReadNumber(&value, &out.expire_ms) || !ReadNumber(&value, &place) ||
      !ReadNumber(&value, &cap) || !ReadNumber(&value, &out.extensions) ||
      !ReadNumber(&value, &ids)) {
    return std::nullopt;
  }
  for (int64_t i = 0; i < ids; ++i) {
    std::string id;
    if (!ReadString(&value, &id)) return std::nullopt;
  }
  if (!value.empty()) return std::nullopt;
  out.place_time = absl::FromUnixMillis(place);
  out.max_expire_time = absl::FromUnixMillis(cap);
  return out;
}

}  // namespace orderhold::store
