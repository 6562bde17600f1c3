// orderhold-event-bench: the load side of tests/bench/run.sh's event phases (event delivery that
// costs nothing while idle). Not a test and not for production use.
//
// It opens `--watchers` WatchHoldEvents streams spread over `--groups` consumer groups (watcher w
// is consumer "<group>-c<w / groups>" of group "<group_prefix>-g<w % groups>", on connection
// w % connections), all on the gRPC callback API, so 1,000 streams need no thread each. Every
// consumer acks what it receives like a real one: the event ids it got are sent with
// AckHoldEvents once per --ack_interval (one call per consumer that has something to ack).
//
//   --mode=watch    keeps the watchers open until SIGTERM/SIGINT (or --max_hold), then cancels
//                   them and prints one JSON line: how many ended before that and with which
//                   status (a refused watch is RESOURCE_EXHAUSTED), events received. run.sh knows
//                   the watches are open from the server's orderhold_watches gauge (a server
//                   sends nothing on an idle stream, so the client cannot tell) and measures Redis
//                   meanwhile.
//   --mode=deliver  places rate x duration holds (one per user "<user_prefix><i>", order "o<i>",
//                   --ttl long enough that none expires), ends one "probe" hold and waits until
//                   every group has received it (the groups exist and deliver), waits --settle for
//                   the other consumers, then ends the holds in open loop at --rate: hold i at
//                   t0 + i / rate, CancelHold for even i and Pay for odd i. Then it waits until
//                   every group has received every event it expects, at most --drain, and prints
//                   one JSON line (below).
//
// Why CancelHold/Pay and not expiry: the rate of ends is then exactly --rate, and an event's
// end_time is when the script ran, so the delay measured is delivery alone. An expiry's end_time
// is its expire_time, so the reaper's lag (up to its interval) would be part of every delay.
//
// Delivery delay: receive time (this host's clock, when OnReadDone runs) - HoldEvent.end_time
// (Redis server time, millisecond precision, truncated: a delay is overstated by up to 1 ms).
// Meaningful because server, Redis and this program share one machine's clock. One sample per
// first receipt of an event by a group (redeliveries are left out), over every group.
//
// Per group: expected = holds whose CancelHold/Pay answered OK (not already_*) — every one of
// them appended exactly one event, which every group must get; received = events read; distinct =
// distinct event_ids; missing = expected holds of which no event arrived by the end of the drain;
// duplicates = received - distinct (at-least-once allows redeliveries; they should be ~0);
// unexpected = distinct events of holds not in the expected set (an end call that failed on the
// client side but ended the hold; 0 expected).
//
// deliver output, one line:
//   {"mode":"deliver","watchers":..,"groups":..,"connections":..,"rate":..,"duration_s":..,
//    "holds_placed":..,"place_s":..,"probe_s":..|null,"ends":{"sent":..,"send_rate":..,
//    "max_send_lag_ms":..,"ok":..,"latency_ms":{..},"codes":{..}},"delay_ms":{p50,p90,p99,p999,
//    max},"delay_samples":..,"drained":true|false,"drain_s":..,"acks":{"calls":..,"acked":..,
//    "errors":..},"watchers_ended_early":..,"watcher_end_codes":{..},"per_group":[{"group":..,
//    "expected":..,"received":..,"distinct":..,"missing":..,"duplicates":..,"unexpected":..}],
//    "totals":{"expected":..,"received":..,"distinct":..,"missing":..,"duplicates":..,
//    "unexpected":..}}
// End-call latency is from the intended send time (open loop, as orderhold-bench). Exit status 0
// when the run completed (whatever it measured), 1 when the server could not be reached or a
// placement phase failed badly, 2 on a bad flag.
#include <grpcpp/client_context.h>
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/bench/load_generator.h"
#include "client/bench/report.h"
#include "client/bench/stats.h"
#include "client/orderhold_client.h"
#include "orderhold/v1/orderhold.grpc.pb.h"

