#include "server/redis/refresh_schedule.h"

#include <algorithm>
#include <utility>

#include "absl/time/clock.h"
#include "server/common/log.h"

namespace orderhold::redis {

RefreshSchedule::RefreshSchedule(absl::Duration interval, absl::Duration min_interval,
                                 absl::Time first_due, std::string requested_why,
                                 std::string periodic_why)
    : interval_(interval),
      min_interval_(min_interval),
      requested_why_(std::move(requested_why)),
      periodic_why_(std::move(periodic_why)),
      next_periodic_(first_due) {}

void RefreshSchedule::Request() {
  absl::MutexLock lock(&mu_);
  requested_ = true;
}

void RefreshSchedule::DueNow(std::string why) {
  absl::MutexLock lock(&mu_);
  next_periodic_ = absl::Now();
  next_periodic_why_ = std::move(why);
}

bool RefreshSchedule::RequestAndWait(absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  const uint64_t target = begun_ + 1;
  requested_ = true;
  const auto answered = [this, target]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return stopping_ || ended_ >= target;
  };
  return mu_.AwaitWithDeadline(absl::Condition(&answered), deadline) && !stopping_;
}

RefreshSchedule::Turn RefreshSchedule::Next(absl::Time wake, std::string* why) {
  absl::MutexLock lock(&mu_);
  while (true) {
    if (stopping_) return Turn::kStop;
    const absl::Time now = absl::Now();
    const bool requested = requested_ && now >= last_begin_ + min_interval_;
    if (requested || now >= next_periodic_) {
      if (requested) {
        *why = requested_why_;
      } else {
        *why = next_periodic_why_.empty() ? periodic_why_ : std::move(next_periodic_why_);
        next_periodic_why_.clear();
      }
      return Turn::kRefresh;
    }
    if (now >= wake) return Turn::kWake;
    absl::Time until = std::min(wake, next_periodic_);
    if (requested_) {
      // Requested but rate-limited: wake when it is allowed, or to stop.
      until = std::min(until, last_begin_ + min_interval_);
      mu_.AwaitWithDeadline(absl::Condition(&stopping_), until);
    } else {
      mu_.AwaitWithDeadline(absl::Condition(
                                +[](RefreshSchedule* self) ABSL_EXCLUSIVE_LOCKS_REQUIRED(
                                     self->mu_) { return self->stopping_ || self->requested_; },
                                this),
                            until);
    }
  }
}

void RefreshSchedule::Begin() {
  absl::MutexLock lock(&mu_);
  requested_ = false;  // this refresh answers every request made so far
  last_begin_ = absl::Now();
  ++begun_;
}

void RefreshSchedule::End() {
  absl::MutexLock lock(&mu_);
  next_periodic_ = absl::Now() + interval_;
  ++ended_;
}

void RefreshSchedule::Stop() {
  absl::MutexLock lock(&mu_);
  stopping_ = true;
}

bool RefreshSchedule::stopping() const {
  absl::MutexLock lock(&mu_);
  return stopping_;
}

void LogRefreshFailure(const absl::Status& error, bool known, absl::string_view kept) {
  if (known) {
    LogWarning(error.message(), "; keeping ", kept);
  } else {
    LogWarning(error.message());
  }
}

}  // namespace orderhold::redis
