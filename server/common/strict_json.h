// ParseStrictJson: a JSON text (RFC 8259) read into an nlohmann::json document (Debian's
// nlohmann-json3-dev, through its SAX interface) by a reader that fails closed. A configuration
// file that says who may call what must never be guessed at, so what a general JSON parser lets
// through is refused here, naming where it is:
//   - `null` anywhere: templating writes it for an unset value (Helm's toJson, jq), and a reader
//     that drops it turns "principals": [null] into "principals": [], which matches every peer.
//   - a key that repeats in one object: which one wins differs between parsers (protobuf and
//     nlohmann keep the last, gRPC's own reader refuses it, as RFC 8259 section 4 allows).
//   - nesting deeper than `max_depth` containers: no policy needs it, and the reader's work and
//     memory stay linear in the text (a depth bound, not a stack overflow or a quadratic walk).
//   - a text over `max_bytes`, trailing content after the value, and invalid UTF-8 (nlohmann's
//     lexer refuses it).
// Shapes (is a value an object, a list of strings) are the caller's to check, with JsonPath for
// its messages.
//
// Thread-safe: no shared state.
#ifndef ORDERHOLD_SERVER_COMMON_STRICT_JSON_H_
#define ORDERHOLD_SERVER_COMMON_STRICT_JSON_H_

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace orderhold {

struct StrictJsonOptions {
  // Containers (objects and lists) nested at most this deep; the top-level value is depth 1.
  int max_depth = 16;
  // The text's size bound, bytes.
  size_t max_bytes = 1 << 20;
};

// The document `text` holds. INVALID_ARGUMENT when it is not one JSON value, and for a `null`, a
// repeated key, nesting deeper than options.max_depth or a text over options.max_bytes, the
// message naming the place ("allow_rules[0].source.principals[1]: null is not allowed ...").
absl::StatusOr<nlohmann::json> ParseStrictJson(absl::string_view text,
                                               const StrictJsonOptions& options = {});

// A place in a document for messages: JsonPath("allow_rules", 2) is "allow_rules[2]",
// JsonPath("allow_rules[2]", "name") is "allow_rules[2].name", JsonPath("", "name") is "name".
std::string JsonPath(absl::string_view parent, absl::string_view key);
std::string JsonPath(absl::string_view parent, size_t index);

// The JSON type of `value` as a message says it: "an object", "a list", "a string", "a number",
// "a boolean" (or "null").
const char* JsonTypeName(const nlohmann::json& value);

}  // namespace orderhold

#endif  // ORDERHOLD_SERVER_COMMON_STRICT_JSON_H_