ABSL_FLAG(std::string, target, "localhost:50051", "OrderHold server address.");
ABSL_FLAG(std::string, mode, "watch", "watch (idle watchers until SIGTERM) or deliver.");
ABSL_FLAG(int, watchers, 100, "WatchHoldEvents streams to open.");
ABSL_FLAG(int, groups, 10, "Consumer groups the watchers are spread over (round-robin).");
ABSL_FLAG(int, connections, 10, "HTTP/2 connections; watcher w uses connection w % connections.");
ABSL_FLAG(std::string, group_prefix, "bench", "Groups are <prefix>-g<k>.");
ABSL_FLAG(absl::Duration, ack_interval, absl::Milliseconds(200),
          "Each consumer acks what it received this often (one AckHoldEvents call if any).");
ABSL_FLAG(absl::Duration, max_hold, absl::Minutes(10),
          "watch: stop by itself after this long without SIGTERM/SIGINT.");
ABSL_FLAG(double, rate, 1000, "deliver: holds ended per second.");
ABSL_FLAG(absl::Duration, duration, absl::Seconds(10), "deliver: how long holds are ended.");
ABSL_FLAG(absl::Duration, drain, absl::Seconds(10),
          "deliver: after the last end, wait at most this long for every group to get everything.");
ABSL_FLAG(absl::Duration, settle, absl::Seconds(1),
          "deliver: wait this long after every group got the probe event.");
ABSL_FLAG(absl::Duration, settle_timeout, absl::Seconds(20),
          "deliver: give up waiting for the probe event after this long (then carry on).");
ABSL_FLAG(absl::Duration, ttl, absl::Minutes(10), "deliver: ttl of the placed holds.");
ABSL_FLAG(std::string, user_prefix, "ev-u", "deliver: user ids are <prefix><i>.");
ABSL_FLAG(int, place_in_flight, 64, "deliver: PlaceHold calls outstanding while placing.");

namespace orderhold::client::bench {
namespace {

using orderhold::v1::HoldEvent;
using orderhold::v1::OrderHold;

constexpr int kExitFailed = 1;
constexpr int kExitUsage = 2;
constexpr char kProbeOrder[] = "probe";
const absl::Duration kConnectTimeout = absl::Seconds(5);
const absl::Duration kCallDeadline = absl::Seconds(5);
// After the watchers are cancelled: how long to wait for gRPC to finish them (and the last acks).
const absl::Duration kShutdownWait = absl::Seconds(10);

int64_t SteadyNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::chrono::system_clock::time_point DeadlineIn(absl::Duration d) {
  return absl::ToChronoTime(absl::Now() + d);
}

// One unary call in flight: what gRPC needs until its callback, which deletes it.
template <typename Request, typename Response>
struct UnaryCall {
  grpc::ClientContext context;
  Request request;
  Response response;
};

// A new call on hold (`user`, `order`) with kCallDeadline. An async caller releases it and deletes
// it in the callback.
template <typename Request, typename Response>
std::unique_ptr<UnaryCall<Request, Response>> NewHoldCall(std::string user, std::string order) {
  auto call = std::make_unique<UnaryCall<Request, Response>>();
  call->request.set_user_id(std::move(user));
  call->request.set_order_id(std::move(order));
  call->context.set_deadline(DeadlineIn(kCallDeadline));
  return call;
}

// What one consumer group received. Thread-safe (one mutex; every watcher of the group writes).
class GroupState {
 public:
  // `holds`: the number of holds of the run (indexes [0, holds) are order ids "o<i>").
  GroupState(std::string name, int64_t holds) : name_(std::move(name)), got_(holds, 0) {}

  const std::string& name() const { return name_; }

  // Records one event read at `now_unix_ns` (this host's clock).
  void Receive(const HoldEvent& event, int64_t now_unix_ns) {
    const int64_t end_ns = event.end_time().seconds() * 1'000'000'000 + event.end_time().nanos();
    int64_t index = -1;
    const absl::string_view order = event.hold().order_id();
    absl::string_view digits = order;
    if (!absl::ConsumePrefix(&digits, "o") || !absl::SimpleAtoi(digits, &index) || index < 0 ||
        index >= static_cast<int64_t>(got_.size())) {
      index = -1;
    }
    absl::MutexLock lock(&mu_);
    ++received_;
    if (order == kProbeOrder) {
      probe_seen_ = true;
      return;
    }
    if (++receipts_[event.event_id()] > 1) return;  // a redelivery: no delay sample
    delays_ns_.push_back(now_unix_ns - end_ns);
    if (index >= 0) {
      got_[index] = 1;
    } else {
      ++foreign_;
    }
  }

