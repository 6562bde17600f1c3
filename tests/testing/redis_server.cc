#include "tests/testing/redis_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <system_error>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "server/common/status_macros.h"
#include "tests/testing/os_util.h"

namespace orderhold::testing {
namespace {

constexpr int kMaxStartAttempts = 5;
constexpr absl::Duration kPollInterval = absl::Milliseconds(10);
// Graceful shutdown of a test-sized Redis takes milliseconds; this only bounds a wedged one.
constexpr absl::Duration kStopTimeout = absl::Seconds(10);
constexpr absl::Duration kPortCloseTimeout = absl::Seconds(5);
constexpr size_t kLogTailBytes = 2000;

absl::Status ErrnoError(absl::string_view what, int err) {
  return absl::InternalError(absl::StrCat(what, ": ", std::strerror(err)));
}

std::string DescribeWaitStatus(int status) {
  if (WIFEXITED(status)) return absl::StrCat("exit status ", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return absl::StrCat("killed by signal ", WTERMSIG(status));
  return absl::StrCat("wait status ", status);
}

// `host` (an IPv4 literal) as a socket address with `port`; INVALID_ARGUMENT if it is no IPv4
// literal.
absl::StatusOr<sockaddr_in> Ipv4(const std::string& host, int port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (::inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("RedisServerOptions::host: not an IPv4 address: ", host));
  }
  return addr;
}

// Binds host:0 and returns the port the kernel chose. The port is free again when this
// returns, so another process may take it before redis-server binds: Start() retries for that.
absl::StatusOr<int> PickFreePort(const std::string& host) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return ErrnoError("socket", errno);
  absl::StatusOr<sockaddr_in> bound = Ipv4(host, 0);
  if (!bound.ok()) {
    ::close(fd);
    return bound.status();
  }
  sockaddr_in addr = *bound;
  socklen_t len = sizeof(addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    int err = errno;
    ::close(fd);
    return ErrnoError(absl::StrCat("bind ", host, ":0"), err);
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

// True once a TCP connect to host:port is refused (nothing listens any more).
bool ConnectRefused(const std::string& host, int port) {
  absl::StatusOr<sockaddr_in> target = Ipv4(host, port);
  if (!target.ok()) return false;
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_in addr = *target;
  bool refused =
      ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 && errno == ECONNREFUSED;
  ::close(fd);
  return refused;
}

// hiredis reports a timed-out read or write as an I/O error with errno EAGAIN ("Resource
// temporarily unavailable"); everything else on a dead connection is UNAVAILABLE.
absl::Status ContextError(const redisContext* c, int saved_errno, absl::string_view what) {
  std::string message = absl::StrCat(what, ": ", c->errstr);
  if (c->err == REDIS_ERR_IO && (saved_errno == EAGAIN || saved_errno == EWOULDBLOCK ||
                                 absl::StrContains(c->errstr, "temporarily unavailable"))) {
    return absl::DeadlineExceededError(message);
  }
  return absl::UnavailableError(message);
}

void RenderReply(const redisReply& reply, std::string& out) {
  switch (reply.type) {
    case REDIS_REPLY_INTEGER:
      absl::StrAppend(&out, reply.integer);
      return;
    case REDIS_REPLY_STRING:
    case REDIS_REPLY_STATUS:
      out.append(reply.str, reply.len);
      return;
    case REDIS_REPLY_NIL:
      out.append("(nil)");
      return;
    case REDIS_REPLY_ERROR:
      absl::StrAppend(&out, "(error) ", absl::string_view(reply.str, reply.len));
      return;
    case REDIS_REPLY_ARRAY:
      for (size_t i = 0; i < reply.elements; ++i) {
        if (i > 0) out.push_back('\n');
        RenderReply(*reply.element[i], out);
      }
      return;
    default:
      absl::StrAppend(&out, "(reply type ", reply.type, ")");
  }
}

struct FreeContext {
  void operator()(redisContext* c) const { redisFree(c); }
};
using ContextPtr = std::unique_ptr<redisContext, FreeContext>;
using ReplyPtr = std::unique_ptr<redisReply, void (*)(void*)>;

// Sends one command; INTERNAL with Redis' message for an error reply.
absl::StatusOr<std::string> RunCommand(redisContext* c, const std::vector<std::string>& args,
                                       absl::string_view what) {
  std::vector<const char*> argv;
  std::vector<size_t> argvlen;
  for (const std::string& arg : args) {
    argv.push_back(arg.data());
    argvlen.push_back(arg.size());
  }
  errno = 0;
  auto* raw = static_cast<redisReply*>(
      redisCommandArgv(c, static_cast<int>(argv.size()), argv.data(), argvlen.data()));
  if (raw == nullptr) return ContextError(c, errno, what);
  ReplyPtr reply(raw, freeReplyObject);
  if (reply->type == REDIS_REPLY_ERROR) {
    return absl::InternalError(std::string(reply->str, reply->len));
  }
  std::string out;
  RenderReply(*reply, out);
  return out;
}

// Connects to host:port with `timeout` for the connect and every later command, then sends
// AUTH [user] password unless `password` is empty.
absl::StatusOr<ContextPtr> Connect(const std::string& host, int port, absl::string_view user,
                                   absl::string_view password, absl::Duration timeout,
                                   absl::string_view what) {
  ContextPtr c(redisConnectWithTimeout(host.c_str(), port, absl::ToTimeval(timeout)));
  if (c == nullptr) return absl::ResourceExhaustedError("hiredis: cannot allocate context");
  if (c->err != 0) return ContextError(c.get(), errno, absl::StrCat(what, ": connect"));
  if (redisSetTimeout(c.get(), absl::ToTimeval(timeout)) != REDIS_OK) {
    return absl::InternalError(absl::StrCat(what, ": redisSetTimeout failed"));
  }
  if (!password.empty()) {
    std::vector<std::string> auth = {"AUTH"};
    if (!user.empty()) auth.emplace_back(user);
    auth.emplace_back(password);
    ORDERHOLD_RETURN_IF_ERROR(RunCommand(c.get(), auth, absl::StrCat(what, ": AUTH")).status());
  }
  return c;
}

bool Ping(const std::string& host, int port, absl::string_view password) {
  absl::StatusOr<ContextPtr> c = Connect(host, port, "", password, absl::Milliseconds(500), "PING");
  // While loading the AOF Redis answers "-LOADING ...": not ready yet.
  return c.ok() && RunCommand(c->get(), {"PING"}, "PING").value_or("") == "PONG";
}

// "host:port" -> {host, port}; INVALID_ARGUMENT otherwise.
absl::StatusOr<std::pair<std::string, int>> SplitHostPort(absl::string_view host_port) {
  size_t colon = host_port.rfind(':');
  int port = 0;
  if (colon == absl::string_view::npos || colon == 0 ||
      !absl::SimpleAtoi(host_port.substr(colon + 1), &port) || port <= 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("RedisServerOptions::replicaof must be host:port, got '", host_port, "'"));
  }
  return std::make_pair(std::string(host_port.substr(0, colon)), port);
}

// The config-file lines for the options other than extra_config (which comes first, so these win).
absl::StatusOr<std::string> OptionLines(const RedisServerOptions& opts) {
  std::string lines;
  if (!opts.admin_password.empty()) {
    absl::StrAppend(&lines, "requirepass \"", opts.admin_password, "\"\n");
    if (!opts.sentinel) absl::StrAppend(&lines, "masterauth \"", opts.admin_password, "\"\n");
  }
  for (const std::string& user : opts.acl_users) absl::StrAppend(&lines, "user ", user, "\n");
  if (!opts.replicaof.empty() && !opts.sentinel) {
    ORDERHOLD_ASSIGN_OR_RETURN(auto primary, SplitHostPort(opts.replicaof));
    absl::StrAppend(&lines, "replicaof ", primary.first, " ", primary.second, "\n");
  }
  if (opts.cluster && !opts.sentinel) {
    absl::StrAppend(&lines, "cluster-enabled yes\ncluster-config-file nodes.conf\n");
  }
  if (opts.tls.has_value()) {
    const RedisTlsOptions& tls = *opts.tls;
    if (tls.cert_file.empty() || tls.key_file.empty() || tls.ca_cert_file.empty()) {
      return absl::InvalidArgumentError(
          "RedisTlsOptions: cert_file, key_file and ca_cert_file are all required");
    }
    if (tls.auth_clients != "yes" && tls.auth_clients != "no" && tls.auth_clients != "optional") {
      return absl::InvalidArgumentError(
          absl::StrCat("RedisTlsOptions::auth_clients must be yes, no or optional, got '",
                       tls.auth_clients, "'"));
    }
    absl::StrAppend(&lines, "tls-cert-file \"", tls.cert_file, "\"\n", "tls-key-file \"",
                    tls.key_file, "\"\n", "tls-ca-cert-file \"", tls.ca_cert_file, "\"\n",
                    "tls-auth-clients ", tls.auth_clients, "\n", "tls-replication ",
                    tls.replication ? "yes" : "no", "\n");
  }
  return lines;
}

std::string ReadTail(const std::string& path, long from) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  in.seekg(0, std::ios::end);
  long size = static_cast<long>(in.tellg());
  long start = std::max(from, size - static_cast<long>(kLogTailBytes));
  if (start >= size) return "";
  in.seekg(start);
  std::string tail((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return start > from ? absl::StrCat("...", tail) : tail;
}

}  // namespace

void RedisServer::ContextDeleter::operator()(redisContext* c) const { redisFree(c); }

RedisServer::RedisServer(RedisServerOptions opts, std::string binary, std::string dir)
    : opts_(std::move(opts)), binary_(std::move(binary)), dir_(std::move(dir)) {}

absl::StatusOr<std::unique_ptr<RedisServer>> RedisServer::Start(RedisServerOptions opts) {
  ORDERHOLD_ASSIGN_OR_RETURN(std::string binary, FindExecutable("redis-server", "redis-server"));
  ORDERHOLD_ASSIGN_OR_RETURN(std::string dir, MakeTempDir("redis"));
  // From here the destructor owns the directory.
  std::unique_ptr<RedisServer> server(new RedisServer(std::move(opts), binary, dir));
  {
    ORDERHOLD_ASSIGN_OR_RETURN(std::string option_lines, OptionLines(server->opts_));
    std::ofstream conf(server->config_path());
    conf << "# Written by orderhold::testing::RedisServer.\n";
    // A primary waits 5 s (Redis' default) for more replicas before a diskless full sync; nothing
    // in a test gains from that wait. extra_config may set it back.
    if (!server->opts_.sentinel) conf << "repl-diskless-sync-delay 0\n";
    conf << "# RedisServerOptions::extra_config:\n"
         << server->opts_.extra_config << "\n"
         << "# then the other RedisServerOptions.\n"
         << option_lines;
    if (!conf.flush()) {
      return absl::InternalError(absl::StrCat("cannot write ", server->config_path()));
    }
  }
  absl::Status status;
  for (int attempt = 0; attempt < kMaxStartAttempts; ++attempt) {
    const std::string& host = server->opts_.host;
    if (server->opts_.port != 0) {
      server->port_ = server->opts_.port;
    } else {
      ORDERHOLD_ASSIGN_OR_RETURN(server->port_, PickFreePort(host));
    }
    if (server->opts_.tls.has_value()) {
      do {
        ORDERHOLD_ASSIGN_OR_RETURN(server->tls_port_, PickFreePort(host));
      } while (server->tls_port_ == server->port_);
    }
    if (server->opts_.cluster && !server->opts_.sentinel) {
      do {
        ORDERHOLD_ASSIGN_OR_RETURN(server->cluster_port_, PickFreePort(host));
      } while (server->cluster_port_ == server->port_ ||
               server->cluster_port_ == server->tls_port_);
    }
    status = server->LaunchAndWait();
    if (status.ok()) return server;
    // Only a lost race for the port is worth another try; anything else (bad extra_config,
    // timeout) would fail the same way again.
    // A fixed port would only be taken again.
    if (server->opts_.port != 0 || !absl::IsUnavailable(status) ||
        !absl::StrContains(status.message(), "Address already in use")) {
      break;
    }
  }
  return status;
}

RedisServer::~RedisServer() {
  conn_.reset();
  Kill();
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

std::string RedisServer::url() const { return absl::StrCat("redis://", opts_.host, ":", port_); }

std::string RedisServer::tls_url() const {
  return tls_port_ == 0 ? "" : absl::StrCat("rediss://", opts_.host, ":", tls_port_);
}

std::string RedisServer::config_path() const { return absl::StrCat(dir_, "/redis.conf"); }

std::string RedisServer::log_path() const { return absl::StrCat(dir_, "/redis.log"); }

std::string RedisServer::LogSinceLaunch() const {
  std::string tail = ReadTail(log_path(), log_offset_);
  return tail.empty() ? "(empty)" : tail;
}

absl::Status RedisServer::Launch() {
  std::vector<std::string> args = {binary_, config_path()};
  // `--sentinel` must follow the config file; a sentinel has no data settings.
  if (opts_.sentinel) args.push_back("--sentinel");
  args.insert(args.end(), {"--port", absl::StrCat(port_)});
  if (tls_port_ != 0) args.insert(args.end(), {"--tls-port", absl::StrCat(tls_port_)});
  if (cluster_port_ != 0) {
    args.insert(args.end(), {"--cluster-port", absl::StrCat(cluster_port_)});
  }
  args.insert(args.end(), {"--bind", opts_.host, "--dir", dir_});
  if (!opts_.sentinel) {
    args.insert(args.end(), {"--save", "", "--appendonly", opts_.appendonly ? "yes" : "no"});
  }
  args.insert(args.end(), {"--daemonize", "no", "--protected-mode", "no", "--loglevel", "warning"});
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);

  // Everything the child needs is prepared before fork(): between fork() and exec() a child of a
  // multi-threaded process may only make async-signal-safe calls.
  int log_fd = ::open(log_path().c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0) return ErrnoError(absl::StrCat("open ", log_path()), errno);
  struct stat st {};
  log_offset_ = ::fstat(log_fd, &st) == 0 ? static_cast<long>(st.st_size) : 0;
  int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (null_fd < 0) {
    int err = errno;
    ::close(log_fd);
    return ErrnoError("open /dev/null", err);
  }
  const pid_t parent = ::getpid();
  const long max_fd = std::min(::sysconf(_SC_OPEN_MAX), 65536L);

  pid_t pid = ::fork();
  if (pid == 0) {
    // Child. Die with the test process, even when it is SIGKILLed or crashes.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);  // the parent died before prctl took effect
    // The signal mask and ignored signals survive exec: undo what the test process may have set
    // (a server under test blocks SIGTERM in all threads, which would make Stop() hang).
    sigset_t none;
    ::sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGPIPE}) ::sigaction(sig, &dfl, nullptr);
    ::dup2(null_fd, STDIN_FILENO);
    ::dup2(log_fd, STDOUT_FILENO);
    ::dup2(log_fd, STDERR_FILENO);
    // Don't let Redis inherit the test's sockets (a leaked listener would outlive its owner).
    if (::close_range(3, ~0U, 0) != 0) {
      for (long fd = 3; fd < max_fd; ++fd) ::close(static_cast<int>(fd));
    }
    ::execv(argv[0], argv.data());
    static constexpr char kExecFailed[] = "orderhold RedisServer: execv(redis-server) failed\n";
    (void)!::write(STDERR_FILENO, kExecFailed, sizeof(kExecFailed) - 1);
    ::_exit(127);
  }
  int fork_errno = errno;
  ::close(log_fd);
  ::close(null_fd);
  if (pid < 0) return ErrnoError("fork", fork_errno);
  pid_ = pid;
  paused_ = false;
  return absl::OkStatus();
}

