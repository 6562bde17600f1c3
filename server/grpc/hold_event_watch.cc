#include "server/grpc/hold_event_watch.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "server/grpc/orderhold_service.h"

namespace orderhold::grpc_api {

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

bool WatchRegistry::Add(HoldEventWatch* watch) {
  absl::MutexLock lock(&mu_);
  if (closed_) return false;
  watches_.insert(watch);
  return true;
}

void WatchRegistry::Remove(HoldEventWatch* watch) {
  absl::MutexLock lock(&mu_);
  watches_.erase(watch);
}

HoldEventWatch::HoldEventWatch(domain::EventService& events, metrics::Metrics& metrics,
                               WatchRegistry& registry, domain::WatchSpec spec,
                               absl::Duration idle_poll)
    : events_(events),
      metrics_(metrics),
      registry_(registry),
      spec_(std::move(spec)),
      idle_poll_(idle_poll) {
  registered_ = registry_.Add(this);
  absl::MutexLock lock(&mu_);
  if (!registered_) {
    FinishLocked(
        grpc::Status(grpc::StatusCode::UNAVAILABLE, "server shutting down; reconnect to resume"));
    return;
  }
  ++outstanding_;
  events_.Subscribe(spec_, store::CallOptions{absl::Now() + absl::Seconds(5), std::nullopt},
                    [this](absl::StatusOr<bool> created) {
                      mu_.Lock();
                      if (!created.ok()) {
                        FinishLocked(ToGrpcStatus(created.status()));
                      } else if (!finished_) {
                        Poll();
                      }
                      Release();
                    });
}

void HoldEventWatch::Poll() {
  if (finished_) return;
  ++outstanding_;
  events_.Poll(spec_, cursor_, store::CallOptions{absl::Now() + absl::Seconds(5), std::nullopt},
               [this](absl::StatusOr<std::vector<store::StoredEvent>> events) {
                 mu_.Lock();
                 if (!events.ok()) {
                   FinishLocked(ToGrpcStatus(events.status()));
                 } else if (!finished_) {
                   for (store::StoredEvent& event : *events) buffer_.push_back(std::move(event));
                   if (buffer_.empty()) {
                     // Nothing new: poll again after idle_poll (interruptible by End/OnCancel).
                     ++outstanding_;
                     alarm_.Set(absl::ToChronoTime(absl::Now() + idle_poll_), [this](bool fired) {
                       mu_.Lock();
                       if (fired && !finished_) Poll();
                       Release();
                     });
                   } else {
                     WriteNextOrPoll();
                   }
                 }
                 Release();
               });
}

void HoldEventWatch::WriteNextOrPoll() {
  if (finished_ || writing_) return;
  if (buffer_.empty()) {
    Poll();
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
  StartWrite(&out_);
}

void HoldEventWatch::OnWriteDone(bool ok) {
  absl::MutexLock lock(&mu_);
  writing_ = false;
  if (!ok) {
    FinishLocked(grpc::Status(grpc::StatusCode::CANCELLED, "write failed"));
    return;
  }
  metrics_.events_delivered().Increment();
  if (buffer_.front().delivery_count > 1) metrics_.events_redelivered().Increment();
  buffer_.pop_front();
  WriteNextOrPoll();
}

void HoldEventWatch::OnCancel() {
  absl::MutexLock lock(&mu_);
  FinishLocked(grpc::Status::CANCELLED);
}

void HoldEventWatch::End(const grpc::Status& status) {
  absl::MutexLock lock(&mu_);
  FinishLocked(status);
}

void HoldEventWatch::FinishLocked(const grpc::Status& status) {
  if (finished_) return;
  finished_ = true;
  // Sent-but-unacked and unsent events stay pending in Redis. A set alarm is left to fire (at
  // most idle_poll): cancelling it could run its callback inline, under mu_.
  buffer_.clear();
  metrics_.RecordRequest(metrics::Method::kWatchHoldEvents,
                         static_cast<absl::StatusCode>(status.error_code()), absl::ZeroDuration());
  Finish(status);
}

void HoldEventWatch::OnDone() {
  if (registered_) registry_.Remove(this);
  bool last = false;
  {
    absl::MutexLock lock(&mu_);
    done_ = true;
    last = outstanding_ == 0;
  }
  if (last) delete this;
}

void HoldEventWatch::Release() {
  const bool last = --outstanding_ == 0 && done_;
  mu_.Unlock();
  if (last) delete this;
}

}  // namespace orderhold::grpc_api