  bool probe_seen() const {
    absl::MutexLock lock(&mu_);
    return probe_seen_;
  }

  // Holds in `ended` (1 = its end call answered OK) of which no event arrived.
  int64_t Missing(const std::vector<std::atomic<uint8_t>>& ended) const {
    absl::MutexLock lock(&mu_);
    int64_t missing = 0;
    for (size_t i = 0; i < got_.size(); ++i) {
      if (ended[i].load(std::memory_order_relaxed) != 0 && got_[i] == 0) ++missing;
    }
    return missing;
  }

  struct Summary {
    int64_t expected = 0, received = 0, distinct = 0, missing = 0, duplicates = 0, unexpected = 0;
  };
  // The group's figures against `ended`; appends its delay samples to `delays_ns`.
  Summary Summarize(const std::vector<std::atomic<uint8_t>>& ended,
                    std::vector<int64_t>* delays_ns) const {
    absl::MutexLock lock(&mu_);
    Summary s;
    for (size_t i = 0; i < got_.size(); ++i) {
      const bool expected = ended[i].load(std::memory_order_relaxed) != 0;
      s.expected += expected ? 1 : 0;
      if (expected && got_[i] == 0) ++s.missing;
      if (!expected && got_[i] != 0) ++s.unexpected;
    }
    s.unexpected += foreign_;
    s.received = received_ - (probe_seen_ ? 1 : 0);
    s.distinct = static_cast<int64_t>(receipts_.size());
    s.duplicates = s.received - s.distinct;
    delays_ns->insert(delays_ns->end(), delays_ns_.begin(), delays_ns_.end());
    return s;
  }

 private:
  const std::string name_;
  mutable absl::Mutex mu_;
  std::vector<uint8_t> got_ ABSL_GUARDED_BY(mu_);
  std::unordered_map<std::string, int> receipts_ ABSL_GUARDED_BY(mu_);  // per event_id (no probe)
  std::vector<int64_t> delays_ns_ ABSL_GUARDED_BY(mu_);
  int64_t received_ ABSL_GUARDED_BY(mu_) = 0;  // probe included
  int64_t foreign_ ABSL_GUARDED_BY(mu_) = 0;   // events with an order id not of this run
  bool probe_seen_ ABSL_GUARDED_BY(mu_) = false;
};

// What the watchers did: those that ended before Stop (by status), events read, AckHoldEvents
// calls. Thread-safe.
struct Tally {
  absl::Mutex mu;
  int64_t ended_before_stop ABSL_GUARDED_BY(mu) = 0;
  CodeCounts ended_before_stop_codes ABSL_GUARDED_BY(mu){};
  std::atomic<bool> stopping{false};
  std::atomic<int64_t> events{0};
  std::atomic<int64_t> ack_calls{0};
  std::atomic<int64_t> acked{0};
  std::atomic<int64_t> ack_errors{0};
  std::atomic<int64_t> acks_in_flight{0};
};

// One consumer: a WatchHoldEvents stream read with the callback API, and the event ids it has read
// but not acked yet. Start once; Flush from one thread (the acker); Cancel from any.
class Watcher final : public grpc::ClientReadReactor<HoldEvent> {
 public:
  Watcher(OrderHold::Stub* stub, GroupState* group, std::string consumer, Tally* tally)
      : stub_(stub), group_(group), tally_(tally) {
    request_.set_consumer_group(group->name());
    request_.set_consumer(std::move(consumer));
    request_.set_start_position(orderhold::v1::EARLIEST);
  }

  void Start() {
    stub_->async()->WatchHoldEvents(&context_, &request_, this);
    StartRead(&event_);
    StartCall();
  }

  void OnReadDone(bool ok) override {
    if (!ok) return;  // the stream ended; OnDone follows
    group_->Receive(event_, absl::GetCurrentTimeNanos());
    tally_->events.fetch_add(1, std::memory_order_relaxed);
    {
      absl::MutexLock lock(&mu_);
      unacked_.push_back(event_.event_id());
    }
    StartRead(&event_);
  }