absl::Status RedisServer::WaitUntilReady() {
  const absl::Time deadline = absl::Now() + opts_.start_timeout;
  while (true) {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return absl::UnavailableError(
          absl::StrCat("redis-server on port ", port_, " exited (", DescribeWaitStatus(status),
                       ") before answering PING; its log:\n", LogSinceLaunch()));
    }
    if (Ping(opts_.host, port_, opts_.admin_password)) return absl::OkStatus();
    if (absl::Now() >= deadline) {
      Kill();
      return absl::DeadlineExceededError(absl::StrCat(
          "redis-server on port ", port_, " did not answer PING within ",
          absl::FormatDuration(opts_.start_timeout), "; its log:\n", LogSinceLaunch()));
    }
    absl::SleepFor(kPollInterval);
  }
}

absl::Status RedisServer::LaunchAndWait() {
  ORDERHOLD_RETURN_IF_ERROR(Launch());
  return WaitUntilReady();
}

void RedisServer::Kill() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);  // also ends a stopped (paused) process
  int status = 0;
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  pid_ = -1;
  paused_ = false;
}

absl::Status RedisServer::Stop() {
  conn_.reset();  // Redis closes it anyway; writing to it later could raise SIGPIPE
  if (pid_ <= 0) return absl::OkStatus();
  ::kill(pid_, SIGTERM);
  if (paused_) ::kill(pid_, SIGCONT);  // a stopped process handles SIGTERM only once continued
  paused_ = false;

  const absl::Time deadline = absl::Now() + kStopTimeout;
  int status = 0;
  while (::waitpid(pid_, &status, WNOHANG) != pid_) {
    if (absl::Now() >= deadline) {
      Kill();
      return absl::DeadlineExceededError(absl::StrCat(
          "redis-server on port ", port_, " ignored SIGTERM for ",
          absl::FormatDuration(kStopTimeout), "; killed it; its log:\n", LogSinceLaunch()));
    }
    absl::SleepFor(kPollInterval);
  }
  pid_ = -1;
  ORDERHOLD_RETURN_IF_ERROR(WaitPortsClosed());
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return absl::InternalError(absl::StrCat("redis-server on port ", port_, " stopped with ",
                                            DescribeWaitStatus(status), "; its log:\n",
                                            LogSinceLaunch()));
  }
  return absl::OkStatus();
}

