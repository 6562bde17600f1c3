#include "server/domain/hold.h"

#include <cstdint>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "server/common/status_macros.h"
#include "server/domain/tenant.h"

namespace orderhold::domain {
namespace {

// Decodes one UTF-8 sequence at s[*i]; false for malformed, overlong, surrogate or > U+10FFFF.
bool NextCodePoint(absl::string_view s, size_t* i, uint32_t* cp) {
  const unsigned char lead = static_cast<unsigned char>(s[*i]);
  int extra;
  uint32_t min;
  if (lead < 0x80) {
    *cp = lead;
    *i += 1;
    return true;
  } else if ((lead & 0xE0) == 0xC0) {
    extra = 1, min = 0x80, *cp = lead & 0x1F;
  } else if ((lead & 0xF0) == 0xE0) {
    extra = 2, min = 0x800, *cp = lead & 0x0F;
  } else if ((lead & 0xF8) == 0xF0) {
    extra = 3, min = 0x10000, *cp = lead & 0x07;
  } else {
    return false;
  }
  if (*i + extra >= s.size()) return false;  // truncated sequence
  for (int k = 1; k <= extra; ++k) {
    const unsigned char c = static_cast<unsigned char>(s[*i + k]);
    if ((c & 0xC0) != 0x80) return false;
    *cp = (*cp << 6) | (c & 0x3F);
  }
  if (*cp < min || *cp > 0x10FFFF || (*cp >= 0xD800 && *cp <= 0xDFFF)) return false;
  *i += extra + 1;
  return true;
}

}  // namespace

size_t Utf8ValidPrefix(absl::string_view s) {
  size_t i = 0;
  for (uint32_t cp = 0; i < s.size();) {
    const size_t at = i;
    if (!NextCodePoint(s, &i, &cp)) return at;
  }
  return i;
}

absl::Status ValidatePolicy(const HoldPolicy& policy) {
  if (policy.max_holds < 1 || policy.max_holds > kMaxHoldsLimit) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_holds: must be 1-", kMaxHoldsLimit, " (got ", policy.max_holds, ")"));
  }
  if (policy.max_units < 0 || policy.max_units > kMaxUnits) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_units: must be 0-", kMaxUnits, " (got ", policy.max_units, ")"));
  }
  if (policy.max_ttl < absl::Milliseconds(1)) {
    return absl::InvalidArgumentError("max_ttl: must be at least 1ms");
  }
  if (policy.default_ttl < absl::Milliseconds(1) || policy.default_ttl > policy.max_ttl) {
    return absl::InvalidArgumentError(absl::StrCat("default_ttl: must be between 1ms and max_ttl (",
                                                   absl::FormatDuration(policy.max_ttl), ")"));
  }
  if (policy.max_hold_lifetime < absl::Milliseconds(1) ||
      policy.max_hold_lifetime > kMaxHoldLifetimeLimit) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max_hold_lifetime: must be between 1ms and ", absl::FormatDuration(kMaxHoldLifetimeLimit),
        " (got ", absl::FormatDuration(policy.max_hold_lifetime), ")"));
  }
  if (policy.max_extensions < 0 || policy.max_extensions > kMaxExtensionsLimit) {
    return absl::InvalidArgumentError(absl::StrCat("max_extensions: must be 0-",
                                                   kMaxExtensionsLimit, " (0: no limit; got ",
                                                   policy.max_extensions, ")"));
  }
  return absl::OkStatus();
}

absl::Status ValidateLocalId(absl::string_view field, absl::string_view value) {
  if (value.empty() || value.size() > kMaxIdBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": must be 1-", kMaxIdBytes, " bytes (got ", value.size(), ")"));
  }
  for (size_t i = 0; i < value.size();) {
    const size_t at = i;
    uint32_t cp = 0;
    if (!NextCodePoint(value, &i, &cp)) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ": must be valid UTF-8 (bad byte at offset ", at, ")"));
    }
    if (cp < 0x20 || (cp >= 0x7F && cp <= 0x9F)) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ": must not contain control characters (one at offset ", at, ")"));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateId(absl::string_view field, absl::string_view value) {
  const absl::string_view tenant = TenantOfId(value);
  if (!tenant.empty()) ORDERHOLD_RETURN_IF_ERROR(ValidateTenantName(field, tenant));
  return ValidateLocalId(field, LocalId(value));
}