  void OnDone(const grpc::Status& status) override {
    const int code = std::clamp(static_cast<int>(status.error_code()), 0, kNumStatusCodes - 1);
    {
      absl::MutexLock lock(&tally_->mu);
      if (!tally_->stopping.load()) {
        ++tally_->ended_before_stop;
        ++tally_->ended_before_stop_codes[code];
        if (tally_->ended_before_stop <= 5) {
          std::fprintf(stderr, "event-bench: watcher %s ended: %s %s\n",
                       request_.consumer().c_str(), StatusCodeName(code).c_str(),
                       status.error_message().c_str());
        }
      }
    }
    done_.Notify();
  }

  // Acks what was read since the last Flush, in one AckHoldEvents call (none when nothing was).
  void Flush() {
    using AckCall =
        UnaryCall<orderhold::v1::AckHoldEventsRequest, orderhold::v1::AckHoldEventsResponse>;
    auto call = std::make_unique<AckCall>();
    {
      absl::MutexLock lock(&mu_);
      if (unacked_.empty()) return;
      for (std::string& id : unacked_) call->request.add_event_ids(std::move(id));
      unacked_.clear();
    }
    call->request.set_consumer_group(group_->name());
    call->context.set_deadline(DeadlineIn(kCallDeadline));
    tally_->ack_calls.fetch_add(1, std::memory_order_relaxed);
    tally_->acks_in_flight.fetch_add(1);
    AckCall* raw = call.release();
    Tally* tally = tally_;
    stub_->async()->AckHoldEvents(&raw->context, &raw->request, &raw->response,
                                  [raw, tally](grpc::Status status) {
                                    if (status.ok()) {
                                      tally->acked.fetch_add(raw->response.acked());
                                    } else {
                                      tally->ack_errors.fetch_add(1);
                                    }
                                    delete raw;
                                    tally->acks_in_flight.fetch_sub(1);
                                  });
  }

  void Cancel() { context_.TryCancel(); }

  // Waits until OnDone ran, at most until `deadline`; true when it did.
  bool WaitDone(absl::Time deadline) { return done_.WaitForNotificationWithDeadline(deadline); }

 private:
  OrderHold::Stub* const stub_;
  GroupState* const group_;
  Tally* const tally_;
  grpc::ClientContext context_;
  orderhold::v1::WatchHoldEventsRequest request_;
  HoldEvent event_;
  absl::Notification done_;
  absl::Mutex mu_;
  std::vector<std::string> unacked_ ABSL_GUARDED_BY(mu_);
};

std::string CodesJson(const CodeCounts& codes) {
  std::string out;
  AppendCodesJson(codes, &out);
  return out;
}

std::string Seconds(absl::Duration d) { return absl::StrFormat("%.3f", absl::ToDoubleSeconds(d)); }

// Everything one run owns: channels, groups, watchers and the acker thread.
class EventBench {
 public:
  EventBench(std::vector<std::unique_ptr<OrderHold::Stub>> stubs, int64_t holds)
      : stubs_(std::move(stubs)), ended_(holds) {
    const int groups = absl::GetFlag(FLAGS_groups);
    for (int g = 0; g < groups; ++g) {
      groups_.push_back(std::make_unique<GroupState>(
          absl::StrCat(absl::GetFlag(FLAGS_group_prefix), "-g", g), holds));
    }
    const int watchers = absl::GetFlag(FLAGS_watchers);
    for (int w = 0; w < watchers; ++w) {
      GroupState* group = groups_[w % groups].get();
      watchers_.push_back(std::make_unique<Watcher>(stubs_[w % stubs_.size()].get(), group,
                                                    absl::StrCat(group->name(), "-c", w / groups),
                                                    &tally_));
    }
  }

  void StartWatchers() {
    for (auto& watcher : watchers_) watcher->Start();
    acker_ = std::thread([this] { AckLoop(); });
  }

  // Cancels every watcher, waits for them (bounded), sends the last acks. False when some
  // watcher or ack did not finish within kShutdownWait (the caller must then not destroy this).
  bool Stop() {
    tally_.stopping.store(true);
    {
      absl::MutexLock lock(&acker_mu_);
      acker_stop_ = true;
    }
    if (acker_.joinable()) acker_.join();
    for (auto& watcher : watchers_) watcher->Cancel();
    const absl::Time deadline = absl::Now() + kShutdownWait;
    bool all = true;
    for (auto& watcher : watchers_) all = watcher->WaitDone(deadline) && all;
    for (auto& watcher : watchers_) watcher->Flush();
    while (tally_.acks_in_flight.load() > 0 && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(10));
    }
    return all && tally_.acks_in_flight.load() == 0;
  }

