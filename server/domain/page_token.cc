#include "server/domain/page_token.h"

#include <algorithm>
#include <cstdint>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace orderhold::domain {
namespace {

constexpr char kVersion = 1;
constexpr size_t kFixedBytes = 1 + 8 + 8;  // version, request hash, expire ms

absl::Status Invalid(absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("page_token: ", why));
}

// FNV-1a 64 of user_id, a 0 byte, and scope: stable across processes and releases.
uint64_t RequestHash(absl::string_view user_id, absl::string_view scope) {
  uint64_t hash = 14695981039346656037ull;
  auto add = [&](unsigned char c) {
    hash ^= c;
    hash *= 1099511628211ull;
  };
  for (unsigned char c : user_id) add(c);
  add(0);
  for (unsigned char c : scope) add(c);
  return hash;
}

void AppendU64(std::string& out, uint64_t value) {
  for (int shift = 56; shift >= 0; shift -= 8) {
    out.push_back(static_cast<char>((value >> shift) & 0xff));
  }
}

uint64_t LoadU64(const char* bytes) {
  uint64_t value = 0;
  for (int i = 0; i < 8; ++i) value = (value << 8) | static_cast<unsigned char>(bytes[i]);
  return value;
}

}  // namespace

std::string EncodePageToken(absl::string_view user_id, absl::string_view scope,
                            const store::ListCursor& last) {
  std::string raw(1, kVersion);
  AppendU64(raw, RequestHash(user_id, scope));
  AppendU64(raw, static_cast<uint64_t>(absl::ToUnixMillis(last.expire_time)));
  raw.append(last.order_id);
  return absl::WebSafeBase64Escape(raw);
}

absl::StatusOr<store::ListCursor> DecodePageToken(absl::string_view token,
                                                  absl::string_view user_id,
                                                  absl::string_view scope) {
  if (token.size() > kMaxPageTokenBytes) {
    return Invalid(absl::StrCat("longer than ", kMaxPageTokenBytes,
                                " bytes: not one this server "
                                "issued"));
  }
  std::string raw;
  if (!absl::WebSafeBase64Unescape(token, &raw) || raw.size() <= kFixedBytes ||
      raw[0] != kVersion) {
    return Invalid("not a token of ListHolds (pass next_page_token as it was received)");
  }
  if (LoadU64(raw.data() + 1) != RequestHash(user_id, scope)) {
    return Invalid("issued for another user_id or scope (a token continues its own request)");
  }
  const int64_t expire_ms = static_cast<int64_t>(LoadU64(raw.data() + 9));
  if (expire_ms < 0) return Invalid("not a token of ListHolds");
  return store::ListCursor{absl::FromUnixMillis(expire_ms), raw.substr(kFixedBytes)};
}

absl::StatusOr<int> ResolvePageSize(int64_t requested) {
  if (requested < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("page_size: must be >= 0 (0: ", kDefaultPageSize, "), got ", requested));
  }
  if (requested == 0) return kDefaultPageSize;
  return static_cast<int>(std::min<int64_t>(requested, kMaxPageSize));
}

}  // namespace orderhold::domain
