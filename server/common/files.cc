#include "server/common/files.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace orderhold {

absl::StatusOr<std::string> ReadSmallFile(const std::string& path, size_t max_bytes) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(path.c_str(), "rb"),
                                                       &std::fclose);
  if (file == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": cannot read: ", std::strerror(errno)));
  }
  std::string text(max_bytes + 1, '\0');  // one byte more: tells "too large" from "just fits"
  errno = 0;                              // fread need not set it
  const size_t size = std::fread(text.data(), 1, text.size(), file.get());
  if (std::ferror(file.get())) {  // e.g. EISDIR: fopen opens a directory, reading it fails
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": cannot read: ", errno != 0 ? std::strerror(errno) : "read error"));
  }
  if (size > max_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": larger than ", max_bytes, " bytes"));
  }
  text.resize(size);
  return text;
}

}  // namespace orderhold