  // watch mode: until SIGTERM/SIGINT (blocked in main) or --max_hold.
  std::string RunWatch() {
    const absl::Time start = absl::Now();
    StartWatchers();
    std::fprintf(stderr, "event-bench: %zu watchers started over %zu groups\n", watchers_.size(),
                 groups_.size());
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGTERM);
    sigaddset(&signals, SIGINT);
    const timespec timeout = absl::ToTimespec(absl::GetFlag(FLAGS_max_hold));
    sigtimedwait(&signals, nullptr, &timeout);
    const absl::Duration held = absl::Now() - start;
    clean_ = Stop();
    absl::MutexLock lock(&tally_.mu);
    return absl::StrCat(
        "{\"mode\":\"watch\",\"watchers\":", watchers_.size(), ",\"groups\":", groups_.size(),
        ",\"connections\":", stubs_.size(), ",\"held_s\":", Seconds(held),
        ",\"watchers_ended_early\":", tally_.ended_before_stop,
        ",\"watcher_end_codes\":", CodesJson(tally_.ended_before_stop_codes),
        ",\"events_received\":", tally_.events.load(), ",\"acks\":", AcksJson(), "}");
  }

  // deliver mode: place, probe, end at --rate, drain; the JSON line of the header.
  std::string RunDeliver() {
    const double rate = absl::GetFlag(FLAGS_rate);
    const int64_t holds = static_cast<int64_t>(ended_.size());
    StartWatchers();

    // 1. Place every hold the window will end (closed loop, bounded in flight).
    const absl::Time place_start = absl::Now();
    const int64_t placed = PlaceAll();
    const absl::Duration place_time = absl::Now() - place_start;
    std::fprintf(stderr, "event-bench: placed %lld of %lld holds in %.1f s\n",
                 static_cast<long long>(placed), static_cast<long long>(holds),
                 absl::ToDoubleSeconds(place_time));

    // 2. The probe: every group delivers (its group exists and someone reads it).
    const absl::Time probe_start = absl::Now();
    std::string probe_s = "null";
    if (PlaceAndCancelProbe()) {
      const absl::Time deadline = probe_start + absl::GetFlag(FLAGS_settle_timeout);
      while (absl::Now() < deadline && !AllProbed()) absl::SleepFor(absl::Milliseconds(10));
      if (AllProbed()) probe_s = Seconds(absl::Now() - probe_start);
    }
    if (probe_s == "null") std::fprintf(stderr, "event-bench: not every group got the probe\n");
    absl::SleepFor(absl::GetFlag(FLAGS_settle));

    // 3. End the holds in open loop.
    const int64_t start_ns = SteadyNs();
    const double period_ns = 1e9 / rate;
    int64_t max_lag_ns = 0;
    for (int64_t i = 0; i < holds; ++i) {
      const int64_t intended = start_ns + static_cast<int64_t>(static_cast<double>(i) * period_ns);
      SleepUntilSteadyNs(intended);
      max_lag_ns = std::max(max_lag_ns, SteadyNs() - intended);
      EndHold(i, intended);
    }
    const int64_t send_stop_ns = SteadyNs();
    while (ends_in_flight_.load() > 0) absl::SleepFor(absl::Milliseconds(5));  // deadlines bound it

    // 4. Drain: until every group has every expected event, or --drain.
    const absl::Time drain_start = absl::Now();
    const absl::Time drain_deadline = drain_start + absl::GetFlag(FLAGS_drain);
    bool drained = false;
    while (!(drained = AllDelivered()) && absl::Now() < drain_deadline) {
      absl::SleepFor(absl::Milliseconds(20));
    }
    const absl::Duration drain_time = absl::Now() - drain_start;
    clean_ = Stop();

    // 5. Figures.
    std::vector<int64_t> delays_ns;
    GroupState::Summary totals;
    std::string per_group;
    for (const auto& group : groups_) {
      const GroupState::Summary s = group->Summarize(ended_, &delays_ns);
      absl::StrAppend(&per_group, per_group.empty() ? "" : ",",
                      "{\"group\":", JsonQuote(group->name()), ",", SummaryJson(s), "}");
      totals.expected += s.expected;
      totals.received += s.received;
      totals.distinct += s.distinct;
      totals.missing += s.missing;
      totals.duplicates += s.duplicates;
      totals.unexpected += s.unexpected;
    }
    const int64_t delay_samples = static_cast<int64_t>(delays_ns.size());
    std::string delay_ms;
    AppendLatencyJson(ComputePercentiles(std::move(delays_ns)), &delay_ms);

    Recorder::Merged merged = recorder_.Merge();
    CodeCounts end_codes{};
    std::vector<int64_t> end_latency;
    for (Method m : {Method::kPay, Method::kCancelHold}) {
      const int i = static_cast<int>(m);
      for (int c = 0; c < kNumStatusCodes; ++c) end_codes[c] += merged.codes[i][c];
      end_latency.insert(end_latency.end(), merged.samples_ns[i].begin(),
                         merged.samples_ns[i].end());
    }
    std::string end_latency_ms;
    AppendLatencyJson(ComputePercentiles(std::move(end_latency)), &end_latency_ms);
    const double send_s = static_cast<double>(send_stop_ns - start_ns) / 1e9;
    int64_t ok = 0;
    for (const auto& e : ended_) ok += e.load();

    absl::MutexLock lock(&tally_.mu);
    return absl::StrCat(
        "{\"mode\":\"deliver\",\"watchers\":", watchers_.size(), ",\"groups\":", groups_.size(),
        ",\"connections\":", stubs_.size(), ",\"rate\":", absl::StrFormat("%.1f", rate),
        ",\"duration_s\":", Seconds(absl::GetFlag(FLAGS_duration)), ",\"holds_placed\":", placed,
        ",\"place_s\":", Seconds(place_time), ",\"probe_s\":", probe_s,
        ",\"ends\":{\"sent\":", holds,
        ",\"send_rate\":", absl::StrFormat("%.1f", send_s > 0 ? holds / send_s : 0),
        ",\"max_send_lag_ms\":", absl::StrFormat("%.3f", static_cast<double>(max_lag_ns) / 1e6),
        ",\"ok\":", ok, ",\"latency_ms\":", end_latency_ms, ",\"codes\":", CodesJson(end_codes),
        "},\"delay_ms\":", delay_ms, ",\"delay_samples\":", delay_samples,
        ",\"drained\":", drained ? "true" : "false", ",\"drain_s\":", Seconds(drain_time),
        ",\"acks\":", AcksJson(), ",\"watchers_ended_early\":", tally_.ended_before_stop,
        ",\"watcher_end_codes\":", CodesJson(tally_.ended_before_stop_codes), ",\"per_group\":[",
        per_group, "],\"totals\":{", SummaryJson(totals), "}}");
  }

