// RefreshSchedule: when a topology's background thread refreshes what it knows — the one
// skeleton of ClusterTopology (the slot map: CLUSTER SHARDS) and SentinelTopology (the primary's
// address: SENTINEL GET-MASTER-ADDR-BY-NAME), which differ only in how they ask.
//
// - Periodic: a refresh at least every `interval` after the previous one ended.
// - Requested: Request() (a MOVED, a failed connection, ReportNotPrimary, an unknown slot) makes
//   one due at once, but at most one starts per `min_interval`: requests in between coalesce into
//   one at its end, so a burst of redirects is one refresh, not hundreds. Any refresh that starts
//   answers every request made before it.
// - Waited for: RequestAndWait() returns once a refresh that started after the call has ended
//   (RedisTopology::Refresh: "ask the source of truth now").
// The refresh itself runs on the owner's thread, bracketed by Begin()/End(); Next() is that
// thread's wait. The shape follows the cluster spec's client guidance (refresh on start, on
// MOVED, on connection failures; https://redis.io/docs/reference/cluster-spec/) and Sentinel's
// client guide (ask again after a failure; https://redis.io/docs/reference/sentinel-clients/).
//
// Thread-safe.
#ifndef ORDERHOLD_SERVER_REDIS_REFRESH_SCHEDULE_H_
#define ORDERHOLD_SERVER_REDIS_REFRESH_SCHEDULE_H_

#include <cstdint>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace orderhold::redis {

class RefreshSchedule {
 public:
  // `interval` > 0 and `min_interval` >= 0 (checked by the owners' Create). The first periodic
  // refresh is due at `first_due`. `requested_why` and `periodic_why` name the two kinds of
  // refresh in the owner's log lines ("requested"/"periodic", "ReportNotPrimary"/"poll").
  RefreshSchedule(absl::Duration interval, absl::Duration min_interval, absl::Time first_due,
                  std::string requested_why, std::string periodic_why);

  // Asks for a refresh as soon as min_interval allows. Cheap; never blocks on a refresh.
  void Request();
  // Makes the periodic refresh due now, named `why` this once (e.g. "poll after resubscribing":
  // what was missed while not listening).
  void DueNow(std::string why);
  // Requests a refresh and waits until one that started after this call has ended. False when
  // `deadline` passed first or Stop() was called.
  bool RequestAndWait(absl::Time deadline);

  // What the owner's thread does next.
  enum class Turn {
    kRefresh,  // a refresh is due: Begin(), refresh, End()
    kWake,     // `wake` passed: the owner's own work (Sentinel: its subscription)
    kStop,     // Stop() was called
  };
  // Blocks until a refresh is due, `wake` passes or Stop(); for kRefresh, `*why` names it.
  Turn Next(absl::Time wake, std::string* why);
  // Bracket every refresh, including one made outside the thread (the owners' first, in
  // Create): Begin answers the requests made so far; End schedules the next periodic one and
  // releases the RequestAndWait callers waiting for it.
  void Begin();
  void End();

  // Ends Next() (kStop) and every RequestAndWait (false). Idempotent.
  void Stop();
  bool stopping() const;

 private:
  const absl::Duration interval_;
  const absl::Duration min_interval_;
  const std::string requested_why_;
  const std::string periodic_why_;

  mutable absl::Mutex mu_;
  bool requested_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time next_periodic_ ABSL_GUARDED_BY(mu_);
  absl::Time last_begin_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  std::string next_periodic_why_ ABSL_GUARDED_BY(mu_);  // empty: periodic_why_
  uint64_t begun_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t ended_ ABSL_GUARDED_BY(mu_) = 0;
};

// The warning for a refresh that failed: `error`'s message, plus "; keeping <kept>" when an older
// answer is still in use (`known`). The owners log it once per distinct message.
void LogRefreshFailure(const absl::Status& error, bool known, absl::string_view kept);

}  // namespace orderhold::redis

#endif  // ORDERHOLD_SERVER_REDIS_REFRESH_SCHEDULE_H_
