#include "server/grpc/health_reporter.h"

#include "absl/time/clock.h"
#include "server/common/log.h"

namespace orderhold::grpc_api {

HealthReporter::HealthReporter(store::HoldStore& store,
                               std::vector<grpc::HealthCheckServiceInterface*> health,
                               absl::Duration interval, absl::Duration timeout)
    : store_(store), health_(std::move(health)), interval_(interval), timeout_(timeout) {}

HealthReporter::~HealthReporter() { Stop(); }

void HealthReporter::Report(bool serving) {
  // By name: the overload without one would set "liveness" too.
  for (grpc::HealthCheckServiceInterface* health : health_) {
    health->SetServingStatus("", serving);
    health->SetServingStatus(kServiceName, serving);
  }
}

void HealthReporter::Start() {
  Report(false);
  for (grpc::HealthCheckServiceInterface* health : health_) {
    health->SetServingStatus(kLivenessServiceName, true);
  }
  absl::MutexLock lock(&mu_);
  stopping_ = false;
  if (!thread_.joinable()) thread_ = std::thread([this] { Loop(); });
}

void HealthReporter::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void HealthReporter::Loop() {
  bool first = true, serving = false;
  while (true) {
    absl::StatusOr<absl::Time> pong = store::Await<absl::Time>([&](auto done) {
      store_.Ping(store::CallOptions{absl::Now() + timeout_, std::nullopt}, std::move(done));
    });
    if (first || pong.ok() != serving) {
      serving = pong.ok();
      Report(serving);
      if (serving) {
        LogInfo("health: Redis answers: SERVING");
      } else {
        LogWarning("health: Redis does not answer (", pong.status().ToString(), "): NOT_SERVING");
      }
      first = false;
    }
    absl::MutexLock lock(&mu_);
    if (mu_.AwaitWithTimeout(absl::Condition(&stopping_), interval_)) return;
  }
}

}  // namespace orderhold::grpc_api
