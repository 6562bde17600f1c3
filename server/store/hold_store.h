// HoldStore: where holds live. The interface the domain talks to; two implementations:
// RedisHoldStore (production, server/store/redis_hold_store.h) and FakeHoldStore (tests, in
// tests/testing/). One contract suite (tests/contract/) runs the same cases against both.
//
// Every operation is asynchronous: it returns at once and calls `done` exactly once, possibly on
// another thread (a Redis I/O thread) or inline (the fake, or an immediate failure). This is what
// keeps Redis I/O off the gRPC callback threads. Callbacks must not block.
//
// Time. Each operation takes `CallOptions::now`: unset in production, the store then uses its own
// authoritative clock (Redis server TIME); tests may set it to decide expiry deterministically.
// Results carry the `now` that was used, so callers compute remaining time on the same clock.
// Precision is one millisecond. "Live" means expire_time > now.
//
// Errors (absl codes, mapped 1:1 to gRPC codes by the caller):
//   UNAVAILABLE        the backend is unreachable, failed, or is overloaded. Fail closed: an
//                      operation that reports an error did not grant anything the caller may rely
//                      on (a PlaceHold whose reply was lost may still have been recorded; a retry
//                      with the same order_id returns it, created = false).
//   DEADLINE_EXCEEDED  `CallOptions::deadline` passed before the request could be sent (a reply
//                      that arrives late is still delivered: it is the truth about what happened).
//
// Thread-safety: implementations are thread-safe.
#ifndef ORDERHOLD_SERVER_STORE_HOLD_STORE_H_
#define ORDERHOLD_SERVER_STORE_HOLD_STORE_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace orderhold::store {

// Called exactly once with the result of an asynchronous operation.
template <typename T>
using Callback = absl::AnyInvocable<void(absl::StatusOr<T>) &&>;

struct CallOptions {
  // Give up (DEADLINE_EXCEEDED) after this instant, host clock.
  absl::Time deadline = absl::InfiniteFuture();
  // Tests only: the instant to decide expiry against. Unset: the store's own clock.
  std::optional<absl::Time> now;
};

// One hold as stored: the user is implied by the call.
struct StoredHold {
  std::string order_id;
  absl::Time expire_time;  // millisecond precision
  friend bool operator==(const StoredHold&, const StoredHold&) = default;
};

struct PlaceHoldArgs {
  std::string user_id;
  std::string order_id;
  absl::Duration ttl;  // > 0, whole milliseconds
  int max_holds = 0;   // >= 1
};

struct PlaceHoldResult {
  enum class Outcome {
    kCreated,       // the hold was recorded; expire_time = now + ttl
    kAlreadyHeld,   // order_id already had a live hold; expire_time is that hold's (not extended)
    kLimitReached,  // max_holds live holds; nothing recorded; expire_time is the earliest live
                    // one's
  };
  Outcome outcome = Outcome::kCreated;
  absl::Time now;           // the store's clock when the operation ran
  absl::Time expire_time;   // see Outcome
  int active_holds = 0;     // live holds after the operation
  int expired_removed = 0;  // holds found no longer live and removed on the way (lazy cleanup)
};

struct PayResult {
  bool paid = false;       // false: no live hold for (user_id, order_id)
  absl::Time now;          // the store's clock when the operation ran
  absl::Time expire_time;  // the paid hold's expiry; meaningful only when paid
};

struct ListHoldsResult {
  absl::Time now;                 // the store's clock when the operation ran
  std::vector<StoredHold> holds;  // live holds, earliest expire_time first, ties by order_id
};

struct ReapResult {
  absl::Time now;                               // the store's clock when the operation ran
  std::vector<absl::Time> reaped_expire_times;  // one entry per hold removed
  bool more = false;  // the shard may still have due holds beyond this batch's limit
};

class HoldStore {
 public:
  virtual ~HoldStore() = default;

  // Atomically: remove the user's holds that are no longer live, then create, return the
  // existing live hold for args.order_id, or refuse at the limit (see PlaceHoldResult::Outcome).
  virtual void PlaceHold(PlaceHoldArgs args, CallOptions options,
                         Callback<PlaceHoldResult> done) = 0;

  // Atomically removes the live hold (user_id, order_id), if any. An expired hold is never paid.
  virtual void Pay(std::string user_id, std::string order_id, CallOptions options,
                   Callback<PayResult> done) = 0;

  // The user's live holds. Read-only.
  virtual void ListHolds(std::string user_id, CallOptions options,
                         Callback<ListHoldsResult> done) = 0;

  // Removes due holds (expire_time <= now) of at most `max_users` users of index shard `shard`
  // (0 <= shard < shard_count()) and keeps the due index right. Safe to run concurrently from
  // several processes: each due hold is removed, and reported, by exactly one call.
  virtual void Reap(int shard, int max_users, CallOptions options, Callback<ReapResult> done) = 0;

  // Number of index shards the reaper must visit.
  virtual int shard_count() const = 0;

  // Checks the backend answers; yields the store's clock (Redis TIME). UNAVAILABLE or
  // DEADLINE_EXCEEDED when it does not.
  virtual void Ping(CallOptions options, Callback<absl::Time> done) = 0;
};

// Runs an asynchronous store operation and blocks the calling thread until its callback ran.
// For background threads and tests only: never call it on a gRPC callback thread.
//   auto result = Await<PayResult>([&](auto cb) { store.Pay("u", "o", {}, std::move(cb)); });
template <typename T, typename Start>
absl::StatusOr<T> Await(Start&& start);

}  // namespace orderhold::store

#include "server/store/await_inl.h"  // IWYU pragma: export

#endif  // ORDERHOLD_SERVER_STORE_HOLD_STORE_H_
