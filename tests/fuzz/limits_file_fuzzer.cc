// Fuzzes the --scope_limits file parser (server/limits_file.h: YAML or JSON through yaml-cpp and
// protobuf's JSON mapping, then domain::ScopeRules::Create): any file must give rules or
// INVALID_ARGUMENT naming the line, never crash nor hang.
#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"
#include "server/limits_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)orderhold::ParseLimitsFile(absl::string_view(reinterpret_cast<const char*>(data), size),
                                   "fuzz.yaml");
  return 0;
}
