// orderhold-soak-watch: the consumer group of tests/soak/run.sh. Not a test and not for
// production use. It watches like a careful ticketing backend and writes down everything it saw,
// for tests/soak/oracle.py to check that every hold ended exactly once with exactly one event.
//
//   orderhold-soak-watch --target=ipv4:127.0.0.1:50051,127.0.0.1:50052
//       --lb_policy=round_robin --group=soak --consumers=2 --out=events.jsonl
//
// Each of --consumers threads holds one WatchHoldEvents stream as consumer "<group>-c<i>" of
// --group (start EARLIEST), on one channel (so with round_robin the streams land on different
// servers). When a stream ends (Redis or a server killed, a server restarted), the thread writes a
// "watch_end" line and opens it again under the same consumer name after --reconnect_delay: the
// server then first sends back what that consumer had been sent but had not acked. Received event
// ids are acked in batches (AckHoldEvents, at most 10,000 ids per call) once per --ack_interval by
// one acker thread; a failed ack is written down and dropped, since the events come back (on
// reconnect, or to another consumer after the server's --event_ack_timeout).
// --stuck_consumers more threads watch as "<group>-stuck<i>" and never ack (a stuck or broken
// consumer beside the healthy ones): what they are sent must reach a "<group>-c<i>" consumer after
// the ack timeout, which tests/soak/oracle.py checks (and prints the redelivery delay).
//
// Lines written to --out, one JSON object each (Unix µs for "t", ms for "end" and "exp"):
//   {"id":"3/1764140000123-0","u":"u7","o":"b00c0ffee-17","out":3,"end":..,"exp":..,"dc":1,
//    "c":"soak-c0","t":..}                                    one received event (out: HoldOutcome)
//   {"watch_end":14,"msg":"...","c":"soak-c0","t":..}         a stream ended with that gRPC code
//   {"ack_error":14,"ids":120,"t":..}                         an AckHoldEvents call failed
// Runs until SIGTERM or SIGINT, then cancels the streams, acks what it holds, closes the file and
// exits 0 (3 when writing the file failed; 2 on a bad flag; 1 when the target is unreachable at
// start).
#include <grpcpp/client_context.h>
#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <cstdint>
#include <iostream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/bench/call_log.h"
#include "client/bench/load_generator.h"
#include "google/protobuf/util/time_util.h"
#include "orderhold/v1/orderhold.grpc.pb.h"

ABSL_FLAG(std::string, target, "localhost:50051", "OrderHold server(s) (any gRPC target).");
ABSL_FLAG(std::string, lb_policy, "",
          "gRPC load-balancing policy: empty (pick_first) or "
          "round_robin.");
ABSL_FLAG(std::string, group, "soak", "The consumer group.");
ABSL_FLAG(int, consumers, 2, "Consumers of the group, one stream each.");
ABSL_FLAG(int, stuck_consumers, 0,
          "More consumers of the group that read and never ack (named <group>-stuck<i>).");
ABSL_FLAG(std::string, out, "events.jsonl", "Where the lines go (truncated at start).");
ABSL_FLAG(absl::Duration, ack_interval, absl::Milliseconds(100), "Time between ack batches.");
ABSL_FLAG(absl::Duration, reconnect_delay, absl::Milliseconds(100),
          "Wait before a consumer opens its stream again after it ended.");

namespace {

namespace v1 = orderhold::v1;
using google::protobuf::util::TimeUtil;

constexpr int kMaxIdsPerAck = 10'000;

int64_t NowUs() { return absl::ToUnixMicros(absl::Now()); }

std::string Json(absl::string_view s) {
  std::string out;
  orderhold::client::bench::AppendJsonString(s, &out);
  return out;
}

class Watcher {
 public:
  Watcher(std::shared_ptr<grpc::Channel> channel, std::string group, int consumers, int stuck,
          orderhold::client::bench::CallLog* out)
      : stub_(v1::OrderHold::NewStub(channel)), group_(std::move(group)), out_(out) {
    for (int i = 0; i < consumers + stuck; ++i) {
      consumers_.push_back(std::make_unique<Consumer>());
      consumers_.back()->stuck = i >= consumers;
      consumers_.back()->name = i < consumers ? absl::StrCat(group_, "-c", i)
                                              : absl::StrCat(group_, "-stuck", i - consumers);
    }
  }

  void Start(absl::Duration ack_interval, absl::Duration reconnect_delay) {
    for (auto& consumer : consumers_) {
      Consumer* c = consumer.get();
      threads_.emplace_back([this, c, reconnect_delay] { RunConsumer(c, reconnect_delay); });
    }
    threads_.emplace_back([this, ack_interval] { RunAcker(ack_interval); });
  }

  // Cancels the streams, acks once more, joins every thread.
  void Stop() {
    stop_.store(true);
    for (auto& consumer : consumers_) {
      std::lock_guard<std::mutex> lock(consumer->mu);
      if (consumer->context != nullptr) consumer->context->TryCancel();
    }
    stopped_.Notify();
    for (std::thread& t : threads_) t.join();
    AckAll();
  }

