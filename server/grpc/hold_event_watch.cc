#include "server/grpc/hold_event_watch.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "server/domain/hold_service.h"
#include "server/grpc/conversions.h"

namespace orderhold::grpc_api {
namespace {

// The deadline of each store call a watch makes (the subscribe, or one read over every
// partition). The watch itself has no deadline (it is long-lived and clients set none), so its
// calls need one of their own: it bounds how long they wait for Redis (queued behind other calls
// or a reconnect, then the round trips) before the stream ends with that error and the client
// reconnects, instead of staying open with nothing arriving. 5 s: the client library's default
// call timeout (ClientOptions::timeout), far above a healthy read (milliseconds).
constexpr absl::Duration kStoreCallTimeout = absl::Seconds(5);

store::CallOptions StoreCallOptions() {
  return store::CallOptions{absl::Now() + kStoreCallTimeout, std::nullopt};
}

}  // namespace

void WatchRegistry::EndAll() {
  // Holding mu_ keeps every registered watch alive (OnDone removes it under mu_ before it can be
  // deleted); End never takes the registry's lock.
  absl::MutexLock lock(&mu_);
  closed_ = true;
  for (HoldEventWatch* watch : watches_) {
    watch->End(grpc::Status(grpc::StatusCode::UNAVAILABLE,
                            "server shutting down; reconnect to resume (unacked events are kept)"));
  }
}

int WatchRegistry::EndDenied(
    absl::FunctionRef<absl::Status(const AuthzRequest&, const std::optional<std::string>&)> check) {
  // As EndAll: holding mu_ keeps every registered watch alive; authz_ and spec_ are immutable.
  absl::MutexLock lock(&mu_);
  int ended = 0;
  for (HoldEventWatch* watch : watches_) {
    if (!watch->authz().has_value()) continue;
    const absl::Status status = check(*watch->authz(), watch->tenant());
    if (status.ok()) continue;
    watch->End(ToGrpcStatus(status));
    ++ended;
  }
  return ended;
}

absl::Status WatchRegistry::Add(HoldEventWatch* watch, const std::string& caller,
                                const std::string& tenant) {
  absl::MutexLock lock(&mu_);
  if (closed_) return absl::UnavailableError("server shutting down; reconnect to resume");
  if (static_cast<int>(watches_.size()) >= max_watches_) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "max_watches: this server already has ", max_watches_,
        " open WatchHoldEvents streams (--max_watches); retry later or on another replica"));
  }
  const auto found = per_caller_.find(caller);
  const int mine = found == per_caller_.end() ? 0 : found->second;
  if (mine >= max_per_caller_) {
    const std::string description = absl::StrCat("the caller has ", mine,
                                                 " WatchHoldEvents streams open on this server "
                                                 "(max_watches_per_caller ",
                                                 max_per_caller_, ")");
    return domain::QuotaError(
        absl::StrCat(description, "; close one, or share a watch between consumers of a group"),
        "caller/watches", description, "WATCH_LIMIT");
  }
  if (const std::optional<int> cap =
          tenants_ == nullptr ? std::nullopt : tenants_->For(tenant).max_watches;
      cap.has_value() && per_tenant_[tenant] >= *cap) {
    const std::string description =
        absl::StrCat("the caller's tenant has ", per_tenant_[tenant],
                     " WatchHoldEvents streams open on this server (its max_watches ", *cap, ")");
    return domain::QuotaError(absl::StrCat(description, "; close one, or retry on another replica"),
                              "tenant/watches", description, "WATCH_LIMIT");
  }
  ++per_caller_[caller];
  if (!tenant.empty()) ++per_tenant_[tenant];
  watches_.insert(watch);
  if (open_ != nullptr) open_->Set(static_cast<double>(watches_.size()));
  return absl::OkStatus();
}

void WatchRegistry::Remove(HoldEventWatch* watch, const std::string& caller,
                           const std::string& tenant) {
  absl::MutexLock lock(&mu_);
  if (watches_.erase(watch) > 0) {
    if (auto it = per_caller_.find(caller); it != per_caller_.end() && --it->second <= 0) {
      per_caller_.erase(it);
    }
    if (auto it = per_tenant_.find(tenant); it != per_tenant_.end() && --it->second <= 0) {
      per_tenant_.erase(it);
    }
  }
  if (open_ != nullptr) open_->Set(static_cast<double>(watches_.size()));
}

HoldEventWatch::HoldEventWatch(domain::EventService& events, domain::EventDispatcher& dispatcher,
                               metrics::Metrics& metrics, WatchRegistry& registry,
                               domain::WatchSpec spec, std::string caller,
                               std::optional<AuthzRequest> authz)
    : events_(events),
      dispatcher_(dispatcher),
      metrics_(metrics),
      registry_(registry),
      spec_(std::move(spec)),
      caller_(std::move(caller)),
      authz_(std::move(authz)) {
  const absl::Status added = registry_.Add(this, caller_, spec_.tenant.value_or(""));
  registered_ = added.ok();
  mu_.Lock();
  if (!registered_) {
    FinishLocked(ToGrpcStatus(added));
    Unlock(false);
    return;
  }
  ++outstanding_;
  mu_.Unlock();
  events_.Subscribe(spec_, StoreCallOptions(), [this](absl::StatusOr<bool> created) {
    mu_.Lock();
    if (!created.ok()) {
      FinishLocked(ToGrpcStatus(created.status()));
    } else if (!finished_) {
      // Joined under mu_, and only while not finished: OnDone (which comes after finishing)
      // then always sees member_ and leaves.
      member_ = dispatcher_.Join(spec_.group, [this] { return Wake(); });
      want_read_ = true;
    }
    Unlock(true);
  });
}