  // False when Stop could not finish every call: then this object must not be destroyed.
  bool clean() const { return clean_; }

 private:
  static std::string SummaryJson(const GroupState::Summary& s) {
    return absl::StrCat("\"expected\":", s.expected, ",\"received\":", s.received,
                        ",\"distinct\":", s.distinct, ",\"missing\":", s.missing,
                        ",\"duplicates\":", s.duplicates, ",\"unexpected\":", s.unexpected);
  }

  std::string AcksJson() {
    return absl::StrCat("{\"calls\":", tally_.ack_calls.load(), ",\"acked\":", tally_.acked.load(),
                        ",\"errors\":", tally_.ack_errors.load(), "}");
  }

  OrderHold::Stub* NextStub() { return stubs_[next_stub_++ % stubs_.size()].get(); }

  void AckLoop() {
    const absl::Duration interval = absl::GetFlag(FLAGS_ack_interval);
    for (;;) {
      {
        absl::MutexLock lock(&acker_mu_);
        acker_mu_.AwaitWithTimeout(absl::Condition(&acker_stop_), interval);
        if (acker_stop_) return;
      }
      for (auto& watcher : watchers_) watcher->Flush();
    }
  }

  int64_t PlaceAll() {
    const int64_t holds = static_cast<int64_t>(ended_.size());
    const int window = absl::GetFlag(FLAGS_place_in_flight);
    const std::string prefix = absl::GetFlag(FLAGS_user_prefix);
    const absl::Duration ttl = absl::GetFlag(FLAGS_ttl);
    // Members, not locals: the last callback may still be inside Unlock when the wait below
    // returns.
    absl::Mutex& mu = place_mu_;
    int& outstanding = place_outstanding_;
    std::atomic<int64_t> created{0}, failed{0};
    for (int64_t i = 0; i < holds; ++i) {
      {
        absl::MutexLock lock(&mu);
        auto room = [&] { return outstanding < window; };
        mu.Await(absl::Condition(&room, &decltype(room)::operator()));
        ++outstanding;
      }
      auto* call = NewHoldCall<orderhold::v1::PlaceHoldRequest, orderhold::v1::PlaceHoldResponse>(
                       absl::StrCat(prefix, i), absl::StrCat("o", i))
                       .release();
      *call->request.mutable_ttl() = ToProtoDuration(ttl);
      NextStub()->async()->PlaceHold(&call->context, &call->request, &call->response,
                                     [&, call](grpc::Status status) {
                                       if (status.ok() && call->response.created()) {
                                         created.fetch_add(1);
                                       } else if (failed.fetch_add(1) < 5) {
                                         std::fprintf(stderr, "event-bench: PlaceHold: %s %s\n",
                                                      StatusCodeName(status.error_code()).c_str(),
                                                      status.error_message().c_str());
                                       }
                                       delete call;
                                       absl::MutexLock lock(&mu);
                                       --outstanding;
                                     });
    }
    absl::MutexLock lock(&mu);
    auto drained = [&] { return outstanding == 0; };
    mu.Await(absl::Condition(&drained, &decltype(drained)::operator()));
    return created.load();
  }

