// orderhold-bench's engine: an asynchronous load generator for the orderhold.v1.OrderHold service,
// built on the gRPC callback API, and the pure functions around it (flag parsing helpers,
// statistics, report formatting) kept here so tests can call them without a server.
//
// Two ways to generate load (LoadOptions::rate selects):
//   closed loop  `concurrency` calls are always outstanding: each completion callback records its
//                result and immediately starts the next call. Measures the service at saturation;
//                latency is measured from the actual send time.
//   open loop    calls are started on a fixed schedule, call i at t0 + i/rate, by one pacer thread
//                (the thread calling Run), whatever the server does. Latency is measured from the
//                INTENDED send time, so a server (or a pacer) that falls behind shows up as latency
//                instead of as fewer samples ("coordinated omission"). At most `max_in_flight`
//                calls are outstanding; a scheduled call that finds the cap reached is not sent
//                and is counted as not_sent.
//
// Run timeline: [warmup][duration] then drain. Calls started (closed loop) or scheduled (open loop)
// during the warmup are sent normally but not recorded. Sending stops when `duration` of measured
// time has passed or `count` measured calls were started/scheduled, whichever comes first; then
// Run waits for every in-flight call to finish (each has its own `deadline`, so this ends).
//
// Throughput, as reported: recorded (completed, measured) calls divided by the measured window,
// which runs from the end of the warmup until the last call completed, i.e. the send window plus
// the drain. This is the rate a client actually got served; it is a little below the send rate
// when the drain is long. The send rate (measured calls sent / send window) is reported apart.
//
// Adding a method: add a Method enumerator before kCount, its row in kMethodInfo
// (load_generator.cc), and its case in LoadGenerator::StartCall.
//
// Pay and CancelHold end holds this run placed (a shared pool of created holds, newest first);
// with none available they target an order that was never placed (NOT_FOUND).
#ifndef ORDERHOLD_CLIENT_BENCH_LOAD_GENERATOR_H_
#define ORDERHOLD_CLIENT_BENCH_LOAD_GENERATOR_H_

#include <grpcpp/channel.h>
#include <grpcpp/support/status.h>

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/random/zipf_distribution.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "orderhold/v1/orderhold.grpc.pb.h"

namespace orderhold::client::bench {

// The RPCs the generator can send. kCount is the number of methods, not a method.
enum class Method : int { kPlaceHold = 0, kPay, kListHolds, kCancelHold, kCount };
inline constexpr int kNumMethods = static_cast<int>(Method::kCount);

// Number of gRPC status codes (OK = 0 .. UNAUTHENTICATED = 16).
inline constexpr int kNumStatusCodes = 17;

// Calls per gRPC status code, indexed by the numeric code.
using CodeCounts = std::array<int64_t, kNumStatusCodes>;

// The RPC name of a method ("PlaceHold"), as used in reports. Pure.
absl::string_view MethodName(Method method);

// The key of a method in --mix ("place", "pay", "list"). Pure.
absl::string_view MethodMixKey(Method method);

// Relative weights of the methods in the workload, indexed by Method; zero means never sent.
struct Mix {
  std::array<int64_t, kNumMethods> weights{};

