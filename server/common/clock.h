// The time source, injected wherever host time is read (Envoy's TimeSource idea): tests pass a
// fake. Host time is used only for deadlines, scheduling and metrics timestamps; expiry decisions
// use the Redis server clock (see server/store/lua/*.lua).
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
