#include "client/bench/load_generator.h"

#include <grpcpp/client_context.h>
#include <grpcpp/support/channel_arguments.h>
#include <sys/prctl.h>
#include <time.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <optional>
#include <thread>
#include <utility>

#include "absl/random/distributions.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/orderhold_client.h"

namespace orderhold::client::bench {
namespace {

// Timer slack of the pacing thread (PR_SET_TIMERSLACK), ns.
constexpr unsigned long kTimerSlackNs = 1'000;  // NOLINT(runtime/int): prctl's argument type

std::chrono::steady_clock::time_point SteadyTime(int64_t ns) {
  return std::chrono::steady_clock::time_point(std::chrono::nanoseconds(ns));
}

const char* ConnectivityName(grpc_connectivity_state state) {
  switch (state) {
    case GRPC_CHANNEL_IDLE:
      return "IDLE";
    case GRPC_CHANNEL_CONNECTING:
      return "CONNECTING";
    case GRPC_CHANNEL_READY:
      return "READY";
    case GRPC_CHANNEL_TRANSIENT_FAILURE:
      return "TRANSIENT_FAILURE";
    case GRPC_CHANNEL_SHUTDOWN:
      return "SHUTDOWN";
  }
  return "UNKNOWN";
}

}  // namespace

void SleepUntilSteadyNs(int64_t target_ns) {
  // Once per thread: timer wake-ups at most ~1 µs late (the default slack is 50 µs).
  thread_local const bool slack_set = prctl(PR_SET_TIMERSLACK, kTimerSlackNs, 0, 0, 0) == 0;
  (void)slack_set;
  if (target_ns <= 0) return;
  // steady_clock is CLOCK_MONOTONIC (libstdc++ on Linux): an absolute sleep on the same clock.
  const timespec target{static_cast<time_t>(target_ns / 1'000'000'000),
                        static_cast<long>(target_ns % 1'000'000'000)};
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &target, nullptr) == EINTR) {
  }
}

absl::Status ValidateOptions(const LoadOptions& o) {
  auto invalid = [](auto&&... parts) { return absl::InvalidArgumentError(absl::StrCat(parts...)); };
  if (!std::isfinite(o.rate) || o.rate < 0) {
    return invalid("--rate must be 0 (closed loop) or a positive number of calls/s, got ", o.rate);
  }
  if (o.rate == 0 && o.concurrency < 1) {
    return invalid("--concurrency must be at least 1, got ", o.concurrency);
  }
  if (o.max_in_flight < 1) {
    return invalid("--max_in_flight must be at least 1, got ", o.max_in_flight);
  }
  if (o.duration <= absl::ZeroDuration() || o.duration == absl::InfiniteDuration()) {
    return invalid("--duration must be positive and finite, got ",
                   absl::FormatDuration(o.duration));
  }
  if (o.count < 0) return invalid("--count must be 0 (no limit) or positive, got ", o.count);
  if (o.deadline <= absl::ZeroDuration() || o.deadline == absl::InfiniteDuration()) {
    return invalid("--deadline must be positive and finite, got ",
                   absl::FormatDuration(o.deadline));
  }
  if (o.warmup < absl::ZeroDuration() || o.warmup == absl::InfiniteDuration()) {
    return invalid("--warmup must be zero or positive and finite, got ",
                   absl::FormatDuration(o.warmup));
  }
  if (o.ttl < absl::ZeroDuration() || o.ttl == absl::InfiniteDuration()) {
    return invalid("--ttl must be 0 (server default) or positive and finite, got ",
                   absl::FormatDuration(o.ttl));
  }
  if (o.connections < 1) return invalid("--connections must be at least 1, got ", o.connections);
  if (o.users < 1) return invalid("--users must be at least 1, got ", o.users);
  if (o.distribution == Distribution::kZipf) {
    if (o.users < 2) return invalid("--users must be at least 2 with zipf, got ", o.users);
    // absl::zipf_distribution requires q > 1 (its behaviour is undefined otherwise).
    if (!std::isfinite(o.zipf_exponent) || o.zipf_exponent <= 1) {
      return invalid("--zipf_exponent must be greater than 1, got ", o.zipf_exponent);
    }
  }
  for (int m = 0; m < kNumMethods; ++m) {
    if (o.mix.weights[m] < 0 || o.mix.weights[m] > kMaxMixWeight) {
      return invalid("--mix: the weight of ", MethodMixKey(static_cast<Method>(m)),
                     " is out of range");
    }
  }
  if (o.mix.Total() == 0) return invalid("--mix: all weights are zero");
  if (o.pool_capacity < 1) return invalid("pool capacity must be at least 1");
  return ValidatePlaceShape(o.place);
}

absl::StatusOr<std::vector<std::shared_ptr<grpc::Channel>>> ConnectChannels(
    const std::string& target, const TlsOptions& tls, int connections,
    absl::Duration connect_timeout, const std::string& lb_policy) {
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  channels.reserve(connections);
  for (int i = 0; i < connections; ++i) {
    grpc::ChannelArguments args;
    // Channels with identical arguments share one subchannel (one TCP connection) through gRPC's
    // global subchannel pool; a distinct value per channel gives each its own connection.
    args.SetInt("orderhold.bench.channel", i);
    if (!lb_policy.empty()) args.SetLoadBalancingPolicyName(lb_policy);
    absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
        NewChannel(target, tls, std::move(args));
    if (!channel.ok()) return channel.status();
    channels.push_back(*std::move(channel));
  }
  const auto deadline = absl::ToChronoTime(absl::Now() + connect_timeout);
  for (int i = 0; i < connections; ++i) {
    if (!channels[i]->WaitForConnected(deadline)) {
      return absl::UnavailableError(
          absl::StrFormat("could not connect to %s within %s (connection %d of %d is %s)", target,
                          absl::FormatDuration(connect_timeout), i + 1, connections,
                          ConnectivityName(channels[i]->GetState(false))));
    }
  }
  return channels;
}

// One outstanding call; owns everything gRPC needs until the completion callback.
struct LoadGenerator::Call {
  Call(Method method, int64_t intended_ns, bool measured,
       std::chrono::system_clock::time_point deadline)
      : method(method),
        intended_ns(intended_ns),
        measured(measured),
        start_unix_us(absl::ToUnixMicros(absl::Now())) {
    context.set_deadline(deadline);
  }
  virtual ~Call() = default;
  // Appends this call's --call_log line (call_log.h), answered with `code` at `done_unix_us`.
  virtual void AppendLogLine(int code, int64_t done_unix_us, std::string* out) const = 0;

  const Method method;
  const int64_t intended_ns;
  const bool measured;
  const int64_t start_unix_us;
  grpc::ClientContext context;
};

template <typename Request, typename Response>
struct LoadGenerator::TypedCall final : LoadGenerator::Call {
  using Call::Call;
  void AppendLogLine(int code, int64_t done_unix_us, std::string* out) const override {
    CallLine line;
    line.method = method;
    line.user_id = request.user_id();
    if constexpr (requires { request.order_id(); }) line.order_id = request.order_id();
    if constexpr (requires { request.quantity(); }) {
      line.scope = request.scope();
      line.quantity = request.quantity();
    }
    line.code = code;
    line.start_unix_us = start_unix_us;
    line.done_unix_us = done_unix_us;
    AppendCallLine(line, response, out);
  }
  Request request;
  Response response;
};

LoadGenerator::LoadGenerator(
    LoadOptions options,
    std::vector<std::shared_ptr<orderhold::v1::OrderHold::StubInterface>> stubs)
    : options_(std::move(options)),
      stubs_(std::move(stubs)),
      users_(options_.users, options_.distribution, options_.zipf_exponent),
      place_shaper_(options_.place),
      run_seed_(options_.run_seed != 0 ? options_.run_seed
                                       : absl::Uniform<uint32_t>(absl::IntervalClosed,
                                                                 ThreadBitGen(), 1, 0xffffffffu)),
      open_loop_(options_.rate > 0),
      total_weight_(options_.mix.Total()),
      feed_pool_(options_.mix.weights[static_cast<int>(Method::kPay)] > 0 ||
                 options_.mix.weights[static_cast<int>(Method::kCancelHold)] > 0 ||
                 options_.mix.weights[static_cast<int>(Method::kExtendHold)] > 0 ||
                 options_.mix.weights[static_cast<int>(Method::kGetHold)] > 0),
      pool_(options_.pool_capacity) {}

LoadGenerator::~LoadGenerator() = default;

int64_t LoadGenerator::NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

template <typename Request>
void LoadGenerator::SetHoldToEnd(Request* request) {
  if (const std::optional<PoolEntry> entry = pool_.Pop(); entry.has_value()) {
    request->set_user_id(UserId(options_.user_prefix, entry->user_index));
    request->set_order_id(OrderId(run_seed_, entry->order_sequence));
    return;
  }
  request->set_user_id(UserId(options_.user_prefix, users_.Draw()));
  request->set_order_id(
      MissingOrderId(run_seed_, missing_order_.fetch_add(1, std::memory_order_relaxed)));
}

template <typename Request>
void LoadGenerator::SetHoldToKeep(Request* request) {
  if (const std::optional<PoolEntry> entry = pool_.Sample(absl::Uniform<uint64_t>(ThreadBitGen()));
      entry.has_value()) {
    request->set_user_id(UserId(options_.user_prefix, entry->user_index));
    request->set_order_id(OrderId(run_seed_, entry->order_sequence));
    return;
  }
  request->set_user_id(UserId(options_.user_prefix, users_.Draw()));
  request->set_order_id(
      MissingOrderId(run_seed_, missing_order_.fetch_add(1, std::memory_order_relaxed)));
}

void LoadGenerator::StartCall(int64_t intended_ns, bool measured) {
  // Counted before the call exists, so that its completion can never see in_flight_ too low.
  in_flight_.fetch_add(1, std::memory_order_relaxed);
  sent_total_.fetch_add(1, std::memory_order_relaxed);
  if (measured) sent_measured_.fetch_add(1, std::memory_order_relaxed);

  const Method method =
      PickMethod(options_.mix, absl::Uniform<int64_t>(ThreadBitGen(), 0, total_weight_));
  orderhold::v1::OrderHold::StubInterface::async_interface* async =
      stubs_[next_stub_.fetch_add(1, std::memory_order_relaxed) % stubs_.size()]->async();
  // The deadline counts from the actual start: in open loop a late call still gets its full time,
  // while its latency (from the intended time) includes the lateness.
  const auto deadline = absl::ToChronoTime(absl::Now() + options_.deadline);

  switch (method) {
    case Method::kPlaceHold:
      StartPlaceHold(async, intended_ns, measured, deadline);
      return;
    case Method::kPay: {
      auto* call = new TypedCall<orderhold::v1::PayRequest, orderhold::v1::PayResponse>(
          method, intended_ns, measured, deadline);
      SetHoldToEnd(&call->request);
      async->Pay(&call->context, &call->request, &call->response,
                 [this, call](grpc::Status status) { OnDone(call, status); });
      return;
    }
    case Method::kCancelHold: {
      auto* call =
          new TypedCall<orderhold::v1::CancelHoldRequest, orderhold::v1::CancelHoldResponse>(
              method, intended_ns, measured, deadline);
      SetHoldToEnd(&call->request);
      async->CancelHold(&call->context, &call->request, &call->response,
                        [this, call](grpc::Status status) { OnDone(call, status); });
      return;
    }
    case Method::kExtendHold: {
      auto* call =
          new TypedCall<orderhold::v1::ExtendHoldRequest, orderhold::v1::ExtendHoldResponse>(
              method, intended_ns, measured, deadline);
      SetHoldToKeep(&call->request);
      if (options_.ttl > absl::ZeroDuration()) {
        *call->request.mutable_ttl() = ToProtoDuration(options_.ttl);
      }
      // A refusal at the server's --max_extensions is RESOURCE_EXHAUSTED, and an extension of a
      // hold that ended meanwhile FAILED_PRECONDITION: answers counted in the codes, not errors.
      async->ExtendHold(&call->context, &call->request, &call->response,
                        [this, call](grpc::Status status) { OnDone(call, status); });
      return;
    }
    case Method::kGetHold: {
      auto* call = new TypedCall<orderhold::v1::GetHoldRequest, orderhold::v1::GetHoldResponse>(
          method, intended_ns, measured, deadline);
      SetHoldToKeep(&call->request);
      async->GetHold(&call->context, &call->request, &call->response,
                     [this, call](grpc::Status status) { OnDone(call, status); });
      return;
    }
    case Method::kListHolds: {
      auto* call = new TypedCall<orderhold::v1::ListHoldsRequest, orderhold::v1::ListHoldsResponse>(
          method, intended_ns, measured, deadline);
      call->request.set_user_id(UserId(options_.user_prefix, users_.Draw()));
      async->ListHolds(&call->context, &call->request, &call->response,
                       [this, call](grpc::Status status) { OnDone(call, status); });
      return;
    }
    case Method::kReleaseHolds: {
      auto* call =
          new TypedCall<orderhold::v1::ReleaseHoldsRequest, orderhold::v1::ReleaseHoldsResponse>(
              method, intended_ns, measured, deadline);
      call->request.set_user_id(UserId(options_.user_prefix, users_.Draw()));
      async->ReleaseHolds(&call->context, &call->request, &call->response,
                          [this, call](grpc::Status status) { OnDone(call, status); });
      return;
    }
    case Method::kCount:
      break;
  }
  // Unreachable (PickMethod never returns kCount); keep the in-flight count balanced anyway.
  ReleaseInFlight();
}

void LoadGenerator::StartPlaceHold(orderhold::v1::OrderHold::StubInterface::async_interface* async,
                                   int64_t intended_ns, bool measured,
                                   std::chrono::system_clock::time_point deadline) {
  auto* call = new TypedCall<orderhold::v1::PlaceHoldRequest, orderhold::v1::PlaceHoldResponse>(
      Method::kPlaceHold, intended_ns, measured, deadline);
  const int64_t user = users_.Draw();
  const int64_t order = next_order_.fetch_add(1, std::memory_order_relaxed);
  call->request.set_user_id(UserId(options_.user_prefix, user));
  call->request.set_order_id(OrderId(run_seed_, order));
  if (options_.ttl > absl::ZeroDuration()) {
    *call->request.mutable_ttl() = ToProtoDuration(options_.ttl);
  }
  // A refusal at a scope's limit is RESOURCE_EXHAUSTED like one at the user's: an answer counted
  // in the codes, not a service error.
  place_shaper_.Apply(place_shaper_.DrawScope(), &call->request);
  async->PlaceHold(&call->context, &call->request, &call->response,
                   [this, call, user, order](grpc::Status status) {
                     if (feed_pool_ && status.ok() && call->response.created()) {
                       pool_.Push({user, order});
                     }
                     OnDone(call, status);
                   });
}

void LoadGenerator::OnDone(Call* call, const grpc::Status& status) {
  const int64_t done_ns = NowNs();
  const int code = static_cast<int>(status.error_code());
  if (call->measured) recorder_.Record(call->method, code, done_ns - call->intended_ns);
  completed_total_.fetch_add(1, std::memory_order_relaxed);
  if (IsServiceError(code)) errors_total_.fetch_add(1, std::memory_order_relaxed);
  if (options_.call_log != nullptr) {
    thread_local std::string line;
    line.clear();
    call->AppendLogLine(code, absl::ToUnixMicros(absl::Now()), &line);
    options_.call_log->Write(line);
  }
  // gRPC has moved this callback out of the call before running it, so the context may go now.
  delete call;
  // Closed loop: the next call is counted in in_flight_ before this one is released, so the count
  // cannot touch zero while the run goes on. Starting a call from a callback does not block.
  if (!open_loop_) TryStartClosed();
  ReleaseInFlight();
}

bool LoadGenerator::TryStartClosed() {
  if (stopping_.load(std::memory_order_relaxed)) return false;
  const int64_t now = NowNs();
  if (now >= end_ns_) return false;
  const bool measured = now >= measure_start_ns_;
  if (measured && options_.count > 0 &&
      measured_started_.fetch_add(1, std::memory_order_relaxed) >= options_.count) {
    stopping_.store(true, std::memory_order_relaxed);
    std::lock_guard<std::mutex> lock(done_mu_);
    stop_requested_ = true;
    done_cv_.notify_all();
    return false;
  }
  StartCall(now, measured);
  return true;
}

void LoadGenerator::ReleaseInFlight() {
  if (in_flight_.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  const int64_t now = NowNs();
  std::lock_guard<std::mutex> lock(done_mu_);
  drained_ = true;
  drained_ns_ = now;
  done_cv_.notify_all();
}

int64_t LoadGenerator::RunClosedLoop() {
  for (int i = 0; i < options_.concurrency; ++i) {
    if (!TryStartClosed()) break;
  }
  bool count_reached = false;
  {
    std::unique_lock<std::mutex> lock(done_mu_);
    count_reached =
        done_cv_.wait_until(lock, SteadyTime(end_ns_), [this] { return stop_requested_; });
  }
  // Callbacks stop starting calls at end_ns_ on their own; this also covers the count case.
  stopping_.store(true, std::memory_order_relaxed);
  const int64_t stop_ns = count_reached ? std::min(NowNs(), end_ns_) : end_ns_;
  sending_.store(false, std::memory_order_relaxed);
  ReleaseInFlight();
  return stop_ns;
}

int64_t LoadGenerator::RunOpenLoop() {
  const double period_ns = 1e9 / options_.rate;
  int64_t measured_slots = 0;
  int64_t next_intended_ns = start_ns_;
  for (int64_t i = 0;; ++i) {
    // From the start time each time, not by accumulating the period, so rounding cannot drift.
    const int64_t intended_ns =
        start_ns_ + static_cast<int64_t>(static_cast<double>(i) * period_ns);
    next_intended_ns = intended_ns;
    if (intended_ns >= end_ns_) break;
    const bool measured = intended_ns >= measure_start_ns_;
    if (measured) {
      if (options_.count > 0 && measured_slots >= options_.count) break;
      ++measured_slots;
    }
    // When behind schedule this returns at once: the call goes out late, and its latency still
    // counts from intended_ns.
    SleepUntilSteadyNs(intended_ns);
    max_send_lag_ns_ = std::max(max_send_lag_ns_, NowNs() - intended_ns);
    // in_flight_ includes Run's own reference.
    if (in_flight_.load(std::memory_order_relaxed) - 1 >= options_.max_in_flight) {
      not_sent_total_.fetch_add(1, std::memory_order_relaxed);
      if (measured) not_sent_measured_.fetch_add(1, std::memory_order_relaxed);
      continue;
    }
    StartCall(intended_ns, measured);
  }
  // On schedule, sending "ends" where the next slot would have begun (so a run of n slots spans
  // n periods); a pacer that fell behind ends when it actually stopped.
  const int64_t stop_ns = std::max(NowNs(), std::min(next_intended_ns, end_ns_));
  stopping_.store(true, std::memory_order_relaxed);
  sending_.store(false, std::memory_order_relaxed);
  ReleaseInFlight();
  return stop_ns;
}

void LoadGenerator::ProgressLoop() {
  int64_t last_completed = 0;
  int64_t last_ns = start_ns_;
  std::unique_lock<std::mutex> lock(done_mu_);
  while (!done_cv_.wait_for(lock, std::chrono::seconds(1), [this] { return progress_stop_; })) {
    lock.unlock();
    const int64_t now = NowNs();
    Progress p;
    p.elapsed = absl::Nanoseconds(now - start_ns_);
    p.warming_up = now < measure_start_ns_;
    p.sent = sent_total_.load(std::memory_order_relaxed);
    p.completed = completed_total_.load(std::memory_order_relaxed);
    p.current_rate = now > last_ns ? static_cast<double>(p.completed - last_completed) * 1e9 /
                                         static_cast<double>(now - last_ns)
                                   : 0;
    p.in_flight = std::max<int64_t>(0, in_flight_.load(std::memory_order_relaxed) -
                                           (sending_.load(std::memory_order_relaxed) ? 1 : 0));
    p.errors = errors_total_.load(std::memory_order_relaxed);
    p.not_sent = not_sent_total_.load(std::memory_order_relaxed);
    last_completed = p.completed;
    last_ns = now;
    *options_.progress << FormatProgress(p) << std::endl;
    lock.lock();
  }
}

RunReport LoadGenerator::Run() {
  start_ns_ = NowNs();
  measure_start_ns_ = start_ns_ + absl::ToInt64Nanoseconds(options_.warmup);
  end_ns_ = measure_start_ns_ + absl::ToInt64Nanoseconds(options_.duration);

  std::thread progress;
  if (options_.progress != nullptr) progress = std::thread([this] { ProgressLoop(); });

  const int64_t send_stop_ns = open_loop_ ? RunOpenLoop() : RunClosedLoop();
  int64_t drained_ns = 0;
  {
    std::unique_lock<std::mutex> lock(done_mu_);
    // Every call has a deadline, so gRPC completes each one in bounded time.
    done_cv_.wait(lock, [this] { return drained_; });
    drained_ns = drained_ns_;
    progress_stop_ = true;
    done_cv_.notify_all();
  }
  if (progress.joinable()) progress.join();

  RunReport report;
  report.open_loop = open_loop_;
  report.target = options_.target;
  report.concurrency = options_.concurrency;
  report.rate = open_loop_ ? options_.rate : 0;
  report.max_in_flight = options_.max_in_flight;
  report.duration = options_.duration;
  report.warmup = options_.warmup;
  report.count = options_.count;
  report.deadline = options_.deadline;
  report.connections = static_cast<int>(stubs_.size());
  report.users = options_.users;
  report.distribution = options_.distribution;
  report.zipf_exponent = options_.zipf_exponent;
  report.mix = options_.mix;
  report.place = options_.place;
  report.run_seed = run_seed_;
  report.sent = sent_measured_.load();
  report.not_sent = not_sent_measured_.load();
  report.max_send_lag = absl::Nanoseconds(max_send_lag_ns_);
  report.send_window = absl::Nanoseconds(std::max<int64_t>(0, send_stop_ns - measure_start_ns_));
  report.measured_window = absl::Nanoseconds(std::max<int64_t>(0, drained_ns - measure_start_ns_));
  Summarize(recorder_.Merge(), &report);
  return report;
}

}  // namespace orderhold::client::bench