  // Sum of the weights.
  int64_t Total() const;
};

// Parses a --mix value: comma-separated `key=weight` pairs, keys from MethodMixKey, weights
// non-negative integers (ratios, need not sum to 100), any subset in any order, whitespace around
// keys and weights ignored. "place=70,pay=20,list=10". Missing keys get weight 0.
// Errors (INVALID_ARGUMENT, message suitable for the user): empty spec, malformed pair, unknown or
// repeated key, weight not an integer or negative, all weights zero. Keys: place, pay, list,
// cancel. Pure.
absl::StatusOr<Mix> ParseMix(absl::string_view spec);

// The canonical text of a mix: non-zero weights in Method order, "place=70,pay=20,list=10". Pure.
std::string FormatMix(const Mix& mix);

// Which method a draw selects: `draw` must be in [0, mix.Total()); method m owns the draws
// [sum of weights before m, that sum + weight of m). Pure.
Method PickMethod(const Mix& mix, int64_t draw);

// How user ids are drawn from the population.
enum class Distribution { kUniform, kZipf };

// Parses "uniform" or "zipf" (exact, lower case); INVALID_ARGUMENT otherwise. Pure.
absl::StatusOr<Distribution> ParseDistribution(absl::string_view name);

// "uniform" or "zipf". Pure.
absl::string_view DistributionName(Distribution distribution);

// The user id for population index `index`: `prefix` followed by the decimal index ("u42"). Pure.
std::string UserId(absl::string_view prefix, int64_t index);

// The order id of the `sequence`-th PlaceHold of run `run_seed`: "b<run_seed hex>-<sequence>",
// e.g. "b0000beef-17". Unique within a run; distinct runs differ in the seed. Pure.
std::string OrderId(uint32_t run_seed, int64_t sequence);

// Draws user indexes in [0, users) from the configured distribution. Uniform: every index equally
// likely. Zipf: absl::zipf_distribution over [0, users - 1] with exponent q (P(i) proportional to
// (1 + i)^-q), so index 0 is the most popular user. Thread-safe: Draw is const and uses a
// thread_local absl::InsecureBitGen.
class UserPicker {
 public:
  // Preconditions (checked by ValidateOptions): users >= 1; for zipf users >= 2 and
  // zipf_exponent > 1 (absl::zipf_distribution's own preconditions k > 0, q > 1).
  UserPicker(int64_t users, Distribution distribution, double zipf_exponent);

  // One index in [0, users).
  int64_t Draw() const;

 private:
  const int64_t users_;
  const Distribution distribution_;
  // Only meaningful for kZipf; precomputed once (it holds the normalisation constants).
  std::optional<absl::zipf_distribution<int64_t>::param_type> zipf_;
};

// A (user, order) pair whose hold was created by a PlaceHold and can be paid.
struct PoolEntry {
  int64_t user_index = 0;
  int64_t order_sequence = 0;

  friend bool operator==(const PoolEntry&, const PoolEntry&) = default;
};

// A bounded pool of recently created holds for Pay to consume. Pop returns the most recently
// pushed entry (the hold least likely to have expired); when full, Push overwrites the oldest
// entry. Memory grows with use up to `capacity` entries (16 bytes each). Thread-safe (one mutex).
class HoldPool {
 public:
  // capacity >= 1.
  explicit HoldPool(int64_t capacity);

  void Push(PoolEntry entry);
  // The most recent entry, removed; nullopt when empty.
  std::optional<PoolEntry> Pop();
  int64_t size() const;

 private:
  const int64_t capacity_;
  mutable absl::Mutex mu_;
  // A ring: the live entries are ring_[(start_ + k) % capacity_] for k in [0, size_). ring_ grows
  // by push_back until it holds capacity_ entries; start_ stays 0 until then.
  std::vector<PoolEntry> ring_ ABSL_GUARDED_BY(mu_);
  int64_t start_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t size_ ABSL_GUARDED_BY(mu_) = 0;
};

// Latency percentiles of a set of samples, nanoseconds. All zero when there are no samples.
struct LatencyPercentiles {
  int64_t p50_ns = 0;
  int64_t p90_ns = 0;
  int64_t p99_ns = 0;
  int64_t p999_ns = 0;
  int64_t max_ns = 0;
};

// The nearest-rank percentile of ascending-sorted `sorted`: the smallest sample such that at
// least `percentile` percent of the samples are <= it, i.e. sorted[ceil(p/100 * n) - 1] (index
// clamped to [0, n-1]). percentile in (0, 100]. 0 for an empty vector. Pure.
int64_t NearestRankPercentile(const std::vector<int64_t>& sorted, double percentile);

// Sorts `samples_ns` and returns its exact nearest-rank p50/p90/p99/p99.9 and max. Pure.
LatencyPercentiles ComputePercentiles(std::vector<int64_t> samples_ns);

// True for codes that mean the service (or the network) failed rather than answered:
// CANCELLED, UNKNOWN, DEADLINE_EXCEEDED, UNIMPLEMENTED, INTERNAL, UNAVAILABLE. NOT_FOUND,
// RESOURCE_EXHAUSTED and INVALID_ARGUMENT are answers, not failures. Pure.
bool IsServiceError(int code);

// Sum of the counts of the codes for which IsServiceError holds. Pure.
int64_t CountServiceErrors(const CodeCounts& codes);

// The canonical name of a gRPC status code ("OK", "NOT_FOUND", ...); "CODE_<n>" when out of range.
// Pure.
std::string StatusCodeName(int code);

// Records call results without taking a lock on the hot path: each thread appends to its own
// buffer, registered (under a mutex) the first time that thread records into this Recorder.
// Record is thread-safe. Merge must not run concurrently with Record (call it once all calls
// have finished). The buffers belong to the Recorder, so threads may exit before Merge.
class Recorder {
 public:
  Recorder();
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;

