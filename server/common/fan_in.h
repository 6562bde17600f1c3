// Asynchronous results, and the one fan-in helper that collects them.
//
// Every store operation answers through a Callback<T>, called exactly once, possibly on another
// thread (a Redis I/O thread) or inline. FanIn starts n such operations at once and hands all n
// results to one continuation when the last arrives; AwaitAll and Await block on it, for
// background threads (the reaper, the health reporter) and tests. It lives in common/ so the
// store, the domain and the reaper share it without the store depending on the layers above.
//
//   FanIn<bool>(partitions, [&](size_t i, Callback<bool> done) { log.EnsureGroup(i, ..., done); },
//               [](std::vector<absl::StatusOr<bool>> results) { ... });
//   auto r = Await<ListHoldsResult>([&](auto done) { store.ListHolds("u", {}, std::move(done)); });
#ifndef ORDERHOLD_SERVER_COMMON_FAN_IN_H_
#define ORDERHOLD_SERVER_COMMON_FAN_IN_H_

#include <cstddef>
#include <memory>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"

namespace orderhold {

// Called exactly once with the result of an asynchronous operation.
template <typename T>
using Callback = absl::AnyInvocable<void(absl::StatusOr<T>) &&>;

// Runs `start(i, callback)` for every i in [0, n), all at once, and calls `finish` with the n
// results (in index order) once the last callback ran, on that callback's thread; with n == 0 at
// once, on the calling thread. A result whose callback was never called cannot happen: the
// callbacks are called exactly once. Thread-safe; `start` runs on the calling thread.
template <typename T, typename Start>
void FanIn(size_t n, Start&& start,
           absl::AnyInvocable<void(std::vector<absl::StatusOr<T>>) &&> finish) {
  struct State {
    explicit State(size_t n, absl::AnyInvocable<void(std::vector<absl::StatusOr<T>>) &&> finish)
        : results(n, absl::UnknownError("not run")), pending(n), finish(std::move(finish)) {}
    absl::Mutex mu;
    std::vector<absl::StatusOr<T>> results ABSL_GUARDED_BY(mu);
    size_t pending ABSL_GUARDED_BY(mu);
    absl::AnyInvocable<void(std::vector<absl::StatusOr<T>>) &&> finish;
  };
  if (n == 0) {
    std::move(finish)(std::vector<absl::StatusOr<T>>{});
    return;
  }
  // Shared by the n callbacks: the last one to run finishes, whichever thread it is on.
  auto state = std::make_shared<State>(n, std::move(finish));
  for (size_t i = 0; i < n; ++i) {
    start(i, Callback<T>([state, i](absl::StatusOr<T> result) {
            std::vector<absl::StatusOr<T>> all;
            {
              absl::MutexLock lock(&state->mu);
              state->results[i] = std::move(result);
              if (--state->pending > 0) return;
              all = std::move(state->results);
            }
            std::move(state->finish)(std::move(all));
          }));
  }
}

// FanIn that blocks the calling thread until all n results are in, and returns them. For
// background threads and tests only: never call it on a gRPC callback thread.
template <typename T, typename Start>
std::vector<absl::StatusOr<T>> AwaitAll(size_t n, Start&& start) {
  struct State {
    absl::Notification done;
    std::vector<absl::StatusOr<T>> results;
  };
  // Shared: the last callback may still be inside Notify() when this frame returns.
  auto state = std::make_shared<State>();
  FanIn<T>(n, std::forward<Start>(start), [state](std::vector<absl::StatusOr<T>> results) {
    state->results = std::move(results);
    state->done.Notify();
  });
  state->done.WaitForNotification();
  return std::move(state->results);
}

// Runs one asynchronous operation, `start(callback)`, and blocks until its callback ran (AwaitAll
// of one). For background threads and tests only.
template <typename T, typename Start>
absl::StatusOr<T> Await(Start&& start) {
  return std::move(AwaitAll<T>(1, [&start](size_t, Callback<T> done) {
                     std::forward<Start>(start)(std::move(done));
                   }).front());
}

}  // namespace orderhold

#endif  // ORDERHOLD_SERVER_COMMON_FAN_IN_H_
