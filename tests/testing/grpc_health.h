// Asks a gRPC server on 127.0.0.1 for its grpc.health.v1 status, for end-to-end tests that wait
// for SERVING or NOT_SERVING. Header-only: it needs the health stubs, which only the test binaries
// link (orderhold_test_protos), not orderhold_testing.
#ifndef ORDERHOLD_TESTS_TESTING_GRPC_HEALTH_H_
#define ORDERHOLD_TESTS_TESTING_GRPC_HEALTH_H_

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"

namespace orderhold::testing {

// The status the server at the other end of `channel` reports for `service` ("" : the whole
// server), by one Health.Check within `timeout`; UNKNOWN when the check itself fails
// (unreachable, a failed TLS handshake, NOT_FOUND for an unknown service, deadline). Thread-safe.
inline grpc::health::v1::HealthCheckResponse::ServingStatus Health(
    const std::shared_ptr<grpc::Channel>& channel, const std::string& service = "",
    absl::Duration timeout = absl::Seconds(1)) {
  auto stub = grpc::health::v1::Health::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(service);
  grpc::health::v1::HealthCheckResponse response;
  if (!stub->Check(&context, request, &response).ok()) {
    return grpc::health::v1::HealthCheckResponse::UNKNOWN;
  }
  return response.status();
}

// Health on a new plaintext channel to the server on 127.0.0.1:`grpc_port`.
inline grpc::health::v1::HealthCheckResponse::ServingStatus Health(
    int grpc_port, const std::string& service = "", absl::Duration timeout = absl::Seconds(1)) {
  return Health(grpc::CreateChannel(absl::StrCat("127.0.0.1:", grpc_port),
                                    grpc::InsecureChannelCredentials()),
                service, timeout);
}

}  // namespace orderhold::testing

#endif  // ORDERHOLD_TESTS_TESTING_GRPC_HEALTH_H_
