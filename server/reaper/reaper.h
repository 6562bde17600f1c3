// Reaper: the background loop that removes expired holds from Redis.
//
// Expired holds already stop counting the moment they expire (every script compares against
// Redis TIME); the reaper only reclaims their memory, keeps the due index small and measures how
// late it is (orderhold_reaper_lag_seconds). Shaped after Sidekiq's scheduled poller
// (lib/sidekiq/scheduled.rb): every interval (with jitter, so replicas started together do not
// tick in lockstep) it visits each index shard with bounded atomic batches (reap.lua), "punts" on
// errors (log + count, retry next tick) and never dies; its sleep is interruptible by Stop().
//
// Several replicas may reap the same Redis at once: each due hold is removed and counted by
// exactly one script run. Work per tick: one call per shard (KeySchema::kShardCount) plus one per
// batch of due users: it grows with the due holds, not with the number of users.
//
// Thread-safety: RunOnce() may be called from any thread (tests call it with the loop stopped);
// Start()/Stop() from one owner thread.
#ifndef ORDERHOLD_SERVER_REAPER_REAPER_H_
#define ORDERHOLD_SERVER_REAPER_REAPER_H_

#include <optional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/common/clock.h"
#include "server/metrics/metrics.h"
#include "server/store/hold_store.h"

namespace orderhold::reaper {

struct ReaperOptions {
  // Time between ticks (--reap_interval).
  absl::Duration interval = absl::Seconds(1);
  // Each sleep is interval * (1 + U(-jitter, +jitter)).
  double jitter = 0.1;
  // Users visited per script call (bounds the time one call blocks Redis).
  int max_users_per_call = 100;
  // Calls per shard per tick; what is left waits for the next tick (bounds one tick).
  int max_calls_per_shard = 50;
  // Deadline of one round of store calls (one call per shard still having due holds).
  absl::Duration call_timeout = absl::Seconds(2);
};

// What one tick did.
struct ReapStats {
  int reaped = 0;             // holds removed
  int calls = 0;              // script calls made
  bool backlog_left = false;  // a shard still had due holds when max_calls_per_shard was reached
};

class Reaper {
 public:
  // `store`, `metrics` and `clock` must outlive the reaper.
  Reaper(store::HoldStore& store, metrics::Metrics& metrics, ReaperOptions options,
         const Clock& clock = SystemClock::Get());
  // Stops the loop if running.
  ~Reaper();
  Reaper(const Reaper&) = delete;
  Reaper& operator=(const Reaper&) = delete;

  // One tick: reaps every shard (calls run concurrently, pipelined by the store), records
  // orderhold_holds_expired_total, orderhold_reaper_lag_seconds (store clock) and
  // orderhold_reaper_tick_duration_seconds; on full success sets
  // orderhold_reaper_last_success_timestamp_seconds. `now` overrides the store clock (tests).
  // Returns the first store error (UNAVAILABLE, DEADLINE_EXCEEDED) after doing what it could.
  absl::StatusOr<ReapStats> RunOnce(std::optional<absl::Time> now = std::nullopt);

  // Starts the background loop (first tick at once). No-op if already running.
  void Start();
  // Stops and joins the loop; an in-flight tick finishes first (each of its rounds is bounded by
  // call_timeout).
  void Stop();

 private:
  void Loop();

  store::HoldStore& store_;
  metrics::Metrics& metrics_;
  const ReaperOptions options_;
  const Clock& clock_;
  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace orderhold::reaper

#endif  // ORDERHOLD_SERVER_REAPER_REAPER_H_
