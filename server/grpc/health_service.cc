#include "server/grpc/health_service.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "server/common/log.h"

namespace orderhold::grpc_api {
namespace {

using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

constexpr char kCheckPath[] = "/grpc.health.v1.Health/Check";
constexpr char kWatchPath[] = "/grpc.health.v1.Health/Watch";

// A Watch refused before it starts: it only finishes, with `status`.
class RefusedWatch final : public grpc::ServerWriteReactor<HealthCheckResponse> {
 public:
  explicit RefusedWatch(const grpc::Status& status) { Finish(status); }
  void OnDone() override { delete this; }
};

}  // namespace

// One open Watch: sends the latest status of its name whenever it differs from the last one sent,
// one write at a time.
class HealthService::Watcher final : public grpc::ServerWriteReactor<HealthCheckResponse> {
 public:
  Watcher(HealthService& service, std::string name) : service_(service), name_(std::move(name)) {}

  const std::string& name() const { return name_; }

  // The name's status is now `status` (called under the service's lock).
  void Send(Status status) {
    absl::MutexLock lock(&mu_);
    latest_ = status;
    if (!writing_ && !finished_ && (!sent_any_ || latest_ != sent_)) WriteLocked();
  }

  void OnWriteDone(bool ok) override {
    absl::MutexLock lock(&mu_);
    writing_ = false;
    if (!ok) return FinishLocked(grpc::Status(grpc::StatusCode::CANCELLED, "stream broken"));
    if (!finished_ && latest_ != sent_) WriteLocked();
  }
  void OnCancel() override {
    absl::MutexLock lock(&mu_);
    FinishLocked(grpc::Status::CANCELLED);
  }
  void OnDone() override {
    service_.Forget(this);
    delete this;
  }

 private:
  void WriteLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    writing_ = true;
    sent_any_ = true;
    sent_ = latest_;
    response_.set_status(sent_);
    StartWrite(&response_);
  }
  void FinishLocked(const grpc::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finished_) return;
    finished_ = true;
    Finish(status);
  }

  HealthService& service_;
  const std::string name_;
  absl::Mutex mu_;
  Status latest_ ABSL_GUARDED_BY(mu_) = HealthCheckResponse::SERVICE_UNKNOWN;
  Status sent_ ABSL_GUARDED_BY(mu_) = HealthCheckResponse::SERVICE_UNKNOWN;
  bool sent_any_ ABSL_GUARDED_BY(mu_) = false;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  HealthCheckResponse response_ ABSL_GUARDED_BY(mu_);
};

HealthService::HealthService(Authorizer* authorizer) : authorizer_(authorizer) {
  absl::MutexLock lock(&mu_);
  statuses_[""] = HealthCheckResponse::SERVING;
}

HealthService::~HealthService() = default;

void HealthService::SetServingStatus(const std::string& service_name, bool serving) {
  absl::MutexLock lock(&mu_);
  if (shut_down_) return;
  Set(service_name, serving ? HealthCheckResponse::SERVING : HealthCheckResponse::NOT_SERVING);
}

void HealthService::SetServingStatus(bool serving) {
  absl::MutexLock lock(&mu_);
  if (shut_down_) return;
  for (auto& [name, status] : statuses_) {
    Set(name, serving ? HealthCheckResponse::SERVING : HealthCheckResponse::NOT_SERVING);
  }
}

void HealthService::Shutdown() {
  absl::MutexLock lock(&mu_);
  if (shut_down_) return;
  for (auto& [name, status] : statuses_) Set(name, HealthCheckResponse::NOT_SERVING);
  shut_down_ = true;
}

void HealthService::Set(const std::string& service_name, Status status) {
  statuses_[service_name] = status;
  for (Watcher* watcher : watchers_) {
    if (watcher->name() == service_name) watcher->Send(status);
  }
}

HealthService::Status HealthService::StatusOf(const std::string& service_name) const {
  const auto it = statuses_.find(service_name);
  return it == statuses_.end() ? HealthCheckResponse::SERVICE_UNKNOWN : it->second;
}

void HealthService::Forget(Watcher* watcher) {
  absl::MutexLock lock(&mu_);
  watchers_.erase(watcher);
}

grpc::Status HealthService::Admit(const grpc::CallbackServerContext& context,
                                  absl::string_view method, const std::string& service_name) const {
  if (authorizer_ != nullptr) {
    if (absl::Status denied = authorizer_->CheckPath(context, method); !denied.ok()) {
      return grpc::Status(grpc::StatusCode::PERMISSION_DENIED, std::string(denied.message()));
    }
  }
  if (service_name.size() > kMaxServiceNameBytes) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        absl::StrCat("service: at most ", kMaxServiceNameBytes, " bytes, got ",
                                     service_name.size()));
  }
  return grpc::Status::OK;
}

grpc::ServerUnaryReactor* HealthService::Check(grpc::CallbackServerContext* context,
                                               const HealthCheckRequest* request,
                                               HealthCheckResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  grpc::Status status = Admit(*context, kCheckPath, request->service());
  if (status.ok()) {
    absl::MutexLock lock(&mu_);
    const Status serving = StatusOf(request->service());
    if (serving == HealthCheckResponse::SERVICE_UNKNOWN) {
      status = grpc::Status(grpc::StatusCode::NOT_FOUND, "service name unknown");
    } else {
      response->set_status(serving);
    }
  }
  reactor->Finish(status);
  return reactor;
}

grpc::ServerWriteReactor<HealthCheckResponse>* HealthService::Watch(
    grpc::CallbackServerContext* context, const HealthCheckRequest* request) {
  if (grpc::Status status = Admit(*context, kWatchPath, request->service()); !status.ok()) {
    return new RefusedWatch(status);
  }
  auto* watcher = new Watcher(*this, request->service());
  absl::MutexLock lock(&mu_);
  watchers_.insert(watcher);
  watcher->Send(StatusOf(request->service()));
  return watcher;
}

}  // namespace orderhold::grpc_api
