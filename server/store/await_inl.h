// Implementation of orderhold::store::Await (declared in hold_store.h).
#ifndef ORDERHOLD_SERVER_STORE_AWAIT_INL_H_
#define ORDERHOLD_SERVER_STORE_AWAIT_INL_H_

#include <memory>
#include <optional>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"

namespace orderhold::store {

template <typename T, typename Start>
absl::StatusOr<T> Await(Start&& start) {
  struct State {
    absl::Notification done;
    std::optional<absl::StatusOr<T>> result;
  };
  // Shared: the callback may run on another thread after Notify() while this frame returns.
  auto state = std::make_shared<State>();
  std::forward<Start>(start)([state](absl::StatusOr<T> result) {
    state->result = std::move(result);
    state->done.Notify();
  });
  state->done.WaitForNotification();
  return std::move(*state->result);
}

}  // namespace orderhold::store

#endif  // ORDERHOLD_SERVER_STORE_AWAIT_INL_H_