  // Records one completed call: its method, numeric gRPC status code (0..16; others are counted
  // as UNKNOWN) and latency in nanoseconds.
  void Record(Method method, int code, int64_t latency_ns);

  struct Merged {
    // Latency samples per method, nanoseconds, unsorted.
    std::array<std::vector<int64_t>, kNumMethods> samples_ns;
    std::array<CodeCounts, kNumMethods> codes{};
  };
  // All samples and counts recorded so far, from every thread.
  Merged Merge() const;

 private:
  struct ThreadBuffer {
    std::array<std::vector<int64_t>, kNumMethods> samples_ns;
    std::array<CodeCounts, kNumMethods> codes{};
  };
  // This thread's buffer for this Recorder, registering one if needed.
  ThreadBuffer* LocalBuffer();

  // Distinguishes Recorders in the thread_local cache (an address could be reused).
  const uint64_t id_;
  mutable absl::Mutex mu_;
  std::vector<std::unique_ptr<ThreadBuffer>> buffers_ ABSL_GUARDED_BY(mu_);
};

// Results of one method (or of all methods together).
struct MethodReport {
  // Completed measured calls (any status).
  int64_t completed = 0;
  // completed / RunReport::measured_window, calls per second.
  double throughput = 0;
  LatencyPercentiles latency;
  CodeCounts codes{};
  // CountServiceErrors(codes).
  int64_t errors = 0;
};

// What a run was configured with and what it measured. Everything counts measured calls only
// (those started, or scheduled in open loop, after the warmup).
struct RunReport {
  // Configuration, echoed.
  bool open_loop = false;
  std::string target;
  int concurrency = 0;
  double rate = 0;  // Target calls/s in open loop; 0 in closed loop.
  int max_in_flight = 0;
  absl::Duration duration;
  absl::Duration warmup;
  int64_t count = 0;
  absl::Duration deadline;
  int connections = 0;
  int64_t users = 0;
  Distribution distribution = Distribution::kUniform;
  double zipf_exponent = 0;
  Mix mix;
  uint32_t run_seed = 0;

