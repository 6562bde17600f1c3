// ReadSmallFile: the whole content of a small file (a policy, a password), with one error shape
// for every caller.
#ifndef ORDERHOLD_SERVER_COMMON_FILES_H_
#define ORDERHOLD_SERVER_COMMON_FILES_H_

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"

namespace orderhold {

// The bytes of the file at `path`. INVALID_ARGUMENT "<path>: cannot read: <strerror>" when it
// cannot be opened or read (a directory, a missing file, no permission), or "<path>: larger than
// <max_bytes> bytes". Thread-safe (no shared state).
absl::StatusOr<std::string> ReadSmallFile(const std::string& path, size_t max_bytes);

}  // namespace orderhold

#endif  // ORDERHOLD_SERVER_COMMON_FILES_H_
