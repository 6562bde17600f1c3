#include "tests/testing/os_util.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"

extern char** environ;

namespace orderhold::testing {
namespace {

constexpr size_t kOutputTailBytes = 2000;

std::string Tail(const std::string& s) {
  return s.size() <= kOutputTailBytes ? s : "..." + s.substr(s.size() - kOutputTailBytes);
}

}  // namespace

absl::StatusOr<std::string> FindExecutable(absl::string_view name, absl::string_view apt_package) {
  if (absl::StrContains(name, '/')) {  // a path, not a name to look up
    if (::access(std::string(name).c_str(), X_OK) == 0) return std::string(name);
    return absl::NotFoundError(absl::StrCat(name, ": no such executable"));
  }
  if (const char* path = std::getenv("PATH"); path != nullptr) {
    for (absl::string_view dir : absl::StrSplit(path, ':', absl::SkipEmpty())) {
      std::string candidate = absl::StrCat(dir, "/", name);
      if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    }
  }
  std::string fallback = absl::StrCat("/usr/bin/", name);
  if (::access(fallback.c_str(), X_OK) == 0) return fallback;
  return absl::NotFoundError(absl::StrCat(name, " not found on PATH nor at ", fallback,
                                          " (apt-get install ", apt_package, ")"));
}

double ScrapedValue(int port, const std::string& series) {
  absl::StatusOr<std::string> metrics =
      RunProgram({"curl", "-s", absl::StrCat("http://127.0.0.1:", port, "/metrics")});
  if (!metrics.ok()) return -1;
  const std::string prefix = absl::StrCat(series, " ");
  for (absl::string_view line : absl::StrSplit(*metrics, '\n')) {
    double value = 0;
    if (absl::ConsumePrefix(&line, prefix) && absl::SimpleAtod(line, &value)) return value;
  }
  return -1;
}

absl::StatusOr<std::string> RunProgram(const std::vector<std::string>& argv,
                                       absl::Duration timeout) {
  if (argv.empty()) return absl::InvalidArgumentError("RunProgram(): empty argv");
  absl::StatusOr<std::string> binary = FindExecutable(argv[0], argv[0]);
  if (!binary.ok()) return binary.status();
  const std::string command_line = absl::StrJoin(argv, " ");

  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat("pipe2: ", std::strerror(errno)));
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDERR_FILENO);
  std::vector<std::string> args = argv;
  args[0] = *binary;
  std::vector<char*> cargv;
  for (std::string& arg : args) cargv.push_back(arg.data());
  cargv.push_back(nullptr);
  // As RedisServer does: undo a signal mask or dispositions the test process may have set.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none;
  ::sigemptyset(&none);
  sigset_t defaults;
  ::sigemptyset(&defaults);
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGPIPE}) ::sigaddset(&defaults, sig);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  pid_t pid = -1;
  int spawn_error = ::posix_spawn(&pid, cargv[0], &actions, &attr, cargv.data(), environ);
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&actions);
  ::close(fds[1]);
  if (spawn_error != 0) {
    ::close(fds[0]);
    return absl::InternalError(
        absl::StrCat("posix_spawn ", command_line, ": ", std::strerror(spawn_error)));
  }

  // Read until EOF (every writer gone) or the deadline.
  std::string output;
  const absl::Time deadline = absl::Now() + timeout;
  bool timed_out = false;
  while (true) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      timed_out = true;
      break;
    }
    pollfd pfd{fds[0], POLLIN, 0};
    int ready = ::poll(&pfd, 1, static_cast<int>(absl::ToInt64Milliseconds(left)) + 1);
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) continue;  // re-checks the deadline
    char buf[4096];
    ssize_t n = ::read(fds[0], buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    output.append(buf, static_cast<size_t>(n));
  }
  ::close(fds[0]);
  if (timed_out) ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) {
    return absl::DeadlineExceededError(absl::StrCat(command_line, ": no exit within ",
                                                    absl::FormatDuration(timeout), "; output:\n",
                                                    Tail(output)));
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::string how = WIFEXITED(status) ? absl::StrCat("exit status ", WEXITSTATUS(status))
                                        : absl::StrCat("signal ", WTERMSIG(status));
    return absl::InternalError(absl::StrCat(command_line, ": ", how, "; output:\n", Tail(output)));
  }
  return output;
}

absl::StatusOr<std::string> MakeTempDir(absl::string_view prefix) {
  const char* tmp = std::getenv("TMPDIR");
  std::string tmpl =
      absl::StrCat(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp", "/orderhold-", prefix, "-XXXXXX");
  if (::mkdtemp(tmpl.data()) == nullptr) {
    return absl::InternalError(absl::StrCat("mkdtemp ", tmpl, ": ", std::strerror(errno)));
  }
  return tmpl;
}

absl::StatusOr<std::unique_ptr<PrivateHostsFile>> PrivateHostsFile::Create(
    absl::string_view name, absl::string_view address) {
  absl::StatusOr<std::string> dir = MakeTempDir("hosts");
  if (!dir.ok()) return dir.status();
  std::unique_ptr<PrivateHostsFile> hosts(new PrivateHostsFile(*dir, std::string(name)));
  const std::string path = *dir + "/hosts";
  if (absl::Status written = hosts->Move(address); !written.ok()) return written;
  if (::unshare(CLONE_NEWNS) != 0) {
    return absl::InternalError(
        absl::StrCat("unshare(CLONE_NEWNS): ", std::strerror(errno),
                     " (needs root, and no thread may have started yet in this process)"));
  }
  // Private propagation first, or the bind mount below would reach the host's namespace.
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
    return absl::InternalError(absl::StrCat("mount --make-rprivate /: ", std::strerror(errno)));
  }
  if (::mount(path.c_str(), "/etc/hosts", nullptr, MS_BIND, nullptr) != 0) {
    return absl::InternalError(
        absl::StrCat("mount --bind ", path, " /etc/hosts: ", std::strerror(errno)));
  }
  return hosts;
}

PrivateHostsFile::PrivateHostsFile(std::string dir, std::string name)
    : dir_(std::move(dir)), name_(std::move(name)) {}

PrivateHostsFile::~PrivateHostsFile() {
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

absl::Status PrivateHostsFile::Move(absl::string_view address) {
  const std::string path = dir_ + "/hosts";
  // In place (O_TRUNC on the same inode): the bind mount names the inode, not the path.
  std::ofstream out(path, std::ios::out | std::ios::trunc);
  out << "127.0.0.1 localhost\n" << address << " " << name_ << "\n";
  out.close();
  if (!out) return absl::InternalError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

}  // namespace orderhold::testing
