// How a hold's details (scope, quantity, labels, scope limits, place time) are stored in Redis:
// one string per hold in the user's outcome records hash (KeySchema::OutcomesKey, field "\x01" +
// order_id; lua/prelude/ says why there), also copied into the hold's end event (stream field
// "m"). Only holds that are not plain (IsPlain) have one.
//
//   <expire ms>:<place ms>:<quantity>:<n>:<scope, n bytes><scope max_holds>:<scope max_units>:
//   <label count>:{<k>:<key, k bytes><v>:<value, v bytes>}*
//
// All numbers are decimal. Strings are length-prefixed, so any byte may appear in them. The
// scripts read only the header up to the scope (lua/prelude/, hold_quantity_scope) and write
// only the first two numbers (the expiry and Redis TIME of the placement): the caller encodes the
// rest, from <quantity> on, with EncodeDetailsTail. The expiry makes a value self-checking: a
// value whose expiry is not the hold's is a leftover of an earlier hold of the same order_id
// (written by another release) and is ignored.
//
// Pure functions; thread-safe.
#ifndef ORDERHOLD_SERVER_STORE_HOLD_DETAILS_CODEC_H_
#define ORDERHOLD_SERVER_STORE_HOLD_DETAILS_CODEC_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"
#include "server/store/hold_store.h"

namespace orderhold::store {

// `details` from quantity on (place_time is ignored: the script writes it).
std::string EncodeDetailsTail(const HoldDetails& details);

// Whether a hold with `details` is plain: no scope, quantity 1, no labels. A plain hold stores no
// details value (place_hold.lua's `details` argument is ""; only its life record), and reads back
// as the default details.
bool IsPlain(const HoldDetails& details);

// A whole stored value: the hold's expiry (Unix ms) and its details (place_time set).
struct DecodedDetails {
  int64_t expire_ms = 0;
  HoldDetails details;
};

// Parses a whole stored value; nullopt when it is malformed (any trailing byte, a length past the
// end, a quantity < 1, a number that does not parse).
std::optional<DecodedDetails> DecodeDetails(absl::string_view value);

// A hold's life record: what ExtendHold needs and changes, kept beside the details (field
// "\x02" + order_id, lua/prelude/'s LIFE) for every hold placed since ExtendHold exists:
//
//   <expire ms>:<place ms>:<max_expire ms>:<extensions>:<n>:{<k>:<request id, k bytes>}*
//
// Written by the scripts only (place_hold.lua creates it, extend_hold.lua rewrites it); the
// request ids are the last few ExtendHold counted (extend_hold.lua's MAX_REQUEST_IDS).
struct DecodedLife {
  int64_t expire_ms = 0;
  absl::Time place_time;
  absl::Time max_expire_time;
  int64_t extensions = 0;
};

// Parses a whole life record; nullopt when it is malformed (as DecodeDetails).
std::optional<DecodedLife> DecodeLife(absl::string_view value);

}  // namespace orderhold::store

#endif  // ORDERHOLD_SERVER_STORE_HOLD_DETAILS_CODEC_H_