  bool PlaceAndCancelProbe() {
    const std::string user = absl::StrCat(absl::GetFlag(FLAGS_user_prefix), kProbeOrder);
    auto place = NewHoldCall<orderhold::v1::PlaceHoldRequest, orderhold::v1::PlaceHoldResponse>(
        user, kProbeOrder);
    *place->request.mutable_ttl() = ToProtoDuration(absl::GetFlag(FLAGS_ttl));
    grpc::Status status = NextStub()->PlaceHold(&place->context, place->request, &place->response);
    if (status.ok()) {
      auto cancel =
          NewHoldCall<orderhold::v1::CancelHoldRequest, orderhold::v1::CancelHoldResponse>(
              user, kProbeOrder);
      status = NextStub()->CancelHold(&cancel->context, cancel->request, &cancel->response);
    }
    if (!status.ok()) {
      std::fprintf(stderr, "event-bench: probe hold: %s %s\n",
                   StatusCodeName(status.error_code()).c_str(), status.error_message().c_str());
    }
    return status.ok();
  }

  bool AllProbed() const {
    return std::all_of(groups_.begin(), groups_.end(),
                       [](const auto& group) { return group->probe_seen(); });
  }

  bool AllDelivered() const {
    return std::all_of(groups_.begin(), groups_.end(),
                       [this](const auto& group) { return group->Missing(ended_) == 0; });
  }

  // Ends hold i (CancelHold for even i, Pay for odd i); latency from `intended_ns`.
  void EndHold(int64_t i, int64_t intended_ns) {
    std::string user = absl::StrCat(absl::GetFlag(FLAGS_user_prefix), i);
    std::string order = absl::StrCat("o", i);
    ends_in_flight_.fetch_add(1);
    auto done = [this, i, intended_ns](Method method, const grpc::Status& status, bool ended) {
      recorder_.Record(method, static_cast<int>(status.error_code()), SteadyNs() - intended_ns);
      if (status.ok() && ended) ended_[i].store(1);
      ends_in_flight_.fetch_sub(1);
    };
    if (i % 2 == 0) {
      auto* call = NewHoldCall<orderhold::v1::CancelHoldRequest, orderhold::v1::CancelHoldResponse>(
                       std::move(user), std::move(order))
                       .release();
      NextStub()->async()->CancelHold(
          &call->context, &call->request, &call->response, [call, done](grpc::Status status) {
            done(Method::kCancelHold, status, !call->response.already_cancelled());
            delete call;
          });
    } else {
      auto* call = NewHoldCall<orderhold::v1::PayRequest, orderhold::v1::PayResponse>(
                       std::move(user), std::move(order))
                       .release();
      NextStub()->async()->Pay(&call->context, &call->request, &call->response,
                               [call, done](grpc::Status status) {
                                 done(Method::kPay, status, !call->response.already_paid());
                                 delete call;
                               });
    }
  }

