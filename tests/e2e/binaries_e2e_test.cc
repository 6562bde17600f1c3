// The README Quickstart story, run with the real binaries: orderhold-server as a process (port 0
// for gRPC and metrics), orderhold-cli for every step, /metrics over HTTP, SIGTERM at the end.
// Also what an operator sees of the server's Redis TLS settings (rediss://): its log, its health
// and its answers; and orderhold-cli and orderhold-bench on a gRPC port with mutual TLS.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "server/common/status_macros.h"
#include "tests/testing/eventually.h"
#include "tests/testing/grpc_health.h"
#include "tests/testing/os_util.h"
#include "tests/testing/redis_server.h"
#include "tests/testing/server_process.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/tls_certs.h"

namespace orderhold {
namespace {

using ::grpc::health::v1::HealthCheckResponse;
using ::orderhold::testing::Eventually;
using ::orderhold::testing::Health;
using ::testing::AnyOf;
using ::testing::HasSubstr;
using ::testing::Not;

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};

CommandResult RunShell(const std::string& command) {
  CommandResult result;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return result;
  std::array<char, 4096> buffer;
  size_t n;
  while ((n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0)
    result.output.append(buffer.data(), n);
  const int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

// Lines of `text` that contain `needle`.
int CountLines(const std::string& text, std::string_view needle) {
  int count = 0;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) count += line.find(needle) != std::string::npos;
  return count;
}

// A testing::TlsCerts set in a temporary directory of its own, removed with the object.
struct ScopedCerts {
  static absl::StatusOr<std::unique_ptr<ScopedCerts>> Create() {
    ORDERHOLD_ASSIGN_OR_RETURN(std::string dir, testing::MakeTempDir("e2e-certs"));
    absl::StatusOr<testing::TlsCerts> certs = testing::TlsCerts::Create(dir);
    if (!certs.ok()) {
      std::error_code ignored;
      std::filesystem::remove_all(dir, ignored);
      return certs.status();
    }
    return std::unique_ptr<ScopedCerts>(new ScopedCerts{*std::move(certs)});
  }
  ~ScopedCerts() {
    std::error_code ignored;
    std::filesystem::remove_all(certs.dir(), ignored);
  }
  const testing::TlsCerts certs;
};

// orderhold-server as a child process (tests/testing/server_process.h).
class ServerProcess : public testing::ServerProcess {
 public:
  ServerProcess() : testing::ServerProcess(ORDERHOLD_SERVER_BINARY) {}
};

class BinariesE2eTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_OK_AND_ASSIGN(redis_, testing::RedisServer::Start()); }

  std::vector<std::string> ServerArgs() {
    return {"--grpc_address=127.0.0.1:0", "--metrics_address=127.0.0.1:0",
            absl::StrCat("--redis_url=", redis_->url())};
  }

  CommandResult Cli(const std::string& args) {
    return RunShell(
        absl::StrCat(ORDERHOLD_CLI_BINARY, " --target=127.0.0.1:", server_.grpc_port(), " ", args));
  }

  std::unique_ptr<testing::RedisServer> redis_;
  ServerProcess server_;
};

