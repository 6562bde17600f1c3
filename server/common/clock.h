// The time source for scheduling (Envoy's TimeSource idea): when a reaper tick, an event sweep or a
// trim is due, and the durations they report; tests pass a fake to step it. Two kinds of time are
// deliberately NOT read through it:
// - deadlines of Redis calls (store::CallOptions::deadline) and gRPC waits are real time,
//   absl::Now(): the Redis client and gRPC measure them against the real clock, so a fake clock
//   must neither expire nor stretch a network call (8 places: the reaper, ownership, trimmer,
//   dispatcher sweep, health, watch reads, App shutdown, request latencies);
// - expiry decisions use the Redis server clock (see server/store/lua/*.lua).
#ifndef ORDERHOLD_SERVER_COMMON_CLOCK_H_
#define ORDERHOLD_SERVER_COMMON_CLOCK_H_

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace orderhold {

// Thread-safe: implementations must allow concurrent Now() calls.
class Clock {
 public:
  virtual ~Clock() = default;
  // The current time.
  virtual absl::Time Now() const = 0;
};

// absl::Now(). Stateless; use the shared instance.
class SystemClock final : public Clock {
 public:
  absl::Time Now() const override { return absl::Now(); }
  static SystemClock& Get() {
    static SystemClock clock;
    return clock;
  }
};

}  // namespace orderhold

#endif  // ORDERHOLD_SERVER_COMMON_CLOCK_H_
