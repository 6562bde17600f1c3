// The scope-limits file (server flag --scope_limits): the server's limits per (user, scope), as
// JSON or YAML of one shape, schema server/limits_file.proto:
//
//   default:                 # scopes no rule matches (absent: {0, 0}, no limit)
//     max_holds: 1
//   rules:                   # the longest prefix that a scope starts with wins
//     - prefix: "event:"
//       max_holds: 2
//       max_units: 8         # 0 or absent: no limit at that level
//
// Read with yaml-cpp (JSON is YAML's flow syntax, so one reader takes both); the tree becomes JSON
// text and protobuf's JSON parser checks it against the schema, so there is no parser of the
// format here. Then domain::ScopeRules::Create checks the values. deploy/limits.example.yaml is a
// commented example.
#ifndef ORDERHOLD_SERVER_LIMITS_FILE_H_
#define ORDERHOLD_SERVER_LIMITS_FILE_H_

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/domain/scope_limits.h"

namespace orderhold {

// Largest limits file read, in bytes: a file has tens of rules; a path to something else (a log,
// a device) fails at once instead of being read whole.
inline constexpr size_t kMaxLimitsFileBytes = 1 << 20;

// The rules in the file at `path`: ParseLimitsFile of its content, with `path` as the name in
// messages. INVALID_ARGUMENT "<path>: cannot read: <reason>" when it cannot be read (missing, a
// directory, no permission) or is over kMaxLimitsFileBytes; else as ParseLimitsFile. Thread-safe;
// blocks on the file system (call it at start and on SIGHUP, not on a request's path).
absl::StatusOr<domain::ScopeRules> LoadLimitsFile(const std::string& path);

// The rules in `text`, a limits file. Every error is INVALID_ARGUMENT, reports the first problem
// found, and names where it is:
//   "<name>:<line>: <field path>: <what>"  e.g. `limits.yaml:7: rules[1].max_holds: expected an
//                                          unsigned integer, got "two"`
//   "<name>:<line>: <what>"                a problem of the whole document (YAML syntax, with its
//                                          column; not a mapping; a second document)
//   "<name>: <what>"                       an empty file (only whitespace or only comments)
// where <line> counts from 1 and <name> is `name_for_errors`. Errors: YAML syntax; not UTF-8;
// an unknown field (a typo must not silently mean "no limit"); a value of the wrong type (a
// quoted number is accepted, as protobuf's JSON mapping does); a negative or fractional count; a
// field given twice; a field with no value ("max_holds:" alone: leave the field out instead); YAML
// tags other than !!str; a YAML alias (*name: nested aliases expand a few hundred bytes into
// gigabytes, so they are refused before anything expands them); the checks of
// domain::ScopeRules::Create (empty, invalid or duplicate prefix, limits above their bounds). When
// the schema check finds several problems it is protobuf that picks the one reported. Thread-safe.
absl::StatusOr<domain::ScopeRules> ParseLimitsFile(absl::string_view text,
                                                   absl::string_view name_for_errors);

}  // namespace orderhold

#endif  // ORDERHOLD_SERVER_LIMITS_FILE_H_
