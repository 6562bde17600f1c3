// Fuzzes --redis_url parsing (server/redis/redis_url.h): any string an operator or an environment
// variable may hold must give a RedisEndpoint or INVALID_ARGUMENT, never crash.
#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"
#include "server/redis/redis_url.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)orderhold::redis::ParseRedisUrl(
      absl::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