// README's "Run an on-sale", with the real binaries: a PAUSED rule that opens by itself 2 s on, a
// placement refused before and granted after, a payment with its reference, the sold count, the
// close.
TEST_F(BinariesE2eTest, ReadmeOnSaleStoryWithTheCli) {
  server_.Start(ServerArgs());
  ASSERT_TRUE(server_.WaitServing()) << server_.log();
  const std::string open =
      absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::Now() + absl::Seconds(2), absl::UTCTimeZone());
  CommandResult put =
      Cli(absl::StrCat("rule-put event:E42 --max_purchased_units 4 --capacity_units 100 "
                       "--state PAUSED --open_time ",
                       open));
  EXPECT_EQ(put.exit_code, 0) << put.output;
  EXPECT_THAT(put.output, HasSubstr("event:E42 PAUSED (now PAUSED) etag 1: capacity 100; per user "
                                    "held + bought 0 holds / 4 units; opens "));
  CommandResult early = Cli("place alice o-1 --scope event:E42 --quantity 2");
  EXPECT_EQ(early.exit_code, 9) << early.output;  // FAILED_PRECONDITION
  EXPECT_THAT(early.output, HasSubstr("FAILED_PRECONDITION: scope \"event:E42\" is not open; it "
                                      "opens at "));
  absl::SleepFor(absl::Seconds(3));
  CommandResult placed = Cli("place alice o-1 --scope event:E42 --quantity 2");
  EXPECT_EQ(placed.exit_code, 0) << placed.output;
  CommandResult paid = Cli("pay alice o-1 --payment_reference pi_3Nx");
  EXPECT_THAT(paid.output, HasSubstr("paid o-1 for alice with pi_3Nx"));
  CommandResult capped = Cli("place alice o-2 --scope event:E42 --quantity 3");
  EXPECT_EQ(capped.exit_code, 8) << capped.output;  // RESOURCE_EXHAUSTED
  EXPECT_THAT(capped.output,
              HasSubstr("user_id holds 0 units in scope \"event:E42\" and bought 2; 3 more would "
                        "exceed max_purchased_units 4; expiries cannot free enough units"));
  CommandResult refund = Cli("return alice o-1 1 --request_id refund-7");
  EXPECT_EQ(refund.exit_code, 0) << refund.output;
  EXPECT_THAT(refund.output, HasSubstr("returned 1 unit of o-1 for alice (1 of 2 returned in all)\n"
                                       "scope event:E42 held + bought: holds 1 (no limit), units "
                                       "1/4"));
  EXPECT_THAT(Cli("scope-usage event:E42").output,
              HasSubstr("event:E42: 0 holds, 0 units across all users; 1 sold, 99 of capacity 100 "
                        "available"));
  // The retry of the refund changes nothing.
  EXPECT_THAT(Cli("return alice o-1 1 --request_id refund-7").output,
              HasSubstr("already returned"));
  CommandResult closed = Cli("scope-close event:E42 --release_holds");
  EXPECT_EQ(closed.exit_code, 0) << closed.output;
  EXPECT_THAT(closed.output, HasSubstr("closed event:E42 (etag 2); released 0 holds"));
  EXPECT_EQ(Cli("place carol o-4 --scope event:E42").exit_code, 9);
  CommandResult stale = Cli("rule-put event:E42 --capacity_units 200 --etag 1");
  EXPECT_EQ(stale.exit_code, 10) << stale.output;  // ABORTED
}

TEST_F(BinariesE2eTest, ReadmeStoryWithTheCli) {
  server_.Start(ServerArgs());
  ASSERT_TRUE(server_.WaitServing()) << server_.log();
  EXPECT_THAT(
      server_.log(),
      HasSubstr(
          "max_holds=3 max_units=0 scope_limits= request_scope_limits=ceiling default_ttl=30m"));

  for (const char* order : {"train-1", "train-2", "train-3"}) {
    CommandResult placed = Cli(absl::StrCat("place alice ", order));
    EXPECT_EQ(placed.exit_code, 0) << placed.output;
    EXPECT_THAT(placed.output, HasSubstr("expires in 30m"));  // remaining at the call: the ttl
  }
  CommandResult refused = Cli("place alice train-4");
  EXPECT_EQ(refused.exit_code, 8) << refused.output;  // RESOURCE_EXHAUSTED
  EXPECT_THAT(refused.output, HasSubstr("RESOURCE_EXHAUSTED"));
  EXPECT_EQ(Cli("pay alice train-2").exit_code, 0);
  EXPECT_EQ(Cli("place alice train-4").exit_code, 0);
  CommandResult list = Cli("list alice");
  EXPECT_EQ(list.exit_code, 0);
  EXPECT_THAT(list.output, HasSubstr("train-4"));
  EXPECT_THAT(list.output, Not(HasSubstr("train-2")));

  // A 1 s hold expires on its own (Redis clock) and the reaper ends it at its next tick (default
  // --reap_interval, 1 s): polled, not slept.
  CommandResult quick = Cli("place bob concert-1 --ttl 1s");
  EXPECT_EQ(quick.exit_code, 0) << quick.output;
  EXPECT_THAT(quick.output, HasSubstr("expires in 1s"));
  std::string metrics;
  Eventually(
      [&] {
        metrics =
            RunShell(absl::StrCat("curl -s http://127.0.0.1:", server_.metrics_port(), "/metrics"))
                .output;
        return metrics.find("orderhold_holds_expired_total 1") != std::string::npos;
      },
      absl::Seconds(10), /*poll=*/absl::Milliseconds(100));  // each check starts a curl
  EXPECT_THAT(metrics, HasSubstr("orderhold_holds_expired_total 1"));
  EXPECT_THAT(metrics, HasSubstr("orderhold_reaper_lag_seconds_count 1"));
  EXPECT_THAT(Cli("list bob").output, HasSubstr("bob: 0/3 holds"));
  CommandResult json = Cli("--json list alice");
  EXPECT_THAT(json.output, HasSubstr("\"orderId\":\"train-1\""));
  EXPECT_EQ(Cli("pay bob concert-1").exit_code, 9);      // FAILED_PRECONDITION: it expired
  EXPECT_EQ(Cli("pay bob no-such-order").exit_code, 5);  // NOT_FOUND

  server_.Signal(SIGTERM);
  EXPECT_EQ(server_.Wait(), 0) << server_.log();
  EXPECT_THAT(server_.log(), HasSubstr("I stopped"));
}

