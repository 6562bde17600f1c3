// Page tokens of ListHolds (AIP-158, https://google.aip.dev/158): where the next page starts,
// opaque to the caller and bound to the request it came from.
//
// A token is base64url of: a version byte, a 64-bit FNV-1a hash of the request's user_id and scope
// (so a token used with another user or scope is refused instead of listing from a position that
// means nothing there), the last listed hold's expire_time in Unix ms, and its order_id. It is
// not secret (it names an order of the caller's own user) and not signed: a forged one only
// moves where the caller's own list starts.
#ifndef ORDERHOLD_SERVER_DOMAIN_PAGE_TOKEN_H_
#define ORDERHOLD_SERVER_DOMAIN_PAGE_TOKEN_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/store/hold_store.h"

namespace orderhold::domain {

// Page sizes of ListHolds: 0 (unset) means kDefaultPageSize; more than kMaxPageSize is lowered to
// it (AIP-158); negative is INVALID_ARGUMENT.
inline constexpr int kDefaultPageSize = 100;
inline constexpr int kMaxPageSize = 1000;
// A token longer than this is refused before it is decoded (a real one is under 200 bytes).
inline constexpr size_t kMaxPageTokenBytes = 512;

// The token of a page that ends at `last`, for the request (user_id, scope).
std::string EncodePageToken(absl::string_view user_id, absl::string_view scope,
                            const store::ListCursor& last);

// The cursor `token` carries. INVALID_ARGUMENT naming page_token when it is longer than
// kMaxPageTokenBytes, not base64url, not of this version or shape, or was issued for another
// user_id or scope. Thread-safe.
absl::StatusOr<store::ListCursor> DecodePageToken(absl::string_view token,
                                                  absl::string_view user_id,
                                                  absl::string_view scope);

// The page size to use for `requested` (see kDefaultPageSize): INVALID_ARGUMENT naming page_size
// when negative.
absl::StatusOr<int> ResolvePageSize(int64_t requested);

}  // namespace orderhold::domain

#endif  // ORDERHOLD_SERVER_DOMAIN_PAGE_TOKEN_H_