absl::Status RedisServer::WaitPortsClosed() {
  // The listening sockets die with the process; poll anyway, so callers can rely on "refused".
  const absl::Time deadline = absl::Now() + kPortCloseTimeout;
  for (int port : {port_, tls_port_, cluster_port_}) {
    if (port == 0) continue;
    while (!ConnectRefused(opts_.host, port)) {
      if (absl::Now() >= deadline) {
        return absl::DeadlineExceededError(absl::StrCat("redis-server exited but ", opts_.host, ":",
                                                        port, " still accepts connections"));
      }
      absl::SleepFor(kPollInterval);
    }
  }
  return absl::OkStatus();
}

absl::Status RedisServer::Crash() {
  conn_.reset();
  if (pid_ <= 0) return absl::OkStatus();
  Kill();
  return WaitPortsClosed();
}

absl::Status RedisServer::Restart() {
  ORDERHOLD_RETURN_IF_ERROR(Stop());
  return LaunchAndWait();
}

absl::Status RedisServer::Pause() {
  if (pid_ <= 0) return absl::FailedPreconditionError("Pause(): redis-server is not running");
  if (paused_) return absl::OkStatus();
  if (::kill(pid_, SIGSTOP) != 0) return ErrnoError("kill(SIGSTOP)", errno);
  // kill() returns before the target has stopped; WUNTRACED waits until it has, so a command sent
  // right after Pause() is guaranteed to go unanswered.
  int status = 0;
  pid_t r;
  while ((r = ::waitpid(pid_, &status, WUNTRACED)) < 0 && errno == EINTR) {
  }
  if (r < 0) return ErrnoError("waitpid(WUNTRACED)", errno);
  if (!WIFSTOPPED(status)) {
    pid_ = -1;
    return absl::UnavailableError(absl::StrCat("redis-server exited (", DescribeWaitStatus(status),
                                               "); its log:\n", LogSinceLaunch()));
  }
  paused_ = true;
  return absl::OkStatus();
}

