// Domain vocabulary: a hold, the policy limiting holds, and the validation of what callers send.
// No gRPC or Redis client types here.
#ifndef ORDERHOLD_SERVER_DOMAIN_HOLD_H_
#define ORDERHOLD_SERVER_DOMAIN_HOLD_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "server/store/hold_store.h"

namespace orderhold::domain {

// One unpaid order occupying one of a user's slots until expire_time (exclusive: the hold is live
// while expire_time > now), millisecond precision.
struct Hold {
  std::string user_id;
  std::string order_id;
  absl::Time expire_time;
  store::HoldDetails details;  // scope, quantity, labels, scope limits, place time
};

// The limits in force (server flags --max_holds, --max_units, --default_ttl, --max_ttl).
// What a request's scope_limits may do to the operator's rule (--request_scope_limits).
enum class RequestScopeLimits {
  kCeiling,  // "ceiling": only tighten: per field the smaller of the two, 0 in the request = none
  kReplace,  // "replace": the request's limits replace the rule (0 = no limit), as before
};

struct HoldPolicy {
  int max_holds = 3;                               // live holds per user, >= 1
  absl::Duration default_ttl = absl::Minutes(30);  // when a request gives no ttl
  absl::Duration max_ttl = absl::Hours(24);        // longest ttl a request may ask for
  int64_t max_units = 0;                           // live units per user; 0 = no limit
  // ExtendHold (--max_hold_lifetime, --max_extensions): a hold's max_expire_time is its place time
  // + max_hold_lifetime (fixed at placement); calls that moved a hold's expiry, at most (0: only
  // the lifetime cap limits extensions).
  absl::Duration max_hold_lifetime = absl::Hours(2);
  int max_extensions = 0;
  // --request_scope_limits: whether a PlaceHold's scope_limits only tighten the --scope_limits
  // rule (the default) or replace it (scope_limits.h ApplyRequestLimits).
  RequestScopeLimits request_scope_limits = RequestScopeLimits::kCeiling;
};

// Upper bound of max_hold_lifetime: a year. Keeps every stored instant a plain integer of
// milliseconds in the scripts (Lua prints numbers beyond 14 digits in exponent form).
inline constexpr absl::Duration kMaxHoldLifetimeLimit = absl::Hours(24 * 366);
// Upper bound of max_extensions.
inline constexpr int kMaxExtensionsLimit = 1000;
// Max length of ExtendHoldRequest.request_id, in bytes.
inline constexpr size_t kMaxRequestIdBytes = 64;

// Max length of user_id and order_id, in bytes.
inline constexpr size_t kMaxIdBytes = 128;
// Upper bound of max_holds: keeps every script's work per call small.
inline constexpr int kMaxHoldsLimit = 10000;
// Upper bound of any max_units (--max_units, a scope's) and of one hold's quantity.
inline constexpr int64_t kMaxUnits = 1000000000;

// The length of the longest prefix of `s` that is valid UTF-8 (s.size() when all of it is): the
// offset of the first bad byte otherwise.
size_t Utf8ValidPrefix(absl::string_view s);

// INVALID_ARGUMENT naming the flag when max_holds is outside 1..kMaxHoldsLimit, a ttl is below
// 1 ms, default_ttl > max_ttl, max_hold_lifetime is outside 1 ms..kMaxHoldLifetimeLimit, or
// max_extensions is outside 0..kMaxExtensionsLimit.
absl::Status ValidatePolicy(const HoldPolicy& policy);

// INVALID_ARGUMENT naming `field` unless `value` is 1-128 bytes of valid UTF-8 without control
// characters (C0, DEL, C1): an id as a caller sends it. Every other character is allowed and
// stored verbatim.
absl::Status ValidateLocalId(absl::string_view field, absl::string_view value);

// An id as the domain receives it: ValidateLocalId's, or a tenant's (tenant.h QualifiedId: a
// tenant name, U+001F, then an id ValidateLocalId accepts). Only the gRPC layer makes the second
// form (tenant.h QualifyId), after checking what the caller sent with ValidateLocalId.
absl::Status ValidateId(absl::string_view field, absl::string_view value);

// Labels a request may carry (PlaceHoldRequest.labels): at most kMaxLabels entries, keys of
// 1-kMaxLabelKeyBytes bytes of [a-z0-9_.-], values of at most kMaxLabelValueBytes bytes of UTF-8,
// keys and values at most kMaxLabelsBytes bytes in total.
inline constexpr size_t kMaxLabels = 16;
inline constexpr size_t kMaxLabelKeyBytes = 63;
inline constexpr size_t kMaxLabelValueBytes = 256;
inline constexpr size_t kMaxLabelsBytes = 2048;

// INVALID_ARGUMENT naming `request_id` unless it is "" (none) or 1-kMaxRequestIdBytes bytes of
// valid UTF-8 without control characters (as ValidateId).
absl::Status ValidateRequestId(absl::string_view request_id);

// Max length of PayRequest.payment_reference, in bytes.
inline constexpr size_t kMaxPaymentReferenceBytes = 128;

// INVALID_ARGUMENT naming `payment_reference` unless it is "" (none) or 1-kMaxPaymentReferenceBytes
// bytes of valid UTF-8 without control characters (as ValidateLocalId): a payment provider's
// charge or intent id (Stripe's "pi_..." is 27 bytes), kept as sent.
absl::Status ValidatePaymentReference(absl::string_view payment_reference);

// INVALID_ARGUMENT naming `scope` unless it is "" (unscoped) or passes ValidateId (a tenant's
// scope is qualified as its user_id is).
absl::Status ValidateScope(absl::string_view scope);

// The labels of a request, as sent (a key sent twice: the last value wins, as in a protobuf map),
// validated. INVALID_ARGUMENT naming `labels` (and the key) when a rule above is broken.
absl::StatusOr<store::Labels> ValidateLabels(
    std::vector<std::pair<std::string, std::string>> labels);

// The ttl to use: `requested`, or policy.default_ttl when unset; truncated to whole milliseconds.
// INVALID_ARGUMENT naming `ttl` when it is under 1 ms (zero, negative) or above policy.max_ttl.
absl::StatusOr<absl::Duration> ResolveTtl(std::optional<absl::Duration> requested,
                                          const HoldPolicy& policy);

}  // namespace orderhold::domain

#endif  // ORDERHOLD_SERVER_DOMAIN_HOLD_H_
