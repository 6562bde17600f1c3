// The Prometheus metrics of OrderHold, created once per process on a prometheus-cpp Registry and
// passed by reference to the parts that record them. Every child series is resolved in the
// constructor, so recording never calls Family::Add on a hot path. No label carries a user id.
//
// Names follow https://prometheus.io/docs/practices/naming/ (base units: seconds; counters end in
// _total). The README's metrics table documents each one.
//
// Thread-safety: all methods are thread-safe (prometheus-cpp counters, gauges and histograms are).
#ifndef ORDERHOLD_SERVER_METRICS_METRICS_H_
#define ORDERHOLD_SERVER_METRICS_METRICS_H_

#include <array>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "prometheus/counter.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace orderhold::metrics {

// Label `reason` of orderhold_holds_rejected_total.
enum class RejectReason {
  kQuotaExceeded,     // "quota_exceeded": the user had max_holds live holds
  kInvalidArgument,   // "invalid_argument": bad user_id, order_id or ttl
  kUnavailable,       // "unavailable": Redis unreachable or failing
  kDeadlineExceeded,  // "deadline_exceeded": the call's deadline passed first
  kOther,             // "other": any other error
};
inline constexpr int kRejectReasonCount = 5;

// Label `method` of the orderhold_grpc_* metrics.
enum class Method { kPlaceHold, kPay, kListHolds };
inline constexpr int kMethodCount = 3;
inline constexpr int kStatusCodeCount = 17;  // gRPC/absl codes 0 (OK) .. 16 (UNAUTHENTICATED)

class Metrics {
 public:
  // Registers every family on `registry`, which must outlive this object.
  explicit Metrics(prometheus::Registry& registry);
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  // orderhold_holds_placed_total: holds created (idempotent retries not counted).
  prometheus::Counter& holds_placed() { return holds_placed_; }
  // orderhold_holds_paid_total: holds removed by a successful Pay.
  prometheus::Counter& holds_paid() { return holds_paid_; }
  // orderhold_holds_expired_total: holds removed because they expired, by the reaper or by the
  // lazy cleanup inside PlaceHold.
  prometheus::Counter& holds_expired() { return holds_expired_; }
  // orderhold_redis_errors_total: Redis commands that failed (connect, I/O, timeout, error reply).
  prometheus::Counter& redis_errors() { return redis_errors_; }
  // orderhold_reaper_lag_seconds: per reaped hold, reap time minus expire time (Redis clock).
  prometheus::Histogram& reaper_lag() { return reaper_lag_; }
  // orderhold_reaper_tick_duration_seconds: wall time of one reaper tick (host clock).
  prometheus::Histogram& reaper_tick_duration() { return reaper_tick_duration_; }
  // orderhold_reaper_last_success_timestamp_seconds: Unix time of the last tick without error.
  prometheus::Gauge& reaper_last_success() { return reaper_last_success_; }

  // orderhold_holds_rejected_total{reason}: PlaceHold calls that did not yield a hold.
  void RecordRejected(RejectReason reason) { rejected_[static_cast<int>(reason)]->Increment(); }

  // orderhold_grpc_requests_total{method,code} and
  // orderhold_grpc_request_duration_seconds{method}: one finished call.
  void RecordRequest(Method method, absl::StatusCode code, absl::Duration elapsed);

 private:
  prometheus::Counter& holds_placed_;
  prometheus::Counter& holds_paid_;
  prometheus::Counter& holds_expired_;
  prometheus::Counter& redis_errors_;
  prometheus::Histogram& reaper_lag_;
  prometheus::Histogram& reaper_tick_duration_;
  prometheus::Gauge& reaper_last_success_;
  std::array<prometheus::Counter*, kRejectReasonCount> rejected_{};
  std::array<std::array<prometheus::Counter*, kStatusCodeCount>, kMethodCount> requests_{};
  std::array<prometheus::Histogram*, kMethodCount> request_duration_{};
};

}  // namespace orderhold::metrics

#endif  // ORDERHOLD_SERVER_METRICS_METRICS_H_
