// orderhold-bench's engine: an asynchronous load generator for the orderhold.v1.OrderHold service,
// built on the gRPC callback API. It draws its calls from the workload (workload.h), records them
// (stats.h) and returns a RunReport (report.h); this file holds its options, the channels it sends
// on, and the run loop.
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
// Pay and CancelHold end holds this run placed (a shared pool of created holds, newest first);
// ExtendHold and GetHold extend and read one of the newest of them and leave it in the pool (see
// HoldPool::Sample). With none available, each targets an order that was never placed
// (NOT_FOUND). ListHolds and ReleaseHolds draw a user (ReleaseHolds ends every live hold of that
// user, whatever this run's pool still says about them).
#ifndef ORDERHOLD_CLIENT_BENCH_LOAD_GENERATOR_H_
#define ORDERHOLD_CLIENT_BENCH_LOAD_GENERATOR_H_

#include <grpcpp/channel.h>
#include <grpcpp/support/status.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/bench/call_log.h"
#include "client/bench/method.h"
#include "client/bench/report.h"
#include "client/bench/stats.h"
#include "client/bench/workload.h"
#include "client/channel.h"
#include "orderhold/v1/orderhold.grpc.pb.h"

namespace orderhold::client::bench {

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
  // Relative weights of the methods sent (see ParseMix); the default is PlaceHold only.
  Mix mix = {{100, 0, 0, 0}};
  // PlaceHold and ExtendHold ttl; zero leaves the request's ttl unset (the server's default). An
  // ExtendHold asks for this much time left from now (never past the hold's cap).
  absl::Duration ttl = absl::ZeroDuration();
  // What each PlaceHold carries besides ids and ttl (see PlaceShape); the default is unscoped.
  PlaceShape place;
  // Size of the user population; user ids are UserId(user_prefix, i) for i in [0, users).
  int64_t users = 100000;
  std::string user_prefix = "u";
  // How users are drawn from the population (see UserPicker); zipf_exponent only for kZipf.
  Distribution distribution = Distribution::kUniform;
  double zipf_exponent = 1.1;
  // Capacity of the HoldPool that feeds Pay, CancelHold, ExtendHold and GetHold.
  int64_t pool_capacity = 1'000'000;
  // Where to write one FormatProgress line per second; nullptr for none. Not owned.
  std::ostream* progress = nullptr;
  // Prefix of this run's order ids (see OrderId); 0 picks a random one.
  uint32_t run_seed = 0;
  // Where to write one line per completed call (call_log.h), warmup included; nullptr for none.
  // Not owned; must outlive Run.
  CallLog* call_log = nullptr;
};

// Checks `options`: every number in range, a mix with weights in [0, kMaxMixWeight] and a
// non-zero total, and a valid PlaceShape (ValidatePlaceShape). Returns INVALID_ARGUMENT whose
// message starts with the offending flag, e.g.
// "--concurrency must be at least 1, got 0". Pure.
absl::Status ValidateOptions(const LoadOptions& options);

// Opens `connections` channels to `target`, plaintext or TLS as `tls` says (NewChannel, client/
// channel.h), each a separate HTTP/2 connection (a distinct channel argument keeps gRPC from
// sharing one subchannel between them), and waits until all are READY, at most `connect_timeout`
// in total. `lb_policy` non-empty sets each channel's load-balancing policy (gRPC's
// "pick_first", the default, or "round_robin": with a target that resolves to several addresses,
// e.g. "ipv4:127.0.0.1:50051,127.0.0.1:50052", calls then spread over all of them and skip those
// down). UNAVAILABLE naming the target when one is not ready in time (a failed TLS handshake
// included); NewChannel's INVALID_ARGUMENT when a TLS file cannot be read. Blocking; thread-safe.
absl::StatusOr<std::vector<std::shared_ptr<grpc::Channel>>> ConnectChannels(
    const std::string& target, const TlsOptions& tls, int connections,
    absl::Duration connect_timeout, const std::string& lb_policy = "");

// Blocks until std::chrono::steady_clock reaches `target_ns` (nanoseconds since its epoch), with
// one absolute clock_nanosleep on CLOCK_MONOTONIC (steady_clock's clock); the calling thread's
// timer slack is set to 1 µs (PR_SET_TIMERSLACK) on its first call, so it wakes within a few tens
// of µs of the target on a busy machine instead of up to 50 µs more. No spinning: the pacer used
// to sleep until 100 µs before and then call sched_yield in a loop, which above 10,000 calls/s
// (a period under 100 µs) spun all the time and took 89 % of a core (84 % of it in the kernel)
// on a 2-core machine shared with the server and Redis it measures. Returns at once when the time
// has passed. The open-loop pacer of LoadGenerator, also used by tests/bench/event_bench.cc.
// Thread-safe.
void SleepUntilSteadyNs(int64_t target_ns);

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
  // StartCall's PlaceHold on `async`: a new order of a drawn user, with --ttl and the workload's
  // scope shape; a hold it created goes to the pool Pay, CancelHold, ExtendHold and GetHold draw
  // from. `deadline` counts from the actual start (see StartCall).
  void StartPlaceHold(orderhold::v1::OrderHold::StubInterface::async_interface* async,
                      int64_t intended_ns, bool measured,
                      std::chrono::system_clock::time_point deadline);
  // Sets the user_id and order_id of a Pay or CancelHold request: a hold this run placed, newest
  // first, or, with none available, an order never placed (the answer is then NOT_FOUND: a
  // realistic "end after expiry", still a full round trip to Redis).
  template <typename Request>
  void SetHoldToEnd(Request* request);
  // Sets the user_id and order_id of an ExtendHold or GetHold request: one of the newest holds
  // this run placed, left in the pool for later calls (HoldPool::Sample), or, with none
  // available, an order never placed (NOT_FOUND), as SetHoldToEnd.
  template <typename Request>
  void SetHoldToKeep(Request* request);
  // Completion of any call: records it (and its call_log line), maybe starts the next (closed
  // loop), frees it.
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
  const PlaceShaper place_shaper_;
  const uint32_t run_seed_;
  const bool open_loop_;
  const int64_t total_weight_;
  // Pooling created holds is pointless work when the mix has no Pay, CancelHold, ExtendHold or
  // GetHold to use them.
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
