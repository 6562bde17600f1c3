// ServerProcess: a real orderhold-server (or any program that logs "serving gRPC on port N,
// metrics on port M") as a child process of the test, its stdout and stderr in a log file, with
// what a test measures from outside: its resident memory and open file descriptors (/proc).
//
//   testing::ServerProcess server(ORDERHOLD_SERVER_BINARY);
//   server.Start({"--grpc_address=127.0.0.1:0", "--metrics_address=127.0.0.1:0",
//                 absl::StrCat("--redis_url=", redis->url())});
//   ASSERT_TRUE(server.WaitServing()) << server.log();
//   ... grpc::CreateChannel(absl::StrCat("127.0.0.1:", server.grpc_port()), ...)
//
// The destructor SIGKILLs the process (if still running), reaps it and removes the log. Not
// thread-safe.
#ifndef ORDERHOLD_TESTS_TESTING_SERVER_PROCESS_H_
#define ORDERHOLD_TESTS_TESTING_SERVER_PROCESS_H_

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"

namespace orderhold::testing {

class ServerProcess {
 public:
  explicit ServerProcess(std::string binary) : binary_(std::move(binary)) {}
  ~ServerProcess();
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  // Forks and execs the binary with `args` and, added to this process' environment, `env`
  // (name, value: the ORDERHOLD_* variables a deployment kit sets); stdout and stderr go to a
  // fresh log file.
  void Start(const std::vector<std::string>& args,
             const std::vector<std::pair<std::string, std::string>>& env = {});
  // Waits (up to 10 s) for "serving gRPC on port N, metrics on port M" in the log and reads both
  // ports (and H of ", health on port H" when the line has it); false when the process exits
  // first or the line never comes.
  bool WaitServing();
  // True once the process has exited (reaped here; exit_code() says how).
  bool Exited();
  // Waits for the process to end: its exit code (128 + signal when killed), or -1 on timeout.
  int Wait(absl::Duration timeout = absl::Seconds(15));
  void Signal(int signal);

  // The process' resident set (VmRSS of /proc/<pid>/status), bytes; nullopt once it has exited.
  std::optional<int64_t> RssBytes() const;
  // The process' open file descriptors (entries of /proc/<pid>/fd); nullopt once it has exited.
  std::optional<int> OpenFds() const;

  std::string log() const;
  pid_t pid() const { return pid_; }
  int grpc_port() const { return grpc_port_; }
  int metrics_port() const { return metrics_port_; }
  int health_port() const { return health_port_; }  // 0 without --health_address
  int exit_code() const { return exit_code_; }

 private:
  static inline int counter_ = 0;
  const std::string binary_;
  pid_t pid_ = -1;
  std::string log_;
  int grpc_port_ = 0, metrics_port_ = 0, health_port_ = 0, exit_code_ = -1;
};

}  // namespace orderhold::testing

#endif  // ORDERHOLD_TESTS_TESTING_SERVER_PROCESS_H_