// `orderhold-cli health`: a probe for any runtime. Readiness ("") follows Redis, "liveness" does
// not; the exit status says SERVING (0) or not (14).
TEST_F(BinariesE2eTest, CliHealthIsAProbe) {
  server_.Start(ServerArgs());
  ASSERT_TRUE(server_.WaitServing()) << server_.log();
  ASSERT_TRUE(Eventually([&] { return Cli("health").exit_code == 0; }));
  CommandResult ready = Cli("health");
  EXPECT_THAT(ready.output, HasSubstr("SERVING"));
  EXPECT_EQ(Cli("health liveness").exit_code, 0);
  EXPECT_EQ(Cli("health orderhold.v1.OrderHold").exit_code, 0);
  CommandResult unknown = Cli("health no.such.Service");
  EXPECT_EQ(unknown.exit_code, 5) << unknown.output;  // NOT_FOUND

  ASSERT_TRUE(redis_->Stop().ok());
  ASSERT_TRUE(Eventually([&] { return Cli("health").exit_code == 14; }));
  CommandResult down = Cli("health");
  EXPECT_THAT(down.output, HasSubstr("NOT_SERVING"));
  EXPECT_EQ(Cli("health liveness").exit_code, 0);  // alive: restarting would not help
}

TEST_F(BinariesE2eTest, BadFlagsExitNonZeroNamingTheFlag) {
  struct Case {
    std::string flag;
    int exit_code;  // 2: our validation; 1: absl could not parse the value
  };
  for (const Case& bad :
       {Case{"--max_holds=0", 2}, Case{"--key_prefix=a{b}", 2}, Case{"--reap_interval=soon", 1},
        Case{"--redis_url=redis://default:hunter2", 2},     // "@host" forgotten
        Case{"--tls_cert_file=/etc/orderhold/tls.crt", 2},  // without --tls_key_file
        Case{"--hold_layout=v1", 2}}) {                     // removed: refused, any value
    ServerProcess server;
    std::vector<std::string> args = ServerArgs();
    args.push_back(bad.flag);
    server.Start(args);
    EXPECT_EQ(server.Wait(), bad.exit_code) << bad.flag << "\n" << server.log();
    const std::string name = bad.flag.substr(2, bad.flag.find('=') - 2);
    EXPECT_THAT(server.log(), HasSubstr(name)) << bad.flag;
    EXPECT_THAT(server.log(), Not(HasSubstr("hunter2"))) << bad.flag;
  }
}

