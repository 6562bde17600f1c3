#include "tests/testing/server_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string_view>
#include <system_error>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/testing/eventually.h"

namespace orderhold::testing {
namespace {

std::string ReadWholeFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream content;
  content << in.rdbuf();
  return content.str();
}

}  // namespace

ServerProcess::~ServerProcess() {
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  if (!log_.empty()) std::remove(log_.c_str());
}

void ServerProcess::Start(const std::vector<std::string>& args,
                          const std::vector<std::pair<std::string, std::string>>& env) {
  log_ =
      absl::StrCat(::testing::TempDir(), "/orderhold-server-", getpid(), "-", counter_++, ".log");
  pid_ = fork();
  if (pid_ == 0) {
    const int fd = open(log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, STDERR_FILENO);
    dup2(fd, STDOUT_FILENO);
    std::vector<char*> argv;
    std::string binary = binary_;
    argv.push_back(binary.data());
    std::vector<std::string> copy = args;
    for (std::string& arg : copy) argv.push_back(arg.data());
    argv.push_back(nullptr);
    for (const auto& [name, value] : env) setenv(name.c_str(), value.c_str(), /*overwrite=*/1);
    execv(binary.c_str(), argv.data());
    _exit(127);
  }
}

bool ServerProcess::WaitServing() {
  constexpr std::string_view kServing = "serving gRPC on port ";
  std::string line;  // from the ports on, once the whole line is there
  Eventually([&] {
    const std::string log = ReadWholeFile(log_);
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
  constexpr std::string_view kHealth = ", health on port ";
  const std::string first_line = line.substr(0, line.find('\n'));
  if (const size_t at = first_line.find(kHealth); at != std::string::npos) {
    std::istringstream(first_line.substr(at + kHealth.size())) >> health_port_;
  }
  return grpc_port_ > 0 && metrics_port_ > 0;
}

bool ServerProcess::Exited() {
  if (pid_ <= 0) return true;
  int status = 0;
  if (waitpid(pid_, &status, WNOHANG) == pid_) {
    exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    pid_ = -1;
    return true;
  }
  return false;
}

int ServerProcess::Wait(absl::Duration timeout) {
  return Eventually([this] { return Exited(); }, timeout) ? exit_code_ : -1;
}

void ServerProcess::Signal(int signal) {
  if (pid_ > 0) kill(pid_, signal);
}

std::optional<int64_t> ServerProcess::RssBytes() const {
  if (pid_ <= 0) return std::nullopt;
  std::istringstream in(ReadWholeFile(absl::StrCat("/proc/", pid_, "/status")));
  for (std::string line; std::getline(in, line);) {
    int64_t kib = 0;
    if (line.rfind("VmRSS:", 0) == 0 &&
        absl::SimpleAtoi(absl::StripAsciiWhitespace(line.substr(6, line.size() - 6 - 3)), &kib)) {
      return kib * 1024;
    }
  }
  return std::nullopt;
}

std::optional<int> ServerProcess::OpenFds() const {
  if (pid_ <= 0) return std::nullopt;
  std::error_code error;
  int count = 0;
  for (std::filesystem::directory_iterator it(absl::StrCat("/proc/", pid_, "/fd"), error), end;
       !error && it != end; it.increment(error)) {
    ++count;
  }
  if (error) return std::nullopt;
  return count;
}

std::string ServerProcess::log() const { return ReadWholeFile(log_); }

}  // namespace orderhold::testing