absl::Status RedisServer::Resume() {
  if (pid_ <= 0) return absl::FailedPreconditionError("Resume(): redis-server is not running");
  if (!paused_) return absl::OkStatus();
  if (::kill(pid_, SIGCONT) != 0) return ErrnoError("kill(SIGCONT)", errno);
  paused_ = false;
  return absl::OkStatus();
}

absl::StatusOr<std::string> RedisServer::DataDigest() {
  return Command({"EVAL",
                  "local t = {} "
                  "for _, k in ipairs(redis.call('KEYS', '*')) do "
                  "  if not (string.find(k, ':replicas', 1, true) or "
                  "          string.find(k, ':lease', 1, true)) "
                  "  then t[#t + 1] = k .. '=' .. redis.sha1hex(redis.call('DUMP', k)) end "
                  "end "
                  "table.sort(t) return table.concat(t, ' ')",
                  "0"});
}

absl::StatusOr<std::string> RedisServer::Command(const std::vector<std::string>& args) {
  if (args.empty()) return absl::InvalidArgumentError("Command(): no arguments");
  if (pid_ <= 0) return absl::FailedPreconditionError("Command(): redis-server is not running");
  const std::string what = absl::StrCat("redis ", port_, " ", args[0]);
  if (conn_ == nullptr || conn_->err != 0) {
    conn_.reset();
    ORDERHOLD_ASSIGN_OR_RETURN(ContextPtr c, Connect(opts_.host, port_, "", opts_.admin_password,
                                                     opts_.command_timeout, what));
    conn_.reset(c.release());
  }
  absl::StatusOr<std::string> reply = RunCommand(conn_.get(), args, what);
  // After an I/O error or timeout a hiredis context is unusable (an error reply leaves it fine).
  if (conn_->err != 0) conn_.reset();
  return reply;
}

absl::StatusOr<std::string> RedisServer::CommandAs(absl::string_view user,
                                                   absl::string_view password,
                                                   const std::vector<std::string>& args) {
  if (args.empty()) return absl::InvalidArgumentError("CommandAs(): no arguments");
  if (pid_ <= 0) return absl::FailedPreconditionError("CommandAs(): redis-server is not running");
  const std::string what = absl::StrCat("redis ", port_, " ", args[0]);
  ORDERHOLD_ASSIGN_OR_RETURN(
      ContextPtr c, Connect(opts_.host, port_, user, password, opts_.command_timeout, what));
  return RunCommand(c.get(), args, what);
}

}  // namespace orderhold::testing
