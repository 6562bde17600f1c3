#include "server/common/poller.h"

#include <utility>

namespace orderhold {

Poller::Poller(absl::Duration interval, absl::AnyInvocable<void()> task)
    : thread_([this, interval, task = std::move(task)]() mutable {
        absl::MutexLock lock(&mu_);
        while (!mu_.AwaitWithTimeout(absl::Condition(&stopping_), interval)) {
          mu_.Unlock();
          task();
          mu_.Lock();
        }
      }) {}

Poller::~Poller() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

}  // namespace orderhold
