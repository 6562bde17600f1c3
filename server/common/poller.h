// Poller: runs a task every `interval` on a thread of its own until destroyed; the destructor
// wakes the thread and joins it, so the task never runs after it returns. What Authorizer and
// Tenants use to read their files again (grpc/authorizer.h, grpc/tenants.h).
//
// Thread-safe.
#ifndef ORDERHOLD_SERVER_COMMON_POLLER_H_
#define ORDERHOLD_SERVER_COMMON_POLLER_H_

#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace orderhold {

class Poller {
 public:
  // Starts the thread: `task` first runs `interval` (> 0) from now, then every `interval` after
  // the previous run ended. Whatever `task` uses must outlive the Poller.
  Poller(absl::Duration interval, absl::AnyInvocable<void()> task);
  ~Poller();
  Poller(const Poller&) = delete;
  Poller& operator=(const Poller&) = delete;

 private:
  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace orderhold

#endif  // ORDERHOLD_SERVER_COMMON_POLLER_H_
