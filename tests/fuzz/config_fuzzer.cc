// Fuzzes the server's configuration check (server/config.h: ParseRedisUrl of --redis_url, as
// ConfigFromFlags runs it, then ValidateConfig): every string and number a flag or ORDERHOLD_*
// variable can set (addresses, the Redis URL, Sentinel names, the key prefix, limits and
// durations), drawn from the input. Any combination must give OK or INVALID_ARGUMENT naming the
// flag, never crash. File flags stay empty (no file is read).
#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/config.h"
#include "server/redis/redis_url.h"

namespace {

absl::Duration Millis(FuzzedDataProvider& in) {
  return absl::Milliseconds(in.ConsumeIntegral<int64_t>() % (int64_t{400} * 24 * 3600 * 1000));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace orderhold;  // NOLINT: a fuzz entry point
  FuzzedDataProvider in(data, size);
  Config config;
  config.grpc_address = in.ConsumeRandomLengthString(64);
  config.metrics_address = in.ConsumeRandomLengthString(64);
  absl::StatusOr<redis::RedisEndpoint> url =
      redis::ParseRedisUrl(in.ConsumeRandomLengthString(256));
  if (url.ok()) config.redis_url = *std::move(url);
  config.redis_mode = static_cast<RedisMode>(in.ConsumeIntegralInRange<int>(0, 2));
  config.redis_sentinel_master = in.ConsumeRandomLengthString(64);
  config.redis_sentinel_username = in.ConsumeRandomLengthString(32);
  config.redis_sentinel_password = in.ConsumeRandomLengthString(32);
  config.redis_tls.server_name = in.ConsumeRandomLengthString(64);
  config.key_prefix = in.ConsumeRandomLengthString(64);
  config.policy.max_holds = in.ConsumeIntegral<int>();
  config.policy.max_units = in.ConsumeIntegral<int64_t>();
  config.policy.default_ttl = Millis(in);
  config.policy.max_ttl = Millis(in);
  config.policy.max_hold_lifetime = Millis(in);
  config.policy.max_extensions = in.ConsumeIntegral<int>();
  config.reap_interval = Millis(in);
  config.redis_connections = in.ConsumeIntegral<int>();
  config.redis_timeout = Millis(in);
  config.redis_wait_replicas = in.ConsumeIntegral<int>();
  config.redis_wait_timeout = Millis(in);
  config.health_check_interval = Millis(in);
  config.outcomes.retention = Millis(in);
  config.outcomes.max_per_user = in.ConsumeIntegral<int>();
  config.event_retention = Millis(in);
  config.max_watches = in.ConsumeIntegral<int>();
  config.reaper_lease = Millis(in);
  config.shutdown_grace = Millis(in);
  (void)ValidateConfig(config);
  return 0;
}
