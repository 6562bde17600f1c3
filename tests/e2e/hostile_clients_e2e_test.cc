// Hostile clients against the real orderhold-server binary (a child process, measured from
// outside through /proc): requests at and over the message-size limit, 10,000 concurrent calls on
// one connection, thousands of idle HTTP/2 connections, watches that never read while thousands of
// events are produced, a watch whose client freezes (SIGSTOP: no FIN, no answer to pings) or dies,
// ids of every length and byte class. In each, the server stays up, answers a well-behaved
// client within its deadline, and its memory stays bounded; the figures (RSS, bytes per idle
// connection) are printed for tests/README.md. The limits are the --grpc_* flags
// (server/grpc/server_limits.h), lowered here so the tests reach them quickly.
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "orderhold/v1/orderhold.grpc.pb.h"
#include "tests/testing/eventually.h"
#include "tests/testing/os_util.h"
#include "tests/testing/redis_server.h"
#include "tests/testing/server_process.h"
#include "tests/testing/status_matchers.h"

namespace orderhold {
namespace {

using ::orderhold::testing::Eventually;
using ::testing::AnyOf;
using ::testing::HasSubstr;

constexpr int kMaxStreams = 100;        // --grpc_max_concurrent_streams
constexpr int kMaxMessage = 64 * 1024;  // --grpc_max_receive_message_size
constexpr int64_t kMiB = 1024 * 1024;

// Checks that the server's RSS grew by less than `bound` bytes (Release builds only).
void ExpectGrowthBelow(int64_t before, int64_t after, int64_t bound) {
  if (!testing::kAddressSanitized) {
    EXPECT_LT(after - before, bound) << "RSS " << before << " -> " << after << " bytes";
  }
}

class HostileClientsE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK_AND_ASSIGN(redis_, testing::RedisServer::Start());
    server_.Start({"--grpc_address=127.0.0.1:0", "--metrics_address=127.0.0.1:0",
                   absl::StrCat("--redis_url=", redis_->url()),
                   absl::StrCat("--grpc_max_concurrent_streams=", kMaxStreams),
                   absl::StrCat("--grpc_max_receive_message_size=", kMaxMessage),
                   absl::StrCat("--grpc_keepalive_time=", KeepaliveTime()),
                   "--grpc_keepalive_timeout=1s", "--max_watches=20"});
    ASSERT_TRUE(server_.WaitServing()) << server_.log();
    stub_ = NewStub();
  }
  void TearDown() override {
    EXPECT_FALSE(server_.Exited()) << "the server died: " << server_.log();
  }

  // --grpc_keepalive_time: 1 s, so that a frozen client is found out quickly.
  virtual std::string KeepaliveTime() const { return "1s"; }

  // A stub on a connection of its own.
  std::unique_ptr<v1::OrderHold::Stub> NewStub() const {
    grpc::ChannelArguments args;
    args.SetInt("orderhold.test.connection", next_connection_++);  // no subchannel sharing
    return v1::OrderHold::NewStub(grpc::CreateCustomChannel(
        absl::StrCat("127.0.0.1:", server_.grpc_port()), grpc::InsecureChannelCredentials(), args));
  }

  static std::unique_ptr<grpc::ClientContext> Context(absl::Duration deadline) {
    auto context = std::make_unique<grpc::ClientContext>();
    context->set_deadline(absl::ToChronoTime(absl::Now() + deadline));
    return context;
  }

  // A well-behaved client's call, on a connection of its own: answered (NOT_FOUND: no such
  // order) within a 2 s deadline.
  void ExpectServesOthers() {
    auto stub = NewStub();
    v1::GetHoldRequest request;
    request.set_user_id("bystander");
    request.set_order_id("o-1");
    v1::GetHoldResponse response;
    const absl::Time start = absl::Now();
    const grpc::Status status = stub->GetHold(Context(absl::Seconds(2)).get(), request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND) << status.error_message();
    std::cout << "  a well-behaved call answered in " << absl::Now() - start << "\n";
  }

  // Whether a GetHold on a connection of its own is answered within `deadline`.
  bool ServedWithin(absl::Duration deadline) const {
    auto stub = NewStub();
    v1::GetHoldRequest request;
    request.set_user_id("bystander");
    request.set_order_id("o-1");
    v1::GetHoldResponse response;
    return stub->GetHold(Context(deadline).get(), request, &response).error_code() ==
           grpc::StatusCode::NOT_FOUND;
  }

  int64_t Rss() const { return server_.RssBytes().value_or(-1); }