 private:
  struct Consumer {
    std::string name;
    bool stuck = false;  // never acks
    std::mutex mu;
    grpc::ClientContext* context = nullptr;  // guarded by mu; the open stream's
    std::vector<std::string> unacked;        // guarded by mu
  };

  void RunConsumer(Consumer* c, absl::Duration reconnect_delay) {
    v1::WatchHoldEventsRequest request;
    request.set_consumer_group(group_);
    request.set_consumer(c->name);
    request.set_start_position(v1::EARLIEST);
    while (!stop_.load()) {
      grpc::ClientContext context;
      {
        std::lock_guard<std::mutex> lock(c->mu);
        c->context = &context;
      }
      if (stop_.load()) context.TryCancel();
      std::unique_ptr<grpc::ClientReader<v1::HoldEvent>> reader =
          stub_->WatchHoldEvents(&context, request);
      v1::HoldEvent event;
      std::string line;
      while (reader->Read(&event)) {
        line = absl::StrCat(
            "{\"id\":", Json(event.event_id()), ",\"u\":", Json(event.hold().user_id()),
            ",\"o\":", Json(event.hold().order_id()),
            ",\"out\":", static_cast<int>(event.outcome()),
            ",\"end\":", TimeUtil::TimestampToMilliseconds(event.end_time()),
            ",\"exp\":", TimeUtil::TimestampToMilliseconds(event.hold().expire_time()),
            ",\"dc\":", event.delivery_count(), ",\"c\":", Json(c->name), ",\"t\":", NowUs(),
            "}\n");
        out_->Write(line);
        if (c->stuck) continue;
        std::lock_guard<std::mutex> lock(c->mu);
        c->unacked.push_back(event.event_id());
      }
      const grpc::Status status = reader->Finish();
      {
        std::lock_guard<std::mutex> lock(c->mu);
        c->context = nullptr;
      }
      if (stop_.load()) break;
      out_->Write(absl::StrCat("{\"watch_end\":", static_cast<int>(status.error_code()),
                               ",\"msg\":", Json(status.error_message()), ",\"c\":", Json(c->name),
                               ",\"t\":", NowUs(), "}\n"));
      stopped_.WaitForNotificationWithTimeout(reconnect_delay);
    }
  }

  void RunAcker(absl::Duration interval) {
    while (!stopped_.WaitForNotificationWithTimeout(interval)) AckAll();
  }

  void AckAll() {
    for (auto& consumer : consumers_) {
      std::vector<std::string> ids;
      {
        std::lock_guard<std::mutex> lock(consumer->mu);
        ids.swap(consumer->unacked);
      }
      for (size_t begin = 0; begin < ids.size(); begin += kMaxIdsPerAck) {
        v1::AckHoldEventsRequest request;
        request.set_consumer_group(group_);
        for (size_t i = begin; i < ids.size() && i < begin + kMaxIdsPerAck; ++i) {
          request.add_event_ids(ids[i]);
        }
        grpc::ClientContext context;
        context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(2)));
        v1::AckHoldEventsResponse response;
        const grpc::Status status = stub_->AckHoldEvents(&context, request, &response);
        if (!status.ok()) {
          out_->Write(absl::StrCat("{\"ack_error\":", static_cast<int>(status.error_code()),
                                   ",\"ids\":", request.event_ids_size(), ",\"t\":", NowUs(),
                                   "}\n"));
        }
      }
    }
  }

  const std::unique_ptr<v1::OrderHold::Stub> stub_;
  const std::string group_;
  orderhold::client::bench::CallLog* const out_;
  std::vector<std::unique_ptr<Consumer>> consumers_;
  std::vector<std::thread> threads_;
  std::atomic<bool> stop_{false};
  absl::Notification stopped_;
};

}  // namespace

int main(int argc, char** argv) {
  // Block the stop signals in every thread (threads inherit the mask); main waits for them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  absl::ParseCommandLine(argc, argv);
  const int consumers = absl::GetFlag(FLAGS_consumers);
  if (consumers < 1 || consumers > 100) {
    std::cerr << "error: --consumers must be 1-100\n";
    return 2;
  }
  const int stuck = absl::GetFlag(FLAGS_stuck_consumers);
  if (stuck < 0 || stuck > 100) {
    std::cerr << "error: --stuck_consumers must be 0-100\n";
    return 2;
  }
  auto out = orderhold::client::bench::CallLog::Open(absl::GetFlag(FLAGS_out));
  if (!out.ok()) {
    std::cerr << "error: " << out.status().message() << "\n";
    return 2;
  }
  auto channels = orderhold::client::bench::ConnectChannels(
      absl::GetFlag(FLAGS_target), orderhold::client::TlsOptions{}, 1, absl::Seconds(10),
      absl::GetFlag(FLAGS_lb_policy));
  if (!channels.ok()) {
    std::cerr << "error: " << channels.status().message() << "\n";
    return 1;
  }
  Watcher watcher(channels->front(), absl::GetFlag(FLAGS_group), consumers, stuck, out->get());
  watcher.Start(absl::GetFlag(FLAGS_ack_interval), absl::GetFlag(FLAGS_reconnect_delay));
  int signal = 0;
  sigwait(&signals, &signal);
  watcher.Stop();
  return (*out)->Close() ? 0 : 3;
}
