// EventTrimmer: keeps the hold event streams of the partitions a reaper replica owns within
// --event_retention, and reports what consumers have left unread.
//
// At most every `interval` (host clock) it deletes the owned partitions' events older than
// `retention` (store clock); a partition whose last trim found no consumer group waits
// `idle_interval` instead, unless a group was created there since (OnGroupCreated: the "group"
// nudge of ensure_group.lua) (an idle replica's trims follow the groups, not the partitions),
// counting
// in orderhold_events_trimmed_unacked_total (with a warning
// log) the trimmed events some consumer group had not acked, and sets
// orderhold_events_oldest_unacked_age_seconds{group} to each group's oldest unacked event over
// those partitions; a group no trim has reported for two idle intervals loses its series (a
// deleted group). Failed partitions are skipped and retried at the next trim. The calls go a
// few at a time (max_in_flight), so a trim never queues many scripts in front of requests.
//
// Thread-safety: thread-safe.
#ifndef ORDERHOLD_SERVER_REAPER_EVENT_TRIMMER_H_
#define ORDERHOLD_SERVER_REAPER_EVENT_TRIMMER_H_

#include <map>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/common/clock.h"
#include "server/metrics/metrics.h"
#include "server/store/event_log.h"

namespace orderhold::reaper {

struct EventTrimOptions {
  // Events older than this are deleted (--event_retention).
  absl::Duration retention = absl::Hours(24);
  // Time between trims.
  absl::Duration interval = absl::Seconds(10);
  // Time between trims of a partition whose last trim found no consumer group (no stream, or a
  // stream no group reads): nothing there feeds the gauge, and its events only age. A group
  // created since shows in the gauge at the next interval (its "group" nudge), or within this
  // when that nudge was lost. Capped at `retention`.
  absl::Duration idle_interval = absl::Minutes(1);
  // Trim calls outstanding at once (>= 1): they run in Redis while requests wait.
  int max_in_flight = 2;
  // Deadline of one round of trim calls (max_in_flight of them).
  absl::Duration call_timeout = absl::Seconds(2);
  // --consumer_idle_timeout: consumers idle longer leave their groups (their pending events go
  // back to the group: trim_events.lua). Checked on a partition at most every
  // consumer_check_interval (XINFO CONSUMERS per group); ZeroDuration: never.
  absl::Duration consumer_idle = absl::ZeroDuration();
  absl::Duration consumer_check_interval = absl::Minutes(1);
};

class EventTrimmer {
 public:
  // `log`, `metrics` and `clock` must outlive this object.
  EventTrimmer(store::HoldEventLog& log, metrics::Metrics& metrics, const Clock& clock,
               EventTrimOptions options);
  EventTrimmer(const EventTrimmer&) = delete;
  EventTrimmer& operator=(const EventTrimmer&) = delete;

  // Trims `partitions` to events newer than store_now - retention when `interval` has passed
  // (host clock) since the last trim, at once the first time; otherwise does nothing. A partition
  // whose last trim found no group is skipped until idle_interval has passed. Blocks until the
  // trim calls answered (at most call_timeout); store errors only skip a partition (tried again
  // at the next trim).
  void MaybeTrim(const std::vector<int>& partitions, absl::Time store_now);

  // A consumer group was created on `partition`'s stream (a "group" nudge: see
  // store/event_nudges.h): its next trim is at the next interval, even after one that found no
  // group. Thread-safe; out-of-range partitions are ignored.
  void OnGroupCreated(int partition);

 private:
  void Trim(const std::vector<int>& partitions, absl::Time store_now);

  store::HoldEventLog& log_;
  metrics::Metrics& metrics_;
  const Clock& clock_;
  const EventTrimOptions options_;
  absl::Mutex mu_;
  absl::Time next_trim_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  // Per partition: not trimmed before this (host clock; idle_interval after a trim that found no
  // group).
  std::vector<absl::Time> partition_next_ ABSL_GUARDED_BY(mu_);
  // Per partition: its next trim checks idle consumers from this time on (host clock).
  std::vector<absl::Time> consumers_next_ ABSL_GUARDED_BY(mu_);
  // Per group whose series this replica set: when a trim last reported it (host clock).
  std::map<std::string, absl::Time> group_seen_ ABSL_GUARDED_BY(mu_);
};

}  // namespace orderhold::reaper

#endif  // ORDERHOLD_SERVER_REAPER_EVENT_TRIMMER_H_
