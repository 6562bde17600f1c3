// HealthService: the standard grpc.health.v1.Health service (Check and Watch,
// https://github.com/grpc/grpc/blob/master/doc/health-checking.md) for the main gRPC port under an
// --authz_policy, where every call is checked against the policy before it is answered, as every
// OrderHold method is: gRPC's own health service (EnableDefaultHealthCheckService) answers anyone
// the TLS handshake admits, and Debian's gRPC 1.51 lacks the library of gRPC's own policy engine
// (gRFC A43), which would check it. The health-only port (--health_address, for kubelet probes that
// present no certificate) keeps gRPC's own service: it serves nothing else.
//
// It is also the server's HealthCheckServiceInterface (installed with
// grpc::HealthCheckServiceServerBuilderOption, which hands it to the server), so HealthReporter
// drives it as it drives gRPC's. The same semantics as gRPC's own service: "" is SERVING from the
// start; a service name never set is NOT_FOUND to Check and SERVICE_UNKNOWN to Watch; Watch sends
// the status at once and again on every change (the latest one only, when changes come faster
// than the client reads); after Shutdown() every name is NOT_SERVING and stays so. A service name
// over kMaxServiceNameBytes is INVALID_ARGUMENT. A denied call is PERMISSION_DENIED with
// Authorizer::CheckPath's message, before anything is read.
//
// Thread-safe. Open Watch streams end when the server shuts down (cancelled), each holding a few
// hundred bytes.
#ifndef ORDERHOLD_SERVER_GRPC_HEALTH_SERVICE_H_
#define ORDERHOLD_SERVER_GRPC_HEALTH_SERVICE_H_

#include <map>
#include <set>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/health_check_service_interface.h"
#include "server/grpc/authorizer.h"

namespace orderhold::grpc_api {

class HealthService final : public grpc::health::v1::Health::CallbackService,
                            public grpc::HealthCheckServiceInterface {
 public:
  // The longest service name a request may name, bytes (gRPC's own service's bound).
  static constexpr size_t kMaxServiceNameBytes = 200;

  // `authorizer` (null: every call is answered, as gRPC's own service does) must outlive this.
  explicit HealthService(Authorizer* authorizer);
  ~HealthService() override;

  // grpc::HealthCheckServiceInterface: `service_name`'s status; SERVING or NOT_SERVING. Ignored
  // after Shutdown().
  void SetServingStatus(const std::string& service_name, bool serving) override;
  // Every name set so far.
  void SetServingStatus(bool serving) override;
  // Every name NOT_SERVING, for good.
  void Shutdown() override;

  // grpc.health.v1.Health.
  grpc::ServerUnaryReactor* Check(grpc::CallbackServerContext* context,
                                  const grpc::health::v1::HealthCheckRequest* request,
                                  grpc::health::v1::HealthCheckResponse* response) override;
  grpc::ServerWriteReactor<grpc::health::v1::HealthCheckResponse>* Watch(
      grpc::CallbackServerContext* context,
      const grpc::health::v1::HealthCheckRequest* request) override;

 private:
  class Watcher;
  using Status = grpc::health::v1::HealthCheckResponse::ServingStatus;

  // PERMISSION_DENIED (policy) or INVALID_ARGUMENT (a name too long), else OK.
  grpc::Status Admit(const grpc::CallbackServerContext& context, absl::string_view method,
                     const std::string& service_name) const;
  // The status of `service_name` (SERVICE_UNKNOWN for a name never set).
  Status StatusOf(const std::string& service_name) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Set(const std::string& service_name, Status status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Forget(Watcher* watcher);  // the watcher is done

  Authorizer* const authorizer_;
  mutable absl::Mutex mu_;
  std::map<std::string, Status> statuses_ ABSL_GUARDED_BY(mu_);
  std::set<Watcher*> watchers_ ABSL_GUARDED_BY(mu_);
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace orderhold::grpc_api

#endif  // ORDERHOLD_SERVER_GRPC_HEALTH_SERVICE_H_
