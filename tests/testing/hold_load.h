// HoldLoad: PlaceHold from several threads until Stop(), recording every answer as the caller saw
// it, for the end-to-end tests that break Redis under load (Sentinel and Cluster failovers, a
// reshard) and then check with an oracle that no acknowledged hold was lost and no user
// over-granted. One shape for all of them; each test reads what it needs from calls().
#ifndef ORDERHOLD_TESTS_TESTING_HOLD_LOAD_H_
#define ORDERHOLD_TESTS_TESTING_HOLD_LOAD_H_

#include <atomic>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/random/random.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/orderhold_client.h"
#include "tests/testing/eventually.h"

namespace orderhold::testing {

// One PlaceHold of a HoldLoad, as the caller saw it.
struct LoadCall {
  int user = 0;  // index into LoadOptions::users
  std::string order;
  absl::Time start, end;  // host time around the call
  absl::StatusCode code = absl::StatusCode::kUnknown;
  bool created = false;  // answered OK with created = true (acknowledged)
  absl::Time expire;     // the created hold's expire_time
  // The Pay tried at once on a created hold (LoadOptions::pay_one_in).
  enum class Pay { kNotTried, kPaid, kUnknown } pay = Pay::kNotTried;

  // OK or RESOURCE_EXHAUSTED (the user at the limit): the service working.
  bool served() const {
    return code == absl::StatusCode::kOk || code == absl::StatusCode::kResourceExhausted;
  }
};

struct LoadOptions {
  // Worker w calls through clients[w % clients.size()]. Not empty; must outlive the load.
  std::vector<const client::OrderHoldClient*> clients;
  // The user ids, picked uniformly per call. Not empty.
  std::vector<std::string> users;
  int workers = 4;
  // Each hold's ttl, uniform in [min_ttl, max_ttl].
  absl::Duration min_ttl = absl::Minutes(10);
  absl::Duration max_ttl = absl::Minutes(10);
  // A created hold is paid at once with odds 1 / pay_one_in; 0: never.
  int pay_one_in = 0;
  // A worker waits this long after a call that was not served, as a caller backs off.
  absl::Duration backoff = absl::Milliseconds(10);
};

// Thread-safe.
class HoldLoad {
 public:
  explicit HoldLoad(LoadOptions options) : options_(std::move(options)) {
    for (int w = 0; w < options_.workers; ++w) {
      threads_.emplace_back([this, w] { Work(w); });
    }
  }
  ~HoldLoad() { Stop(); }
  HoldLoad(const HoldLoad&) = delete;
  HoldLoad& operator=(const HoldLoad&) = delete;

  // Stops the workers after their call under way. Idempotent.
  void Stop() {
    stop_ = true;
    for (std::thread& t : threads_) {
      if (t.joinable()) t.join();
    }
  }

  // Every call so far, in the order they ended.
  std::vector<LoadCall> calls() {
    absl::MutexLock lock(&mu_);
    return calls_;
  }
  // Served calls so far.
  int64_t served() {
    absl::MutexLock lock(&mu_);
    return served_;
  }
  // Blocks until `n` more calls were served than when it was called (true), or `timeout`.
  bool ServeMore(int64_t n, absl::Duration timeout = absl::Seconds(30)) {
    const int64_t target = served() + n;
    return Eventually([&] { return served() >= target; }, timeout, absl::Milliseconds(20));
  }
  // Blocks until `n` calls matching `where` that started at or after `since` were served (true),
  // or `timeout` passes (false).
  bool Served(int n, const std::function<bool(const LoadCall&)>& where, absl::Time since,
              absl::Duration timeout = absl::Seconds(30)) {
    return Eventually(
        [&] {
          absl::MutexLock lock(&mu_);
          int served = 0;
          for (auto it = calls_.rbegin(); it != calls_.rend() && served < n; ++it) {
            if (it->start >= since && it->served() && where(*it)) ++served;
          }
          return served >= n;
        },
        timeout, absl::Milliseconds(50));
  }
  // Answers by status code: "OK 1200, RESOURCE_EXHAUSTED 30".
  std::string Answers() {
    std::map<std::string, int> by_code;
    for (const LoadCall& call : calls()) ++by_code[absl::StatusCodeToString(call.code)];
    return absl::StrJoin(by_code, ", ", absl::PairFormatter(" "));
  }
  const std::string& user(const LoadCall& call) const { return options_.users[call.user]; }

 private:
  void Work(int w) {
    absl::BitGen random;
    const client::OrderHoldClient& client = *options_.clients[w % options_.clients.size()];
    for (int seq = 0; !stop_.load(); ++seq) {
      LoadCall call;
      call.user = absl::Uniform<int>(random, 0, static_cast<int>(options_.users.size()));
      call.order = absl::StrCat("w", w, "-", seq);
      const absl::Duration ttl = options_.min_ttl == options_.max_ttl
                                     ? options_.min_ttl
                                     : absl::Milliseconds(absl::Uniform(
                                           random, absl::ToInt64Milliseconds(options_.min_ttl),
                                           absl::ToInt64Milliseconds(options_.max_ttl)));
      call.start = absl::Now();
      absl::StatusOr<v1::PlaceHoldResponse> placed =
          client.PlaceHold(options_.users[call.user], call.order, ttl);
      call.end = absl::Now();
      call.code = placed.status().code();
      call.created = placed.ok() && placed->created();
      if (call.created) {
        call.expire = absl::FromUnixSeconds(placed->hold().expire_time().seconds()) +
                      absl::Nanoseconds(placed->hold().expire_time().nanos());
        if (options_.pay_one_in > 0 && absl::Uniform(random, 0, options_.pay_one_in) == 0) {
          absl::StatusOr<v1::PayResponse> paid = client.Pay(options_.users[call.user], call.order);
          call.pay =
              paid.ok() && !paid->already_paid() ? LoadCall::Pay::kPaid : LoadCall::Pay::kUnknown;
        }
      }
      const bool served = call.served();
      {
        absl::MutexLock lock(&mu_);
        if (served) ++served_;
        calls_.push_back(std::move(call));
      }
      if (!served) absl::SleepFor(options_.backoff);
    }
  }

  const LoadOptions options_;
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
  absl::Mutex mu_;
  std::vector<LoadCall> calls_ ABSL_GUARDED_BY(mu_);
  int64_t served_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace orderhold::testing

#endif  // ORDERHOLD_TESTS_TESTING_HOLD_LOAD_H_