  // The orderhold_watches gauge, from /metrics; -1 when it cannot be read.
  int OpenWatches() const {
    auto metrics = testing::RunProgram(
        {"curl", "-s", absl::StrCat("http://127.0.0.1:", server_.metrics_port(), "/metrics")});
    if (!metrics.ok()) return -1;
    const size_t at = metrics->find("\norderhold_watches ");
    return at == std::string::npos ? -1 : std::atoi(metrics->c_str() + at + 19);
  }

  std::unique_ptr<testing::RedisServer> redis_;
  testing::ServerProcess server_{ORDERHOLD_SERVER_BINARY};
  std::unique_ptr<v1::OrderHold::Stub> stub_;
  mutable int next_connection_ = 0;
};

TEST_F(HostileClientsE2eTest, MessagesOverTheLimitAreRefusedAndTheConnectionGoesOn) {
  v1::PlaceHoldRequest request;
  request.set_order_id("o-1");
  v1::PlaceHoldResponse response;
  request.set_user_id(std::string(4 * kMiB, 'u'));  // the gRPC default limit: refused here
  grpc::Status status = stub_->PlaceHold(Context(absl::Seconds(10)).get(), request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << status.error_message();
  request.set_user_id(std::string(kMaxMessage + 1, 'u'));
  status = stub_->PlaceHold(Context(absl::Seconds(10)).get(), request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << status.error_message();
  // Just under the limit: read, and refused by validation, naming the field.
  request.set_user_id(std::string(kMaxMessage - 100, 'u'));
  status = stub_->PlaceHold(Context(absl::Seconds(10)).get(), request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("user_id"));
  // The same connection still works.
  request.set_user_id("u-1");
  status = stub_->PlaceHold(Context(absl::Seconds(10)).get(), request, &response);
  EXPECT_TRUE(status.ok()) << status.error_message();
  ExpectServesOthers();
}

// 10,000 calls at once on one connection, 100 times the stream limit: the client queues what the
// server does not admit, every call completes, others are served meanwhile.
TEST_F(HostileClientsE2eTest, TenThousandConcurrentCallsOnOneConnection) {
  constexpr int kCalls = 10000;
  const int64_t rss_before = Rss();
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  std::vector<v1::GetHoldRequest> requests(kCalls);
  std::vector<v1::GetHoldResponse> responses(kCalls);
  std::atomic<int> done{0}, not_found{0};
  absl::Notification all_done;
  for (int i = 0; i < kCalls; ++i) {
    contexts.push_back(Context(absl::Seconds(120)));
    requests[i].set_user_id(absl::StrCat("u-", i));
    requests[i].set_order_id("o-1");
    stub_->async()->GetHold(contexts[i].get(), &requests[i], &responses[i],
                            [&](grpc::Status status) {
                              not_found += status.error_code() == grpc::StatusCode::NOT_FOUND;
                              if (++done == kCalls) all_done.Notify();
                            });
  }
  ExpectServesOthers();
  ASSERT_TRUE(all_done.WaitForNotificationWithTimeout(absl::Seconds(150)));
  EXPECT_EQ(not_found.load(), kCalls);
  const int64_t rss_after = Rss();
  std::cout << "  server RSS " << rss_before / kMiB << " MiB before, " << rss_after / kMiB
            << " MiB after 10,000 concurrent calls on one connection\n";
  ExpectGrowthBelow(rss_before, rss_after, 64 * kMiB);
  ExpectServesOthers();
}

// 2,000 HTTP/2 connections that say hello (preface and SETTINGS) and nothing else.
// Idle connections at the default keepalive (60 s). The raw sockets below never answer the
// server's pings, so at the fixture's 1 s they were cut 2 s after they were accepted: on a busy
// machine (CI, 2026-12-06) the burst took longer than that, and the count never reached 2,000.
class IdleConnectionsE2eTest : public HostileClientsE2eTest {
 protected:
  std::string KeepaliveTime() const override { return "60s"; }
};

TEST_F(IdleConnectionsE2eTest, ThousandsOfIdleConnections) {
  constexpr int kConnections = 2000;
  const int64_t rss_before = Rss();
  const int fds_before = server_.OpenFds().value_or(-1);
  std::vector<int> sockets;
  static constexpr char kHello[] =
      "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"       // the client connection preface (RFC 9113 3.4)
      "\x00\x00\x00\x04\x00\x00\x00\x00\x00";  // an empty SETTINGS frame
  for (int i = 0; i < kConnections; ++i) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_GE(fd, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(server_.grpc_port());
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
    ASSERT_EQ(write(fd, kHello, sizeof(kHello) - 1), static_cast<ssize_t>(sizeof(kHello) - 1));
    sockets.push_back(fd);
  }
  ASSERT_TRUE(Eventually([&] {
    return server_.OpenFds().value_or(0) >= fds_before + kConnections;
  })) << "the server holds "
      << server_.OpenFds().value_or(-1) << " descriptors";
  // Taking 2,000 connections at once is a burst (HTTP/2 setup: under 0.1 s in Release, over 2 s
  // under ASan); once they are in, idle, others are served within their deadlines.
  const absl::Time burst = absl::Now();
  EXPECT_TRUE(Eventually([&] { return ServedWithin(absl::Seconds(2)); }, absl::Seconds(30)));
  std::cout << "  the burst of connections settled in " << absl::Now() - burst << "\n";
  ExpectServesOthers();
  const int64_t rss_after = Rss();
  std::cout << "  " << kConnections << " idle connections: server RSS " << rss_before / kMiB
            << " -> " << rss_after / kMiB << " MiB, "
            << (rss_after - rss_before) / kConnections / 1024 << " KiB each\n";
  ExpectGrowthBelow(rss_before, rss_after, kConnections * 64 * 1024);
  // Closing them is a burst too: under ASan on a busy machine the server had 427 of the 2,000
  // still open after 10 s (CI, 2026-11-26), so the same bound as the burst's.
  for (int fd : sockets) close(fd);
  EXPECT_TRUE(Eventually([&] { return server_.OpenFds().value_or(0) < fds_before + 50; },
                         absl::Seconds(30)))
      << "the server still holds " << server_.OpenFds().value_or(-1) << " descriptors";
  ExpectServesOthers();
}

// Ten watches that never read while 2,000 holds end (an event each, for every group): HTTP/2
// flow control stops the server's writes, and what it buffers per watch is bounded.
TEST_F(HostileClientsE2eTest, WatchesThatNeverReadStayBounded) {
  constexpr int kWatches = 10;
  constexpr int kHolds = 2000;
  std::vector<std::unique_ptr<v1::OrderHold::Stub>> stubs;
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  std::vector<std::unique_ptr<grpc::ClientReader<v1::HoldEvent>>> readers;
  for (int i = 0; i < kWatches; ++i) {
    stubs.push_back(NewStub());
    contexts.push_back(Context(absl::Minutes(5)));
    v1::WatchHoldEventsRequest request;
    request.set_consumer_group(absl::StrCat("lazy-", i));
    request.set_consumer("lazy");
    readers.push_back(stubs.back()->WatchHoldEvents(contexts.back().get(), request));
  }
  ASSERT_TRUE(Eventually([&] { return OpenWatches() == kWatches; }))
      << OpenWatches() << " watches open; " << server_.log();
  const int64_t rss_before = Rss();
  std::atomic<int> ended{0};
  std::vector<std::thread> workers;
  for (int w = 0; w < 4; ++w) {
    workers.emplace_back([&, w] {
      auto stub = NewStub();
      for (int i = w; i < kHolds; i += 4) {
        v1::PlaceHoldRequest place;
        place.set_user_id(absl::StrCat("u-", i));
        place.set_order_id("o-1");
        v1::PlaceHoldResponse placed;
        if (!stub->PlaceHold(Context(absl::Seconds(10)).get(), place, &placed).ok()) continue;
        v1::CancelHoldRequest cancel;
        cancel.set_user_id(place.user_id());
        cancel.set_order_id("o-1");
        v1::CancelHoldResponse cancelled;
        ended += stub->CancelHold(Context(absl::Seconds(10)).get(), cancel, &cancelled).ok();
      }
    });
  }
  for (std::thread& worker : workers) worker.join();
  EXPECT_EQ(ended.load(), kHolds);
  ExpectServesOthers();
  absl::SleepFor(absl::Seconds(1));  // let the dispatcher deliver what flow control admits
  const int64_t rss_after = Rss();
  std::cout << "  " << kWatches << " watches that never read, " << kHolds
            << " events each: server RSS " << rss_before / kMiB << " -> " << rss_after / kMiB
            << " MiB\n";
  // Unbounded buffering would hold all 20,000 events (~1 KB each in memory).
  ExpectGrowthBelow(rss_before, rss_after, 16 * kMiB);
  for (int i = 0; i < kWatches; ++i) {
    contexts[i]->TryCancel();
    v1::HoldEvent event;
    while (readers[i]->Read(&event)) {
    }
    EXPECT_EQ(readers[i]->Finish().error_code(), grpc::StatusCode::CANCELLED);
  }
  EXPECT_TRUE(Eventually([&] { return OpenWatches() == 0; }));
}

// A client frozen mid-watch (SIGSTOP: its connection stays open, nobody answers the server's
// keepalive pings) loses the watch after --grpc_keepalive_time + --grpc_keepalive_timeout; one
// that dies (SIGKILL: the kernel closes its socket) loses it at once. Either way the slot of
// --max_watches comes back.
TEST_F(HostileClientsE2eTest, AWatchWhoseClientFreezesOrDiesIsReleased) {
  for (const int signal : {SIGSTOP, SIGKILL}) {
    SCOPED_TRACE(signal == SIGSTOP ? "SIGSTOP" : "SIGKILL");
    testing::ServerProcess client(ORDERHOLD_CLI_BINARY);
    client.Start({absl::StrCat("--target=127.0.0.1:", server_.grpc_port()), "watch", "--group",
                  absl::StrCat("vanishing-", signal)});
    ASSERT_TRUE(Eventually([&] { return OpenWatches() == 1; })) << client.log();
    const absl::Time start = absl::Now();
    client.Signal(signal);
    EXPECT_TRUE(Eventually([&] { return OpenWatches() == 0; }, absl::Seconds(20)));
    std::cout << "  watch released " << absl::Now() - start << " after the client's "
              << (signal == SIGSTOP ? "SIGSTOP" : "SIGKILL") << "\n";
    client.Signal(SIGKILL);
  }
  ExpectServesOthers();
}

// Ids of every length and byte class in every id field: each call is answered OK or
// INVALID_ARGUMENT naming the field, nothing else.
TEST_F(HostileClientsE2eTest, IdsOfEveryLengthAndByteClass) {
  const std::vector<std::string> classes = {"a",
                                            std::string(1, '\0'),
                                            "\x01",
                                            "\x7f",
                                            "\xc2\x80" /* C1 */,
                                            "\xff",
                                            "\xc0\xaf" /* overlong */,
                                            "\xed\xa0\x80" /* surrogate */,
                                            "\xf0\x9f\x8e\xab" /* 4 bytes */,
                                            "\xe2\x80\x8f" /* RLM */};
  int ok = 0, invalid = 0;
  for (const std::string& unit : classes) {
    for (const size_t length :
         {size_t{0}, size_t{1}, size_t{64}, size_t{65}, size_t{128}, size_t{129}, size_t{4096}}) {
      std::string value;
      while (value.size() < length) value += unit;
      value.resize(length);
      for (const char* field : {"user_id", "order_id", "scope", "labels", "request_id"}) {
        grpc::Status status;
        const std::string name(field);
        if (name == "request_id") {
          v1::ExtendHoldRequest request;
          request.set_user_id("u-ids");
          request.set_order_id("o-ids");
          request.set_request_id(value);
          v1::ExtendHoldResponse response;
          status = stub_->ExtendHold(Context(absl::Seconds(10)).get(), request, &response);
          // A valid request_id reaches the store: the order is unknown.
          if (status.error_code() == grpc::StatusCode::NOT_FOUND) status = grpc::Status::OK;
        } else {
          v1::PlaceHoldRequest request;
          request.set_user_id(name == "user_id" ? value : "u-ids");
          request.set_order_id(name == "order_id" ? value : absl::StrCat("o-", ok + invalid));
          if (name == "scope") request.set_scope(value);
          if (name == "labels") (*request.mutable_labels())["k"] = value;
          v1::PlaceHoldResponse response;
          status = stub_->PlaceHold(Context(absl::Seconds(10)).get(), request, &response);
          if (status.ok()) {  // keep the user under its hold limit
            v1::CancelHoldRequest cancel;
            cancel.set_user_id(request.user_id());
            cancel.set_order_id(request.order_id());
            v1::CancelHoldResponse cancelled;
            ASSERT_TRUE(
                stub_->CancelHold(Context(absl::Seconds(10)).get(), cancel, &cancelled).ok());
          }
        }
        SCOPED_TRACE(absl::StrCat(field, " of ", length, " bytes of ", absl::CHexEscape(unit)));
        ASSERT_THAT(status.error_code(),
                    AnyOf(grpc::StatusCode::OK, grpc::StatusCode::INVALID_ARGUMENT))
            << status.error_message();
        if (status.ok()) {
          ++ok;
        } else {
          ++invalid;
          EXPECT_THAT(status.error_message(), HasSubstr(name));
        }
        // Plain ASCII of 1-64 bytes is valid in every field.
        if (unit == "a" && length >= 1 && length <= 64) {
          EXPECT_TRUE(status.ok()) << field;
        }
      }
    }
  }
  std::cout << "  ids of every length and byte class: " << ok << " accepted, " << invalid
            << " refused INVALID_ARGUMENT naming the field\n";
  ExpectServesOthers();
}

}  // namespace
}  // namespace orderhold
