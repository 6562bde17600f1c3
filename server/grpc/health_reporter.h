// HealthReporter: keeps the standard grpc.health.v1.Health service truthful about Redis.
//
// A background thread pings the store every `interval`; "" and "orderhold.v1.OrderHold" are
// SERVING while Redis answers and NOT_SERVING while it does not, and recover by themselves when
// it comes back. Transitions are logged once each (not every interval). "liveness" is SERVING
// throughout (kLivenessServiceName).
//
// Thread-safety: construct, Start() and Stop() from one owner thread.
#ifndef ORDERHOLD_SERVER_GRPC_HEALTH_REPORTER_H_
#define ORDERHOLD_SERVER_GRPC_HEALTH_REPORTER_H_

#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/health_check_service_interface.h"
#include "server/store/hold_store.h"

namespace orderhold::grpc_api {

// The service name reported besides "".
inline constexpr char kServiceName[] = "orderhold.v1.OrderHold";
// SERVING from Start() until the server shuts down, whatever Redis says: for a liveness probe
// (Kubernetes' grpc probe `service: liveness`). A process that answers is alive; restarting it
// cannot bring Redis back, so a Redis outage must only take it out of readiness ("" and
// kServiceName).
inline constexpr char kLivenessServiceName[] = "liveness";

class HealthReporter {
 public:
  // `store` and every `health` (the gRPC port's, and the --health_address port's when there is
  // one: each grpc::Server has its own) must outlive the reporter. Each ping may take up to
  // `timeout`.
  HealthReporter(store::HoldStore& store, std::vector<grpc::HealthCheckServiceInterface*> health,
                 absl::Duration interval, absl::Duration timeout);
  ~HealthReporter();  // Stop()

  // Reports NOT_SERVING ("liveness": SERVING), then starts checking (first check at once).
  void Start();
  // Stops checking; the last status stays (main then shuts the health service down).
  void Stop();

 private:
  void Loop();
  void Report(bool serving);

  store::HoldStore& store_;
  const std::vector<grpc::HealthCheckServiceInterface*> health_;
  const absl::Duration interval_;
  const absl::Duration timeout_;
  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace orderhold::grpc_api

#endif  // ORDERHOLD_SERVER_GRPC_HEALTH_REPORTER_H_
