// Shared by the end-to-end tests that fail Redis over under load (sentinel_e2e_test,
// cluster_e2e_test): the App settings that make a failure show up quickly, and the standard
// grpc.health.v1 check of an App. Header-only: for test binaries that link orderhold_test_protos.
#ifndef ORDERHOLD_TESTS_TESTING_FAILOVER_APP_H_
#define ORDERHOLD_TESTS_TESTING_FAILOVER_APP_H_

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/grpcpp.h"
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

// What grpc.health.v1.Health/Check answers for `service` ("": the server as a whole) on
// 127.0.0.1:`port`, or UNKNOWN when the call itself fails (it is given 2 s). Thread-safe.
inline grpc::health::v1::HealthCheckResponse::ServingStatus HealthOf(
    int port, const std::string& service = "") {
  auto stub = grpc::health::v1::Health::NewStub(
      grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(2)));
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(service);
  grpc::health::v1::HealthCheckResponse response;
  if (!stub->Check(&context, request, &response).ok()) {
    return grpc::health::v1::HealthCheckResponse::UNKNOWN;
  }
  return response.status();
}

}  // namespace orderhold::testing

#endif  // ORDERHOLD_TESTS_TESTING_FAILOVER_APP_H_