  // Measured.
  int64_t sent = 0;      // Calls started.
  int64_t not_sent = 0;  // Open loop: scheduled calls skipped because max_in_flight was reached.
  absl::Duration send_window;      // End of warmup until sending stopped.
  absl::Duration measured_window;  // End of warmup until the last call completed.
  double send_rate = 0;            // sent / send_window, calls per second.
  // Open loop: the largest delay between a call's intended and actual send time (all calls, warmup
  // included). Large values mean the generator, not the server, could not keep up with the rate;
  // the delay is part of those calls' latency. Zero in closed loop.
  absl::Duration max_send_lag;
  std::array<MethodReport, kNumMethods> methods;
  MethodReport all;
};

// Fills `report`'s per-method and overall results from merged recordings: counts, exact
// percentiles, throughput over report->measured_window (0 when that window is not positive) and
// send_rate over report->send_window. Reads sent, send_window and measured_window from `report`.
// Pure apart from writing `report`.
void Summarize(Recorder::Merged merged, RunReport* report);

// `s` as a JSON string literal, quotes included: escapes '"', '\\' and control characters
// (\b \f \n \r \t, others as \u00XX). Bytes >= 0x80 are copied as they are (UTF-8 stays UTF-8).
// Pure.
std::string JsonQuote(absl::string_view s);

// The report as ONE JSON object, one line, no trailing newline:
//   {"mode":"closed"|"open","target":..,"concurrency":..,"rate":..,"max_in_flight":..,
//    "duration_s":..,"warmup_s":..,"count":..,"deadline_s":..,"connections":..,"users":..,
//    "distribution":..,"zipf_exponent":..,"mix":{"place":70,...},"run_seed":..,"sent":..,
//    "send_rate":..,"send_window_s":..,"measured_window_s":..,"max_send_lag_ms":..,
//    "completed":..,"not_sent":..,
//    "throughput":..,"errors":..,"latency_ms":{"p50":..,"p90":..,"p99":..,"p999":..,"max":..},
//    "codes":{"OK":..,...},"methods":{"PlaceHold":{"completed":..,"throughput":..,"errors":..,
//    "latency_ms":{...},"codes":{...}},...}}
// "mix" lists non-zero weights; "methods" lists methods with non-zero weight; "codes" lists codes
// with a non-zero count (absent means 0). Latencies in milliseconds with microsecond resolution,
// rates in calls per second. Pure.
std::string FormatJsonReport(const RunReport& report);

// The report as a human-readable table (several lines, each ending in '\n'). Pure.
std::string FormatTextReport(const RunReport& report);

// A snapshot of a run in progress, for the once-a-second progress line. Counts include warmup.
struct Progress {
  absl::Duration elapsed;  // Since the run started (warmup included).
  bool warming_up = false;
  int64_t sent = 0;
  int64_t completed = 0;
  double current_rate = 0;  // Completions per second over the last interval.
  int64_t in_flight = 0;
  int64_t errors = 0;    // Service errors (IsServiceError), warmup included.
  int64_t not_sent = 0;  // Open loop, warmup included.
};

// One progress line, no trailing newline:
//   "[   3.0s] sent 30012 completed 29962 rate 10003/s in_flight 50 errors 0 not_sent 0"
// with " (warmup)" appended during the warmup. Pure.
std::string FormatProgress(const Progress& progress);

// Everything a run needs besides the channels. Defaults are the flag defaults.
struct LoadOptions {
  // For the report only (the channels are already connected).
  std::string target = "localhost:50051";
  // Channels (HTTP/2 connections) for ConnectChannels to open. The generator itself uses as many
  // as it is given stubs.
  int connections = 4;
  // Closed loop: calls kept outstanding. Ignored in open loop.
  int concurrency = 50;
  // > 0 selects open loop at this many calls per second; 0 is closed loop.
  double rate = 0;
  // Open loop: cap on outstanding calls; scheduled calls over it are counted as not_sent.
  int max_in_flight = 20000;
  // Measured time (after the warmup) during which calls are sent.
  absl::Duration duration = absl::Seconds(10);
  // Stop after this many measured calls started (closed) / scheduled (open); 0 is no limit.
  int64_t count = 0;
  // Per-call gRPC deadline, from the moment the call is actually started.
  absl::Duration deadline = absl::Seconds(2);
  // Calls started/scheduled in this time before `duration` are sent but not recorded.
  absl::Duration warmup = absl::Seconds(1);
  Mix mix = {{100, 0, 0}};
  // PlaceHold ttl; zero leaves the request's ttl unset (the server's default).
  absl::Duration ttl = absl::ZeroDuration();
  int64_t users = 100000;
  std::string user_prefix = "u";
  Distribution distribution = Distribution::kUniform;
  double zipf_exponent = 1.1;
  // Capacity of the HoldPool that feeds Pay.
  int64_t pool_capacity = 1'000'000;
  // Where to write one FormatProgress line per second; nullptr for none. Not owned.
  std::ostream* progress = nullptr;
  // Prefix of this run's order ids (see OrderId); 0 picks a random one.
  uint32_t run_seed = 0;
};

// Checks `options`: every number in range, and a mix with a non-zero total. Returns
// INVALID_ARGUMENT whose message starts with the offending flag, e.g.
// "--concurrency must be at least 1, got 0". Pure.
absl::Status ValidateOptions(const LoadOptions& options);

// Opens `connections` insecure channels to `target`, each a separate HTTP/2 connection (a distinct
// channel argument keeps gRPC from sharing one subchannel between them), and waits until all are
// READY, at most `connect_timeout` in total. UNAVAILABLE naming the target when one is not ready
// in time. Blocking; thread-safe.
absl::StatusOr<std::vector<std::shared_ptr<grpc::Channel>>> ConnectChannels(
    const std::string& target, int connections, absl::Duration connect_timeout);

// Generates load on the given stubs (one per connection, used round-robin) and measures it.
// Run is called once, from one thread, which becomes the pacer in open loop; the gRPC completion
// callbacks run on gRPC's threads. The object must outlive Run (which returns only after every
// call it started has completed), and the stubs must outlive the object.
class LoadGenerator {
 public:
  // `options` must pass ValidateOptions; `stubs` non-empty, each with a non-null async().
  LoadGenerator(LoadOptions options,
                std::vector<std::shared_ptr<orderhold::v1::OrderHold::StubInterface>> stubs);
  LoadGenerator(const LoadGenerator&) = delete;
  LoadGenerator& operator=(const LoadGenerator&) = delete;
  ~LoadGenerator();