  std::vector<std::unique_ptr<OrderHold::Stub>> stubs_;
  std::atomic<uint64_t> next_stub_{0};
  std::vector<std::atomic<uint8_t>> ended_;  // per hold: its end call answered OK
  std::vector<std::unique_ptr<GroupState>> groups_;
  std::vector<std::unique_ptr<Watcher>> watchers_;
  Tally tally_;
  Recorder recorder_;
  std::atomic<int64_t> ends_in_flight_{0};
  std::thread acker_;
  absl::Mutex acker_mu_;
  bool acker_stop_ ABSL_GUARDED_BY(acker_mu_) = false;
  absl::Mutex place_mu_;
  int place_outstanding_ ABSL_GUARDED_BY(place_mu_) = 0;
  bool clean_ = true;
};

int Run() {
  const std::string mode = absl::GetFlag(FLAGS_mode);
  const int watchers = absl::GetFlag(FLAGS_watchers);
  const int groups = absl::GetFlag(FLAGS_groups);
  const int connections = absl::GetFlag(FLAGS_connections);
  const double rate = absl::GetFlag(FLAGS_rate);
  const absl::Duration duration = absl::GetFlag(FLAGS_duration);
  if ((mode != "watch" && mode != "deliver") || watchers < 0 || groups < 1 || connections < 1 ||
      (mode == "deliver" && (watchers < groups || !(rate > 0) || duration <= absl::ZeroDuration() ||
                             absl::GetFlag(FLAGS_place_in_flight) < 1))) {
    std::fprintf(stderr,
                 "need --mode=watch|deliver, --watchers >= 0, --groups >= 1, --connections >= 1; "
                 "deliver: --watchers >= --groups, --rate > 0, --duration > 0, "
                 "--place_in_flight >= 1\n");
    return kExitUsage;
  }
  if (mode == "watch") {
    // Block SIGTERM/SIGINT before gRPC starts its threads, so only sigtimedwait sees them. (deliver
    // ends by itself; a signal there kills it as usual.)
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGTERM);
    sigaddset(&signals, SIGINT);
    pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  }

  auto channels =
      ConnectChannels(absl::GetFlag(FLAGS_target), TlsOptions{}, connections, kConnectTimeout);
  if (!channels.ok()) {
    std::fprintf(stderr, "event-bench: %s\n", channels.status().ToString().c_str());
    return kExitFailed;
  }
  std::vector<std::unique_ptr<OrderHold::Stub>> stubs;
  for (const auto& channel : *channels) stubs.push_back(OrderHold::NewStub(channel));
  const int64_t holds =
      mode == "deliver"
          ? std::max<int64_t>(1, static_cast<int64_t>(rate * absl::ToDoubleSeconds(duration)))
          : 0;
  auto bench = std::make_unique<EventBench>(std::move(stubs), holds);
  const std::string json = mode == "watch" ? bench->RunWatch() : bench->RunDeliver();
  std::printf("%s\n", json.c_str());
  std::fflush(stdout);
  if (!bench->clean()) {
    // A call gRPC never finished still points into `bench`: leave without destroying anything
    // rather than hang or crash in teardown (the figures are out).
    std::fprintf(stderr, "event-bench: some calls did not finish within %s of the stop\n",
                 absl::FormatDuration(kShutdownWait).c_str());
    std::_Exit(0);
  }
  return 0;
}

}  // namespace
}  // namespace orderhold::client::bench

int main(int argc, char** argv) {
  // As orderhold-bench: Debian's abseil checks every Mutex for deadlock cycles, a cost the
  // generator must not add to what it measures.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  absl::ParseCommandLine(argc, argv);
  return orderhold::client::bench::Run();
}