// A bad --scope_limits file stops the start with exit 2 naming the line and field; on
// SIGHUP a bad file keeps the old rules (logged and counted) and a good one applies at once.
TEST_F(BinariesE2eTest, ScopeLimitsFileIsCheckedAtStartAndReloadedOnSighup) {
  const std::string path = absl::StrCat(::testing::TempDir(), "/limits-", getpid(), ".yaml");
  auto write = [&](const std::string& text) { std::ofstream(path) << text; };
  write("rules:\n  - prefix: \"event:\"\n    max_holds: two\n");
  {
    ServerProcess bad;
    std::vector<std::string> args = ServerArgs();
    args.push_back(absl::StrCat("--scope_limits=", path));
    bad.Start(args);
    EXPECT_EQ(bad.Wait(), 2) << bad.log();
    EXPECT_THAT(bad.log(), HasSubstr(":3: rules[0].max_holds"));
  }
  write("rules:\n  - prefix: \"event:\"\n    max_holds: 1\n");
  std::vector<std::string> args = ServerArgs();
  args.push_back(absl::StrCat("--scope_limits=", path));
  server_.Start(args);
  ASSERT_TRUE(server_.WaitServing()) << server_.log();
  EXPECT_EQ(Cli("place alice o1 --scope=event:E1").exit_code, 0);
  EXPECT_EQ(Cli("place alice o2 --scope=event:E1").exit_code, 8);  // RESOURCE_EXHAUSTED
  write("rules:\n  - prefix: \"event:\"\n    max_hold: 2\n");      // a typo
  server_.Signal(SIGHUP);
  ASSERT_TRUE(Eventually([&] { return absl::StrContains(server_.log(), "reload failed"); }))
      << server_.log();
  EXPECT_THAT(server_.log(), HasSubstr(":3: rules[0].max_hold"));
  EXPECT_EQ(Cli("place alice o2 --scope=event:E1").exit_code, 8);  // the old rules
  EXPECT_THAT(
      RunShell(absl::StrCat("curl -s http://127.0.0.1:", server_.metrics_port(), "/metrics"))
          .output,
      HasSubstr("orderhold_limits_reload_errors_total 1"));
  write("rules:\n  - prefix: \"event:\"\n    max_holds: 2\n");
  server_.Signal(SIGHUP);
  ASSERT_TRUE(Eventually([&] { return absl::StrContains(server_.log(), "reloaded"); }))
      << server_.log();
  EXPECT_EQ(Cli("place alice o2 --scope=event:E1").exit_code, 0);
  server_.Signal(SIGTERM);
  EXPECT_EQ(server_.Wait(), 0) << server_.log();
  std::remove(path.c_str());
}

// --log_format=json (here from the environment, as a container sets it) writes one
// JSON object per line, from the first line to the last.
TEST_F(BinariesE2eTest, JsonLogFormatWritesOnlyJsonLines) {
  setenv("ORDERHOLD_LOG_FORMAT", "json", 1);
  server_.Start(ServerArgs());
  unsetenv("ORDERHOLD_LOG_FORMAT");
  ASSERT_TRUE(server_.WaitServing()) << server_.log();
  EXPECT_EQ(Cli("place alice train-1").exit_code, 0);
  server_.Signal(SIGTERM);
  ASSERT_EQ(server_.Wait(), 0) << server_.log();

  const std::vector<std::string> lines = absl::StrSplit(server_.log(), '\n', absl::SkipEmpty());
  ASSERT_GE(lines.size(), 4u) << server_.log();  // config, health, serving, signal, stopped
  bool config_seen = false;
  for (const std::string& line : lines) {
    google::protobuf::Struct entry;
    ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(line, &entry).ok()) << line;
    const auto& fields = entry.fields();
    ASSERT_TRUE(fields.contains("time") && fields.contains("level") && fields.contains("message"))
        << line;
    EXPECT_THAT(fields.at("level").string_value(), AnyOf("info", "warning", "error")) << line;
    if (fields.contains("component") && fields.at("component").string_value() == "config") {
      config_seen = true;
      EXPECT_THAT(fields.at("message").string_value(), HasSubstr("log_format=json"));
    }
  }
  EXPECT_TRUE(config_seen) << server_.log();
  EXPECT_THAT(lines.back(), HasSubstr("\"message\":\"stopped\""));
}

TEST_F(BinariesE2eTest, TakenPortExitsNonZero) {
  server_.Start(ServerArgs());
  ASSERT_TRUE(server_.WaitServing()) << server_.log();
  ServerProcess second;
  second.Start({absl::StrCat("--grpc_address=127.0.0.1:", server_.grpc_port()),
                "--metrics_address=127.0.0.1:0", absl::StrCat("--redis_url=", redis_->url())});
  EXPECT_NE(second.Wait(), 0);
  EXPECT_THAT(second.log(), HasSubstr("cannot listen"));
}