  // Runs warmup + duration (or until count), drains, and returns the report (Summarize applied).
  // Blocking. Writes progress lines to options.progress while it runs.
  RunReport Run();

 private:
  struct Call;
  template <typename Request, typename Response>
  struct TypedCall;

  // Starts one call of a randomly picked method whose latency is measured from
  // `intended_ns` (monotonic nanoseconds). `measured` calls are recorded.
  void StartCall(int64_t intended_ns, bool measured);
  // The (user_id, order_id) a Pay or CancelHold targets: a hold this run placed, newest first,
  // or, with none available, an order never placed (the answer is then NOT_FOUND: a realistic
  // "end after expiry", still a full round trip to Redis).
  std::pair<std::string, std::string> PickHoldToEnd();
  // Completion of any call: records it, maybe starts the next (closed loop), frees it.
  void OnDone(Call* call, const grpc::Status& status);
  // Closed loop: starts the next call unless the run is stopping. False when it did not.
  bool TryStartClosed();
  // Drops one reference from in_flight_; the one that reaches zero wakes Run.
  void ReleaseInFlight();
  // The two senders. Each returns (monotonic ns) when it stopped sending, after setting
  // stopping_ and dropping Run's reference on in_flight_.
  int64_t RunClosedLoop();
  int64_t RunOpenLoop();
  void ProgressLoop();
  // Nanoseconds since an arbitrary fixed point (std::chrono::steady_clock).
  static int64_t NowNs();

  const LoadOptions options_;
  const std::vector<std::shared_ptr<orderhold::v1::OrderHold::StubInterface>> stubs_;
  const UserPicker users_;
  const uint32_t run_seed_;
  const bool open_loop_;
  const int64_t total_weight_;
  // Only PlaceHolds that Pay can consume are pooled: pointless work when the mix has no Pay.
  const bool feed_pool_;
  HoldPool pool_;
  Recorder recorder_;

  // Set by Run before any call starts; read-only afterwards.
  int64_t start_ns_ = 0;
  int64_t measure_start_ns_ = 0;
  int64_t end_ns_ = 0;
  // Written by the pacer (the thread in Run) only.
  int64_t max_send_lag_ns_ = 0;

  std::atomic<uint64_t> next_stub_{0};
  std::atomic<int64_t> next_order_{0};
  std::atomic<int64_t> missing_order_{0};
  // Calls started but not completed, plus one reference held by Run while it may still send;
  // so it reaches zero exactly once, when sending has stopped and every call has completed.
  std::atomic<int64_t> in_flight_{1};
  std::atomic<bool> stopping_{false};
  // True while Run still holds its reference on in_flight_ (for the progress line only).
  std::atomic<bool> sending_{true};
  std::atomic<int64_t> measured_started_{0};
  // Progress counters (warmup included).
  std::atomic<int64_t> sent_total_{0};
  std::atomic<int64_t> completed_total_{0};
  std::atomic<int64_t> errors_total_{0};
  std::atomic<int64_t> not_sent_total_{0};
  // Measured-only counters for the report.
  std::atomic<int64_t> sent_measured_{0};
  std::atomic<int64_t> not_sent_measured_{0};

  // std::mutex rather than absl::Mutex: the callback that signals "drained" may still be inside
  // unlock when Run returns and the owner destroys this object; POSIX allows destroying a mutex
  // as soon as it is unlocked.
  std::mutex done_mu_;
  std::condition_variable done_cv_;
  bool drained_ = false;         // Guarded by done_mu_.
  int64_t drained_ns_ = 0;       // Guarded by done_mu_; when the last call completed.
  bool stop_requested_ = false;  // Guarded by done_mu_; closed loop: count reached.
  bool progress_stop_ = false;   // Guarded by done_mu_.
};

}  // namespace orderhold::client::bench

#endif  // ORDERHOLD_CLIENT_BENCH_LOAD_GENERATOR_H_
