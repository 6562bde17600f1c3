// Watcher: a WatchHoldEvents call on its own thread, collecting the events it receives (and
// acking each one when asked), for end-to-end tests of event delivery.
#ifndef ORDERHOLD_TESTS_TESTING_HOLD_EVENT_WATCHER_H_
#define ORDERHOLD_TESTS_TESTING_HOLD_EVENT_WATCHER_H_

#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
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

}  // namespace orderhold::testing

#endif  // ORDERHOLD_TESTS_TESTING_HOLD_EVENT_WATCHER_H_
