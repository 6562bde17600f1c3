// TickPacer: when each reap script call of one reaper tick may start, so that the reaper never
// hands Redis a long stretch of its scripts while requests wait behind them.
//
// Redis runs one script at a time, and a client's pipelined commands back to back: 64 partitions'
// reap.lua calls sent at once at the top of every second (the reaper before this pacer) made every
// request that arrived meanwhile wait for all of them (PlaceHold p99 170 ms with the reaper on,
// 7 ms with it off: tests/bench/README.md). So a tick is paced on two bounds:
//   - the first call of each partition gets a slot, spread evenly over `window` from the tick's
//     start (slot k of n at start + window * k / n), instead of all at the start;
//   - at most `max_in_flight` calls are outstanding at once, so Redis never has more than that many
//     reaper scripts queued in front of a request.
// A call whose batch was full (the partition has more due users) is followed up at once, ahead of
// the paced first calls, within the in-flight bound: a backlog (after an outage, or a takeover of
// a dead replica's partitions) drains as a stream of small calls, at full speed when nothing else
// waits, up to `max_calls_per_partition` calls per partition per tick.
//
// Pure bookkeeping: the caller passes the time and reports each call's end. No clock, no threads.
// Thread-compatible (the reaper calls it under its own lock).
#ifndef ORDERHOLD_SERVER_REAPER_TICK_PACER_H_
#define ORDERHOLD_SERVER_REAPER_TICK_PACER_H_

#include <deque>
#include <optional>
#include <vector>

#include "absl/time/time.h"

namespace orderhold::reaper {

struct PaceOptions {
  // The first calls of a tick are spread evenly over this (host time) from its start. Zero: all
  // may start at once (still at most max_in_flight outstanding).
  absl::Duration window = absl::ZeroDuration();
  // Calls outstanding at once, >= 1.
  int max_in_flight = 4;
  // Calls per partition per tick, >= 1; a partition still full after them is left for the next
  // tick (left()).
  int max_calls_per_partition = 1250;
};

class TickPacer {
 public:
  // Paces one call per partition of `partitions` (in that order), from `start`.
  TickPacer(std::vector<int> partitions, absl::Time start, PaceOptions options);

  // The partition whose call may start at `now`, or nullopt (the in-flight bound is reached,
  // or no slot has come, or nothing is left). Follow-ups of full batches come first, then first
  // calls whose slot is <= now. The call counts as in flight until Done().
  std::optional<int> Next(absl::Time now);

  // Records the end of a call of `partition` started by Next(); `more` = its batch was full, so
  // the partition is called again (unless it reached max_calls_per_partition).
  void Done(int partition, bool more);

  // `partition`'s first call, not yet started, is not needed this tick (the reaper peeked and
  // found nothing due): Next() never returns it and next_slot() does not wait for its slot.
  void Skip(int partition);

  // From now on Next() starts nothing (the reaper is stopping); calls in flight still end.
  void Abandon() { abandoned_ = true; }

  // When the next first call's slot comes: InfiniteFuture() when none is left (or abandoned).
  // While a follow-up is ready, Next() does not wait for it.
  absl::Time next_slot() const;

  // Nothing in flight and nothing left to start.
  bool finished() const;

  int in_flight() const { return in_flight_; }

  // Whether max_in_flight calls are outstanding (Next() starts nothing until one ends).
  bool full() const;

  // Whether this is the partition's first call of the tick (for the caller's backlog gauge): true
  // until its first Done().
  bool first_call(int partition) const;

  // Partitions that reached max_calls_per_partition with their last batch still full.
  const std::vector<int>& left() const { return left_; }

 private:
  absl::Time SlotOf(size_t k) const;
  // Moves next_first_ past first calls marked skipped.
  void PassSkipped();

  const std::vector<int> partitions_;
  const absl::Time start_;
  const PaceOptions options_;
  size_t next_first_ = 0;        // index in partitions_ of the next first call
  std::deque<int> follow_ups_;   // partitions whose batch was full, to call again
  std::vector<int> calls_done_;  // indexed by partition: calls ended so far this tick
  std::vector<bool> skipped_;    // indexed by partition: Skip()ped
  std::vector<int> left_;
  int in_flight_ = 0;
  bool abandoned_ = false;
};

}  // namespace orderhold::reaper

#endif  // ORDERHOLD_SERVER_REAPER_TICK_PACER_H_