TEST_F(BinariesE2eTest, EnvironmentFallbackAndMaskedPassword) {
  setenv("ORDERHOLD_MAX_HOLDS", "5", 1);
  server_.Start({"--grpc_address=127.0.0.1:0", "--metrics_address=127.0.0.1:0",
                 absl::StrCat("--redis_url=redis://:hunter2@127.0.0.1:", redis_->port())});
  unsetenv("ORDERHOLD_MAX_HOLDS");
  // (The test Redis has no password: AUTH fails, so health stays NOT_SERVING; the point here is
  // the logged configuration.)
  ASSERT_TRUE(server_.WaitServing()) << server_.log();
  EXPECT_THAT(server_.log(), HasSubstr("max_holds=5"));
  EXPECT_THAT(server_.log(), Not(HasSubstr("hunter2")));
  EXPECT_THAT(server_.log(), HasSubstr(":****@"));
  server_.Signal(SIGINT);
  EXPECT_EQ(server_.Wait(), 0);

  // --helpfull prints each flag's current value: the environment's password stays out of it.
  setenv("ORDERHOLD_REDIS_URL", "redis://:hunter2@127.0.0.1:1", 1);
  ServerProcess help;
  help.Start({"--helpfull"});
  unsetenv("ORDERHOLD_REDIS_URL");
  help.Wait();
  EXPECT_THAT(help.log(), HasSubstr("--redis_url"));
  EXPECT_THAT(help.log(), Not(HasSubstr("hunter2")));
}

// The CLI over TLS. The server requires client certificates (--tls_client_ca_file);
// the CLI and the bench connect with the --tls_* flags an operator would give them.
TEST_F(BinariesE2eTest, CliAndBenchOverMutualTls) {
  ASSERT_OK_AND_ASSIGN(const std::unique_ptr<ScopedCerts> scoped, ScopedCerts::Create());
  const testing::TlsCerts& certs = scoped->certs;
  std::vector<std::string> args = ServerArgs();
  args.insert(args.end(),
              {"--tls_cert_file=" + certs.server_cert(), "--tls_key_file=" + certs.server_key(),
               "--tls_client_ca_file=" + certs.ca_cert(), "--tls_refresh_interval=1s"});
  server_.Start(args);
  ASSERT_TRUE(server_.WaitServing()) << server_.log();
  EXPECT_THAT(server_.log(), HasSubstr("tls_client_ca_file=" + certs.ca_cert()));

  const std::string identity =
      absl::StrCat(" --tls_ca_file=", certs.ca_cert(), " --tls_cert_file=", certs.client_cert(),
                   " --tls_key_file=", certs.client_key());
  CommandResult plain = Cli("place alice order-1");
  EXPECT_EQ(plain.exit_code, 14) << plain.output;  // UNAVAILABLE: no TLS
  CommandResult anonymous = Cli(absl::StrCat("--tls_ca_file=", certs.ca_cert(), " list alice"));
  EXPECT_EQ(anonymous.exit_code, 14) << anonymous.output;  // no client certificate
  CommandResult placed = Cli(absl::StrCat("place alice order-1", identity));
  EXPECT_EQ(placed.exit_code, 0) << placed.output;
  EXPECT_THAT(placed.output, HasSubstr("placed order-1 for alice"));
  CommandResult named = Cli(absl::StrCat("list alice --tls_server_name=localhost", identity));
  EXPECT_EQ(named.exit_code, 0) << named.output;
  EXPECT_THAT(named.output, HasSubstr("order-1"));
  CommandResult half = Cli(absl::StrCat("list alice --tls_cert_file=", certs.client_cert()));
  EXPECT_EQ(half.exit_code, 64) << half.output;  // usage error naming the missing flag
  EXPECT_THAT(half.output, HasSubstr("--tls_key_file"));

  const std::string bench =
      absl::StrCat(ORDERHOLD_BENCH_BINARY, " --target=127.0.0.1:", server_.grpc_port(),
                   " --connections=2 --concurrency=2 --warmup=0s --count=20 --mix=list=1 "
                   "--users=10 --json --progress=false");
  CommandResult measured = RunShell(bench + identity);
  EXPECT_EQ(measured.exit_code, 0) << measured.output;
  EXPECT_THAT(measured.output, HasSubstr("\"completed\":20,"));
  EXPECT_THAT(measured.output, HasSubstr("\"errors\":0,"));
}