absl::Status ValidateRequestId(absl::string_view request_id) {
  if (request_id.empty()) return absl::OkStatus();
  if (request_id.size() > kMaxRequestIdBytes) {
    return absl::InvalidArgumentError(absl::StrCat("request_id: must be at most ",
                                                   kMaxRequestIdBytes, " bytes (got ",
                                                   request_id.size(), ")"));
  }
  return ValidateLocalId("request_id", request_id);
}

absl::Status ValidatePaymentReference(absl::string_view payment_reference) {
  if (payment_reference.empty()) return absl::OkStatus();
  // ValidateLocalId bounds it at kMaxIdBytes, the same 128 bytes.
  static_assert(kMaxPaymentReferenceBytes == kMaxIdBytes);
  return ValidateLocalId("payment_reference", payment_reference);
}

absl::Status ValidateScope(absl::string_view scope) {
  return scope.empty() ? absl::OkStatus() : ValidateId("scope", scope);
}

absl::StatusOr<store::Labels> ValidateLabels(
    std::vector<std::pair<std::string, std::string>> labels) {
  store::Labels out;
  for (auto& [key, value] : labels) out[std::move(key)] = std::move(value);
  if (out.size() > kMaxLabels) {
    return absl::InvalidArgumentError(
        absl::StrCat("labels: at most ", kMaxLabels, " entries (got ", out.size(), ")"));
  }
  size_t total = 0;
  for (const auto& [key, value] : out) {
    if (key.empty() || key.size() > kMaxLabelKeyBytes) {
      return absl::InvalidArgumentError(absl::StrCat("labels: keys must be 1-", kMaxLabelKeyBytes,
                                                     " bytes (got ", key.size(), ")"));
    }
    for (char c : key) {
      if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-')) {
        return absl::InvalidArgumentError(
            absl::StrCat("labels: key \"", absl::CHexEscape(key),
                         "\" must be of [a-z0-9_.-] (lower case letters, digits, _ . -)"));
      }
    }
    if (value.size() > kMaxLabelValueBytes) {
      return absl::InvalidArgumentError(absl::StrCat("labels: the value of \"", key,
                                                     "\" must be at most ", kMaxLabelValueBytes,
                                                     " bytes (got ", value.size(), ")"));
    }
    if (Utf8ValidPrefix(value) < value.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("labels: the value of \"", key, "\" must be valid UTF-8"));
    }
    total += key.size() + value.size();
  }
  if (total > kMaxLabelsBytes) {
    return absl::InvalidArgumentError(absl::StrCat("labels: keys and values must be at most ",
                                                   kMaxLabelsBytes, " bytes in total (got ", total,
                                                   ")"));
  }
  return out;
}

absl::StatusOr<absl::Duration> ResolveTtl(std::optional<absl::Duration> requested,
                                          const HoldPolicy& policy) {
  if (!requested.has_value()) return policy.default_ttl;
  const absl::Duration ttl = absl::Trunc(*requested, absl::Milliseconds(1));
  if (ttl < absl::Milliseconds(1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("ttl: must be at least 1ms (got ", absl::FormatDuration(*requested), ")"));
  }
  if (ttl > policy.max_ttl) {
    return absl::InvalidArgumentError(absl::StrCat("ttl: must be at most max_ttl ",
                                                   absl::FormatDuration(policy.max_ttl), " (got ",
                                                   absl::FormatDuration(*requested), ")"));
  }
  return ttl;
}

}  // namespace orderhold::domain