void HoldEventWatch::StartRead() {
  domain::ReadPlan plan = dispatcher_.TakeWork(member_);
  if (plan.empty()) {
    // Parked: the dispatcher wakes us when there is work. A wake that came while we were asking
    // found us busy; ask once more, or it would be lost.
    mu_.Lock();
    reading_ = false;
    want_read_ = std::exchange(rewake_, false) && !finished_;
    Unlock(true);
    return;
  }
  events_.Read(spec_, plan, StoreCallOptions(), [this, plan](domain::ReadResult result) {
    // Partitions whose read filled its budget or whose claim scan goes on: another watch of the
    // group (or this one, once its buffer is sent) reads them again.
    dispatcher_.ReadDone(member_, plan, result);
    mu_.Lock();
    reading_ = false;
    if (!result.status.ok()) {
      FinishLocked(ToGrpcStatus(result.status));
    } else if (!finished_) {
      for (store::StoredEvent& event : result.events) buffer_.push_back(std::move(event));
      WriteNextOrRead();  // nothing read: ask the dispatcher again (it parks us when idle)
    }
    Unlock(true);
  });
}

bool HoldEventWatch::Wake() {
  mu_.Lock();
  const bool took = !finished_;
  if (took) {
    if (reading_ || writing_ || want_read_ || !buffer_.empty()) {
      rewake_ = true;
    } else {
      want_read_ = true;
    }
  }
  Unlock(false);
  return took;
}

void HoldEventWatch::WriteNextOrRead() {
  if (finished_ || writing_) return;
  if (buffer_.empty()) {
    want_read_ = true;
    return;
  }
  orderhold::v1::HoldEvent event;
  EventToProto(buffer_.front(), &event);
  out_.Clear();  // the serializer wants an empty buffer; the previous write is done with it
  if (absl::Status status = SerializeToByteBuffer(event, &out_); !status.ok()) {
    FinishLocked(ToGrpcStatus(status));
    return;
  }
  writing_ = true;
  want_write_ = true;
}

void HoldEventWatch::OnWriteDone(bool ok) {
  mu_.Lock();
  writing_ = false;
  if (!ok) {
    FinishLocked(grpc::Status(grpc::StatusCode::CANCELLED, "write failed"));
  } else {
    metrics_.events_delivered().Increment();
    if (!buffer_.empty()) {
      const store::StoredEvent& sent = buffer_.front();
      if (sent.delivery_count > 1) {
        metrics_.events_redelivered().Increment();
      } else {
        metrics_.event_delivery_delay().Observe(
            absl::ToDoubleSeconds(absl::Now() - sent.end.end_time));
      }
      buffer_.pop_front();
    }
    WriteNextOrRead();
  }
  Unlock(false);
}

void HoldEventWatch::OnCancel() {
  mu_.Lock();
  FinishLocked(grpc::Status::CANCELLED);
  Unlock(false);
}

void HoldEventWatch::End(const grpc::Status& status) {
  mu_.Lock();
  FinishLocked(status);
  Unlock(false);
}

void HoldEventWatch::FinishLocked(const grpc::Status& status) {
  if (finished_) return;
  finished_ = true;
  // Sent-but-unacked and unsent events stay pending in Redis.
  buffer_.clear();
  want_read_ = false;
  metrics_.RecordRequest(metrics::Method::kWatchHoldEvents,
                         static_cast<absl::StatusCode>(status.error_code()),
                         absl::Now() - started_);
  want_finish_ = status;
}

void HoldEventWatch::Unlock(bool op_done) {
  if (op_done) --outstanding_;
  const bool read = std::exchange(want_read_, false);
  const bool write = std::exchange(want_write_, false);
  std::optional<grpc::Status> finish = std::exchange(want_finish_, std::nullopt);
  if (read) {
    ++outstanding_;
    reading_ = true;
    rewake_ = false;  // this read asks the dispatcher afresh
  }
  const bool last = done_ && outstanding_ == 0;
  mu_.Unlock();
  // A finish decided while a write is in flight waits for nothing: gRPC sends the status after the
  // message.
  if (write && !finish.has_value()) StartWrite(&out_);
  if (finish.has_value()) Finish(*finish);
  if (read) StartRead();
  if (last) delete this;
}

void HoldEventWatch::OnDone() {
  if (registered_) registry_.Remove(this, caller_, spec_.tenant.value_or(""));
  mu_.Lock();
  std::shared_ptr<domain::EventDispatcher::Member> member = member_;
  mu_.Unlock();
  // After Leave no wake comes; the reads still in flight are counted in outstanding_.
  if (member != nullptr) dispatcher_.Leave(member);
  mu_.Lock();
  done_ = true;
  Unlock(false);
}

}  // namespace orderhold::grpc_api
