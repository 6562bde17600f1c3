// The README Quickstart story, run with the real binaries: orderhold-server as a process (port 0
// for gRPC and metrics), orderhold-cli for every step, /metrics over HTTP, SIGTERM at the end.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/eventually.h"
#include "tests/testing/redis_server.h"
#include "tests/testing/status_matchers.h"

namespace orderhold {
namespace {

using ::orderhold::testing::Eventually;
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

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream content;
  content << in.rdbuf();
  return content.str();
}

// orderhold-server as a child process, stderr to a log file.
class ServerProcess {
 public:
  ~ServerProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    std::remove(log_.c_str());
  }

  void Start(const std::vector<std::string>& args) {
    log_ =
        absl::StrCat(::testing::TempDir(), "/orderhold-server-", getpid(), "-", counter_++, ".log");
    pid_ = fork();
    if (pid_ == 0) {
      const int fd = open(log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      dup2(fd, STDERR_FILENO);
      dup2(fd, STDOUT_FILENO);
      std::vector<char*> argv;
      std::string binary = ORDERHOLD_SERVER_BINARY;
      argv.push_back(binary.data());
      std::vector<std::string> copy = args;
      for (std::string& arg : copy) argv.push_back(arg.data());
      argv.push_back(nullptr);
      execv(binary.c_str(), argv.data());
      _exit(127);
    }
  }

  // Waits for "serving gRPC on port N, metrics on port M" and reads both ports.
  bool WaitServing() {
    constexpr std::string_view kServing = "serving gRPC on port ";
    std::string line;  // from the ports on, once the whole line is there
    Eventually([&] {
      const std::string log = ReadFile(log_);
      const size_t at = log.find(kServing);
      if (at != std::string::npos && log.find('\n', at) != std::string::npos) {
        line = log.substr(at + kServing.size());
        return true;
      }
      return Exited();
    });
    if (line.empty()) return false;
    std::istringstream in(line);
    std::string skip;
    in >> grpc_port_ >> skip >> skip >> skip >> skip >> metrics_port_;
    return grpc_port_ > 0 && metrics_port_ > 0;
  }

  bool Exited() {
    if (pid_ <= 0) return true;
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      pid_ = -1;
      return true;
    }
    return false;
  }

  // Waits for the process to end; its exit code, or -1 on timeout.
  int Wait(absl::Duration timeout = absl::Seconds(15)) {
    return Eventually([this] { return Exited(); }, timeout) ? exit_code_ : -1;
  }

  void Signal(int signal) { kill(pid_, signal); }
  std::string log() const { return ReadFile(log_); }
  int grpc_port() const { return grpc_port_; }
  int metrics_port() const { return metrics_port_; }

 private:
  static inline int counter_ = 0;
  pid_t pid_ = -1;
  std::string log_;
  int grpc_port_ = 0, metrics_port_ = 0, exit_code_ = -1;
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

TEST_F(BinariesE2eTest, ReadmeStoryWithTheCli) {
  server_.Start(ServerArgs());
  ASSERT_TRUE(server_.WaitServing()) << server_.log();
  EXPECT_THAT(server_.log(), HasSubstr("max_holds=3 default_ttl=30m"));

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

TEST_F(BinariesE2eTest, BadFlagsExitNonZeroNamingTheFlag) {
  struct Case {
    std::string flag;
    int exit_code;  // 2: our validation; 1: absl could not parse the value
  };
  for (const Case& bad :
       {Case{"--max_holds=0", 2}, Case{"--key_prefix=a{b}", 2}, Case{"--reap_interval=soon", 1},
        Case{"--redis_url=redis://default:hunter2", 2}}) {  // "@host" forgotten
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

}  // namespace
}  // namespace orderhold
