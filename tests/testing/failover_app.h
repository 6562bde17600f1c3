// Shared by the end-to-end tests that fail Redis over under load (sentinel_e2e_test,
// cluster_e2e_test): the App settings that make a failure show up quickly (their health checks
// use grpc_health.h). Header-only.
#ifndef ORDERHOLD_TESTS_TESTING_FAILOVER_APP_H_
#define ORDERHOLD_TESTS_TESTING_FAILOVER_APP_H_

#include "absl/time/time.h"
#include "server/config.h"

namespace orderhold::testing {

// A Config for an App in a failover test: gRPC on a free 127.0.0.1 port, `max_holds` holds per
// user, each Redis round trip bounded by 500 ms and WAIT by 200 ms (a failed node becomes an
// UNAVAILABLE answer well inside a caller's deadline of seconds), health checked every 50 ms, the
// reaper every 200 ms with a 1 s lease. The caller sets redis_mode, redis_url and
// redis_wait_replicas (and what its mode needs besides).
inline Config FailoverAppConfig(int max_holds) {
  Config config;
  config.grpc_address = "127.0.0.1:0";
  config.redis_wait_timeout = absl::Milliseconds(200);
  config.redis_timeout = absl::Milliseconds(500);
  config.health_check_interval = absl::Milliseconds(50);
  config.reap_interval = absl::Milliseconds(200);
  config.reaper_lease = absl::Seconds(1);
  config.policy.max_holds = max_holds;
  return config;
}

}  // namespace orderhold::testing

#endif  // ORDERHOLD_TESTS_TESTING_FAILOVER_APP_H_