// Redis over TLS: the server's certificate is always verified; a failed verification is a clear
// log line naming the reason, health NOT_SERVING, and calls UNAVAILABLE. Mutual TLS, by name
// (rediss://localhost: the certificate's DNS SAN), the CA given by flag; first the wrong one.
TEST(BinariesTlsE2eTest, WrongCaIsAClearLogLineNotServingAndUnavailableRightCaServes) {
  ASSERT_OK_AND_ASSIGN(const std::unique_ptr<ScopedCerts> scoped, ScopedCerts::Create());
  const testing::TlsCerts& certs = scoped->certs;
  testing::RedisServerOptions options;
  options.tls = testing::RedisTlsOptions{.cert_file = certs.server_cert(),
                                         .key_file = certs.server_key(),
                                         .ca_cert_file = certs.ca_cert(),
                                         .auth_clients = "yes"};
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<testing::RedisServer> redis,
                       testing::RedisServer::Start(options));
  const auto args = [&](const std::string& ca_file) -> std::vector<std::string> {
    return {"--grpc_address=127.0.0.1:0",
            "--metrics_address=127.0.0.1:0",
            absl::StrCat("--redis_url=rediss://localhost:", redis->tls_port()),
            "--redis_tls_ca_file=" + ca_file,
            "--redis_tls_cert_file=" + certs.client_cert(),
            "--redis_tls_key_file=" + certs.client_key(),
            "--health_check_interval=100ms"};
  };
  const auto cli = [](int port, const std::string& command) {
    return RunShell(absl::StrCat(ORDERHOLD_CLI_BINARY, " --target=127.0.0.1:", port, " ", command));
  };

  constexpr std::string_view kReason = "certificate verify failed";
  {  // Each server is SIGKILLed at the end of its block: a graceful stop takes 2 s and is
     // tested above.
    ServerProcess wrong;
    wrong.Start(args(certs.other_ca_cert()));
    ASSERT_TRUE(wrong.WaitServing()) << wrong.log();  // gRPC is up; Redis is not usable
    ASSERT_TRUE(Eventually([&] { return wrong.log().find(kReason) != std::string::npos; }))
        << wrong.log();
    EXPECT_EQ(Health(wrong.grpc_port()), HealthCheckResponse::NOT_SERVING);
    for (int i = 0; i < 5; ++i) {
      CommandResult placed = cli(wrong.grpc_port(), absl::StrCat("place alice order-", i));
      EXPECT_EQ(placed.exit_code, 14) << placed.output;  // UNAVAILABLE
      EXPECT_THAT(placed.output, HasSubstr("UNAVAILABLE"));
    }
    EXPECT_EQ(Health(wrong.grpc_port()), HealthCheckResponse::NOT_SERVING);
    const std::string log = wrong.log();
    // The line names the address, the reason and what was checked against. It is logged when
    // the failure first appears, not per call: once by the store (its two Redis clients share one
    // failure log), once in health's NOT_SERVING transition, and once by the reaper when its
    // first tick (jittered within the 1 s interval) has failed by now: on a slow build (ASan,
    // where these five CLI runs take ~2 s) it has.
    EXPECT_THAT(log, HasSubstr(absl::StrCat("TLS handshake with localhost:", redis->tls_port(),
                                            " failed: certificate verify failed: ")));
    EXPECT_THAT(log, HasSubstr(absl::StrCat("redis_tls_ca_file ", certs.other_ca_cert())));
    EXPECT_LE(CountLines(log, kReason), 3) << log;
    EXPECT_EQ(redis->Command({"DBSIZE"}).value_or("?"), "0");  // nothing granted
  }
  ServerProcess right;
  right.Start(args(certs.ca_cert()));
  ASSERT_TRUE(right.WaitServing()) << right.log();
  EXPECT_TRUE(Eventually([&] { return Health(right.grpc_port()) == HealthCheckResponse::SERVING; }))
      << right.log();
  CommandResult placed = cli(right.grpc_port(), "place alice order-1");
  EXPECT_EQ(placed.exit_code, 0) << placed.output;
  EXPECT_THAT(right.log(), Not(HasSubstr(kReason)));
}

}  // namespace
}  // namespace orderhold
