// Watcher: a WatchHoldEvents call on its own thread, collecting the events it receives (and
// acking each one when asked), for end-to-end tests of event delivery. ResumingWatcher: a consumer
// as a real one is written, resuming under its name when its watch ends and acking in batches.
#ifndef ORDERHOLD_TESTS_TESTING_HOLD_EVENT_WATCHER_H_
#define ORDERHOLD_TESTS_TESTING_HOLD_EVENT_WATCHER_H_

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/orderhold_client.h"
#include "grpcpp/client_context.h"

namespace orderhold::testing {

// Thread-safe: events(), status(), WaitFor() and Stop() may be called from any thread.
// A watch running on its own thread, collecting events (and acking them if asked) until Stop().
class Watcher {
 public:
  Watcher(const client::OrderHoldClient& client, orderhold::v1::WatchHoldEventsRequest request,
          bool ack)
      : client_(client), request_(std::move(request)), ack_(ack) {
    thread_ = std::thread([this] {
      absl::Status status = client_.WatchHoldEvents(
          request_,
          [this](const orderhold::v1::HoldEvent& event) {
            if (ack_) {
              // May fail when the server is going away: the event then stays pending and comes
              // back, which is what the restart tests check.
              (void)client_.AckHoldEvents(request_.consumer_group(), {event.event_id()});
            }
            absl::MutexLock lock(&mu_);
            events_.push_back(event);
            return true;
          },
          context_);
      absl::MutexLock lock(&mu_);
      status_ = status;
      ended_ = true;
    });
  }
  ~Watcher() { Stop(); }

  // Cancels the call (a consumer that dies without acking) and joins.
  void Stop() {
    context_.TryCancel();
    if (thread_.joinable()) thread_.join();
  }
  // Waits until at least `n` events arrived.
  bool WaitFor(size_t n, absl::Duration timeout = absl::Seconds(20)) {
    absl::MutexLock lock(&mu_);
    auto enough = [this, n]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return events_.size() >= n; };
    return mu_.AwaitWithTimeout(absl::Condition(&enough), timeout);
  }
  bool WaitEnded(absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    return mu_.AwaitWithTimeout(absl::Condition(&ended_), timeout);
  }
  std::vector<orderhold::v1::HoldEvent> events() {
    absl::MutexLock lock(&mu_);
    return events_;
  }
  // The ids of the events received from the `from`-th on (for acking what is new without
  // copying everything received so far).
  std::vector<std::string> EventIdsFrom(size_t from) {
    absl::MutexLock lock(&mu_);
    std::vector<std::string> ids;
    for (size_t i = from; i < events_.size(); ++i) ids.push_back(events_[i].event_id());
    return ids;
  }
  absl::Status status() {
    absl::MutexLock lock(&mu_);
    return status_;
  }

 private:
  const client::OrderHoldClient& client_;
  const orderhold::v1::WatchHoldEventsRequest request_;
  const bool ack_;
  grpc::ClientContext context_;
  absl::Mutex mu_;
  std::vector<orderhold::v1::HoldEvent> events_ ABSL_GUARDED_BY(mu_);
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

// One consumer (request's consumer_group and consumer), resumed under the same name whenever its
// watch ends: a read that fails while Redis restarts or a slot migrates ends the stream with
// UNAVAILABLE (the service's contract: the consumer reconnects), and the new watch takes back this
// consumer's pending events first. It acks as a real consumer does: what arrived, in one
// AckHoldEvents call every kAckEvery, not one call per event (which makes a single-threaded test
// consumer the bottleneck on a loaded machine: events pending past ack_timeout are then claimed
// and sent again). A failed ack is not retried: the events stay pending and come back.
// Thread-safe: events(), ends(), WaitFor() and Stop() may be called from any thread.
class ResumingWatcher {
 public:
  static constexpr absl::Duration kAckEvery = absl::Milliseconds(50);

  ResumingWatcher(const client::OrderHoldClient& client,
                  orderhold::v1::WatchHoldEventsRequest request)
      : client_(client), request_(std::move(request)) {
    thread_ = std::thread([this] {
      while (!stop_.load()) {
        auto watcher = std::make_unique<Watcher>(client_, request_, /*ack=*/false);
        Watcher* const current = watcher.get();
        {
          absl::MutexLock lock(&mu_);
          current_ = std::move(watcher);
        }
        size_t acked = 0;  // events of `current` acked so far
        bool ended = false;
        while (!stop_.load() && !ended) {
          ended = current->WaitEnded(kAckEvery);
          AckNew(*current, &acked);
        }
        current->Stop();
        AckNew(*current, &acked);
        absl::MutexLock lock(&mu_);
        if (!stop_.load()) ends_.push_back(current->status().ToString());
        for (orderhold::v1::HoldEvent& event : current->events()) events_.push_back(event);
        current_.reset();
      }
    });
  }
  ~ResumingWatcher() { Stop(); }
  ResumingWatcher(const ResumingWatcher&) = delete;
  ResumingWatcher& operator=(const ResumingWatcher&) = delete;

  // Cancels the watch under way and joins.
  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  // Every event received so far, by all of this consumer's watches.
  std::vector<orderhold::v1::HoldEvent> events() {
    absl::MutexLock lock(&mu_);
    std::vector<orderhold::v1::HoldEvent> out = events_;
    if (current_ != nullptr) {
      for (orderhold::v1::HoldEvent& event : current_->events()) out.push_back(event);
    }
    return out;
  }
  // Waits until at least `n` events arrived (over every watch), polling every 10 ms.
  bool WaitFor(size_t n, absl::Duration timeout = absl::Seconds(20)) {
    const absl::Time give_up = absl::Now() + timeout;
    while (events().size() < n) {
      if (absl::Now() > give_up) return false;
      absl::SleepFor(absl::Milliseconds(10));
    }
    return true;
  }
  // Why each watch that ended before Stop() ended.
  std::vector<std::string> ends() {
    absl::MutexLock lock(&mu_);
    return ends_;
  }

 private:
  // Acks the events `watcher` received since the first `*acked`.
  void AckNew(Watcher& watcher, size_t* acked) {
    const std::vector<std::string> ids = watcher.EventIdsFrom(*acked);
    *acked += ids.size();
    if (!ids.empty()) (void)client_.AckHoldEvents(request_.consumer_group(), ids);
  }

  const client::OrderHoldClient& client_;
  const orderhold::v1::WatchHoldEventsRequest request_;
  std::atomic<bool> stop_{false};
  absl::Mutex mu_;
  std::unique_ptr<Watcher> current_ ABSL_GUARDED_BY(mu_);
  std::vector<orderhold::v1::HoldEvent> events_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> ends_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace orderhold::testing

#endif  // ORDERHOLD_TESTS_TESTING_HOLD_EVENT_WATCHER_H_
