#include "server/redis/redis_connection.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <memory>
#include <new>
#include <optional>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "server/common/files.h"
#include "server/common/status_macros.h"
#include "server/redis/pem_files.h"

namespace orderhold::redis {
namespace {

constexpr size_t kReadChunk = 16 * 1024;

// hiredis' reader builds RedisReply trees directly (redisReplyObjectFunctions, hiredis' read.h),
// instead of its own reply objects that would then be copied and freed: the root and each array's
// element vector are allocated (and strings past their inline buffer), where hiredis allocated
// every element, its strings and pointer arrays, and the copy allocated again (tests/bench/
// README.md "Instructions per call").
// Elements arrive in order, each once its elder sibling is complete, so each is appended to its
// parent's `elements`; when the vector grows only completed siblings move, and no reader task
// points at those (a task's `obj` is the object being filled: the root or an array still open).
// The root is allocated; the reader's freeObject (on a protocol error mid-reply, or when the
// reader is freed holding one) deletes it with its elements. A null return is hiredis' "out of
// memory" error.
RedisReply* NewReply(const redisReadTask* task, RedisReply::Type type) {
  RedisReply* reply;
  if (task->parent == nullptr) {
    reply = new RedisReply;
  } else {
    std::vector<RedisReply>& siblings = static_cast<RedisReply*>(task->parent->obj)->elements;
    reply = &siblings.emplace_back();
  }
  reply->type = type;
  return reply;
}

void* CreateString(const redisReadTask* task, char* str, size_t len) try {
  RedisReply* reply =
      NewReply(task, task->type == REDIS_REPLY_ERROR    ? RedisReply::Type::kError
                     : task->type == REDIS_REPLY_STATUS ? RedisReply::Type::kStatus
                                                        : RedisReply::Type::kString);
  reply->str.assign(str, len);
  return reply;
} catch (const std::bad_alloc&) {
  return nullptr;
}

void* CreateArray(const redisReadTask* task, int elements) try {
  RedisReply* reply = NewReply(task, RedisReply::Type::kArray);
  // The declared length, up to a bound: a corrupt one ("*2000000000") must not allocate gigabytes
  // before a single element has arrived.
  reply->elements.reserve(static_cast<size_t>(std::clamp(elements, 0, 1024)));
  return reply;
} catch (const std::bad_alloc&) {
  return nullptr;
}

void* CreateInteger(const redisReadTask* task, long long value) try {
  RedisReply* reply = NewReply(task, RedisReply::Type::kInteger);
  reply->integer = value;
  return reply;
} catch (const std::bad_alloc&) {
  return nullptr;
}

void* CreateNil(const redisReadTask* task) try {
  return NewReply(task, RedisReply::Type::kNil);
} catch (const std::bad_alloc&) {
  return nullptr;
}

void FreeReply(void* reply) { delete static_cast<RedisReply*>(reply); }

redisReplyObjectFunctions kReplyFunctions = {CreateString, CreateArray, CreateInteger, CreateNil,
                                             FreeReply};

// OpenSSL's `reason` for a failed handshake, read or write, with a hint when it shows one of the
// usual misconfigurations: a plain port (plain text read as a TLS record) or a server that wants
// a client certificate. With TLS 1.3 the server checks the client's certificate only
// after the client has finished its handshake, so its alert "certificate required" arrives on
// the first read, not in SSL_connect: every TLS error path goes through here.
std::string WithHint(std::string reason) {
  if (absl::StrContains(reason, "wrong version number") ||
      absl::StrContains(reason, "packet length too long") ||
      absl::StrContains(reason, "record layer failure")) {
    absl::StrAppend(&reason, " (the port seems to speak plain RESP, not TLS: use redis://)");
  } else if (absl::StrContains(reason, "alert certificate required") ||
             absl::StrContains(reason, "alert handshake failure") ||
             absl::StrContains(reason, "alert bad certificate")) {
    absl::StrAppend(&reason,
                    " (the server may require a client certificate: set redis_tls_cert_file and "
                    "redis_tls_key_file)");
  }
  return reason;
}

bool IsIpLiteral(const std::string& host) {
  in6_addr address;
  return inet_pton(AF_INET, host.c_str(), &address) == 1 ||
         inet_pton(AF_INET6, host.c_str(), &address) == 1;
}

// Blocks SIGPIPE in this thread for the guard's life and discards one raised meanwhile, so a TLS
// write to a peer that went away fails with EPIPE instead of killing the process (OpenSSL writes
// with write(2), which has no MSG_NOSIGNAL; libcurl's sigpipe_ignore does the same).
class SigpipeGuard {
 public:
  SigpipeGuard() {
    sigemptyset(&sigpipe_);
    sigaddset(&sigpipe_, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &sigpipe_, &old_);
  }
  ~SigpipeGuard() {
    if (sigismember(&old_, SIGPIPE)) return;  // blocked by the caller: leave it to them
    sigset_t pending;
    if (sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE)) {
      const timespec zero{0, 0};
      sigtimedwait(&sigpipe_, nullptr, &zero);
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  SigpipeGuard(const SigpipeGuard&) = delete;
  SigpipeGuard& operator=(const SigpipeGuard&) = delete;

 private:
  sigset_t sigpipe_;
  sigset_t old_;
};

// The address `fd` is connected to, "ip:port" ("[ip]:port" for IPv6), or "" if unknown.
std::string PeerAddress(int fd) {
  sockaddr_storage peer{};
  socklen_t len = sizeof(peer);
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &len) != 0) return "";
  char host[INET6_ADDRSTRLEN] = {};
  if (peer.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&peer);
    if (inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host)) == nullptr) return "";
    return absl::StrCat(host, ":", ntohs(in->sin_port));
  }
  if (peer.ss_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&peer);
    if (inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host)) == nullptr) return "";
    return absl::StrCat("[", host, "]:", ntohs(in6->sin6_port));
  }
  return "";
}

// Connects a non-blocking socket to one resolved address by `deadline`.
absl::StatusOr<int> ConnectOne(const addrinfo& ai, absl::Time deadline, const HostPort& address) {
  const int fd = socket(ai.ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::UnavailableError(absl::StrCat("redis: socket: ", strerror(errno)));
  if (connect(fd, ai.ai_addr, ai.ai_addrlen) != 0 && errno != EINPROGRESS) {
    const int err = errno;
    close(fd);
    return absl::UnavailableError(
        absl::StrCat("redis: connect to ", address.ToString(), ": ", strerror(err)));
  }
  while (true) {
    pollfd pfd{fd, POLLOUT, 0};
    const absl::Duration left = deadline - absl::Now();
    const int ms = left <= absl::ZeroDuration()
                       ? 0
                       : static_cast<int>(std::ceil(absl::ToDoubleMilliseconds(left)));
    const int ready = poll(&pfd, 1, ms);
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) {
      close(fd);
      return absl::DeadlineExceededError(
          absl::StrCat("redis: connect to ", address.ToString(), ": timed out"));
    }
    break;
  }
  int err = 0;
  socklen_t len = sizeof(err);
  if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
  if (err != 0) {
    close(fd);
    return absl::UnavailableError(
        absl::StrCat("redis: connect to ", address.ToString(), ": ", strerror(err)));
  }
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
  return fd;
}

}  // namespace

absl::StatusOr<std::unique_ptr<RedisConnection>> RedisConnection::Connect(const HostPort& address,
                                                                          const TlsContext* tls,
                                                                          absl::Time deadline) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* resolved = nullptr;
  const std::string port = absl::StrCat(address.port);
  if (const int rc = getaddrinfo(address.host.c_str(), port.c_str(), &hints, &resolved); rc != 0) {
    return absl::UnavailableError(
        absl::StrCat("redis: cannot resolve ", address.host, ": ", gai_strerror(rc)));
  }
  absl::StatusOr<int> fd = absl::UnavailableError("redis: no address");
  for (addrinfo* ai = resolved; ai != nullptr; ai = ai->ai_next) {
    fd = ConnectOne(*ai, deadline, address);
    if (fd.ok() || absl::IsDeadlineExceeded(fd.status())) break;
  }
  freeaddrinfo(resolved);
  if (!fd.ok()) return fd.status();
  std::unique_ptr<RedisConnection> connection(new RedisConnection(address, *fd));
  connection->peer_ = PeerAddress(*fd);
  if (tls != nullptr) ORDERHOLD_RETURN_IF_ERROR(connection->Handshake(*tls, deadline));
  return connection;
}

RedisConnection::RedisConnection(HostPort address, int fd)
    : address_(std::move(address)),
      fd_(fd),
      reader_(redisReaderCreateWithFunctions(&kReplyFunctions)) {}

RedisConnection::~RedisConnection() {
  if (ssl_ != nullptr) SSL_free(ssl_);  // no close_notify: Redis treats a close the same way
  if (fd_ >= 0) close(fd_);
  if (reader_ != nullptr) redisReaderFree(reader_);
}

absl::Status RedisConnection::Fail(absl::Status status) {
  broken_ = true;
  return status;
}

absl::StatusOr<bool> RedisConnection::Poll(bool want_write, absl::Time deadline) {
  while (true) {
    pollfd pfd{fd_, static_cast<short>(want_write ? POLLOUT : POLLIN), 0};
    const absl::Duration left = std::max(deadline - absl::Now(), absl::ZeroDuration());
    const int ready = poll(&pfd, 1, static_cast<int>(std::ceil(absl::ToDoubleMilliseconds(left))));
    if (ready > 0) return true;  // ready, or an error the next call reports
    if (ready == 0 && left <= absl::ZeroDuration()) return false;
    if (ready < 0 && errno != EINTR) {
      return Fail(absl::UnavailableError(absl::StrCat("redis: poll: ", strerror(errno))));
    }
  }
}

absl::Status RedisConnection::WaitFor(bool want_write, absl::Time deadline) {
  if (deadline <= absl::Now()) {
    return Fail(absl::DeadlineExceededError(
        absl::StrCat("redis: ", address_.ToString(), " did not answer in time")));
  }
  ORDERHOLD_ASSIGN_OR_RETURN(const bool ready, Poll(want_write, deadline));
  if (ready) return absl::OkStatus();
  return Fail(absl::DeadlineExceededError(
      absl::StrCat("redis: ", address_.ToString(), " did not answer in time")));
}

absl::Status RedisConnection::Handshake(const TlsContext& tls, absl::Time deadline) {
  ssl_ = SSL_new(tls.ctx());
  if (ssl_ == nullptr || SSL_set_fd(ssl_, fd_) != 1) {
    return Fail(absl::InternalError(SslErrors("SSL_new failed")));
  }
  const std::string& name = tls.server_name().empty() ? address_.host : tls.server_name();
  if (IsIpLiteral(name)) {
    X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl_), name.c_str());
  } else {
    SSL_set_tlsext_host_name(ssl_, name.c_str());
    SSL_set1_host(ssl_, name.c_str());
  }
  ERR_clear_error();
  SigpipeGuard guard;
  while (true) {
    const int rc = SSL_connect(ssl_);
    if (rc == 1) return absl::OkStatus();
    const int error = SSL_get_error(ssl_, rc);
    const std::string prefix = absl::StrCat("redis: TLS handshake with ", address_.ToString());
    if (error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE) {
      const absl::Status waited = WaitFor(error == SSL_ERROR_WANT_WRITE, deadline);
      // A plain Redis reads the ClientHello as the start of an inline command and looks for its
      // newline with strchr (networking.c, processInlineBuffer), which stops at the hello's
      // first zero byte: the hello is never answered, and the deadline is all we get.
      if (absl::IsDeadlineExceeded(waited) && SSL_get_state(ssl_) == TLS_ST_CW_CLNT_HELLO) {
        return absl::DeadlineExceededError(absl::StrCat(
            prefix,
            ": no answer to the TLS hello in time (the port may speak plain RESP, not TLS: "
            "then use redis://)"));
      }
      ORDERHOLD_RETURN_IF_ERROR(waited);
      continue;
    }
    if (const long verify = SSL_get_verify_result(ssl_); verify != X509_V_OK) {
      ERR_clear_error();
      return Fail(absl::UnavailableError(absl::StrCat(
          prefix, " failed: certificate verify failed: ", X509_verify_cert_error_string(verify),
          " (verified against ", tls.trusted(), " for ",
          tls.server_name().empty() ? "the host name '" : "redis_tls_server_name '", name, "')")));
    }
    return Fail(absl::UnavailableError(
        absl::StrCat(prefix, " failed: ",
                     WithHint(SslErrors(error == SSL_ERROR_SYSCALL || error == SSL_ERROR_ZERO_RETURN
                                            ? "the connection was closed"
                                            : "unknown error")))));
  }
}

namespace {

// Formats `head` then the `count` arguments of `for_each_tail` (which calls its argument with each
// of them, `tail_bytes` in all) as one RESP command at the end of `out`: "*<count>\r\n", then
// "$<length>\r\n<bytes>\r\n" per argument, at most 24 bytes of framing each (a 20-digit
// length). The room is made once and written through a cursor, then trimmed: string appends per
// piece cost ~130 instructions per argument, absl::StrAppend more (it zero-fills each piece's
// room first; callgrind, tests/bench/README.md).
template <typename ForEachTail>
void AppendCommand(std::initializer_list<absl::string_view> head, size_t count, size_t tail_bytes,
                   const ForEachTail& for_each_tail, std::string& out) {
  size_t size = 24 + tail_bytes + 24 * count;
  for (absl::string_view arg : head) size += arg.size() + 24;
  const size_t start = out.size();
  out.resize(start + size);
  char* cursor = out.data() + start;
  const auto put = [&cursor](const char* data, size_t n) {
    if (n == 0) return;  // an empty argument's data() may be null
    std::memcpy(cursor, data, n);
    cursor += n;
  };
  const auto frame = [&](char marker, size_t n) {
    *cursor++ = marker;
    const absl::AlphaNum digits(n);
    put(digits.data(), digits.size());
    put("\r\n", 2);
  };
  frame('*', head.size() + count);
  const auto bulk = [&](absl::string_view arg) {
    frame('$', arg.size());
    put(arg.data(), arg.size());
    put("\r\n", 2);
  };
  for (absl::string_view arg : head) bulk(arg);
  for_each_tail(bulk);
  out.resize(static_cast<size_t>(cursor - out.data()));
}

}  // namespace

void RedisConnection::Append(absl::Span<const std::string> args) {
  size_t bytes = 0;
  for (const std::string& arg : args) bytes += arg.size();
  AppendCommand(
      {}, args.size(), bytes,
      [args](const auto& bulk) {
        for (const std::string& arg : args) bulk(arg);
      },
      out_);
}

void RedisConnection::Append(std::initializer_list<absl::string_view> head, const RedisArgs& tail) {
  AppendCommand(
      head, tail.size(), tail.bytes(), [&tail](const auto& bulk) { tail.ForEach(bulk); }, out_);
}

absl::Status RedisConnection::Flush(absl::Time deadline) {
  if (broken_) return absl::UnavailableError("redis: connection lost");
  size_t written = 0;
  std::optional<SigpipeGuard> guard;
  if (ssl_ != nullptr) guard.emplace();
  while (written < out_.size()) {
    const char* data = out_.data() + written;
    const size_t size = out_.size() - written;
    if (ssl_ == nullptr) {
      const ssize_t n = send(fd_, data, size, MSG_NOSIGNAL);
      if (n > 0) {
        written += static_cast<size_t>(n);
      } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        ORDERHOLD_RETURN_IF_ERROR(WaitFor(/*want_write=*/true, deadline));
      } else if (n < 0 && errno == EINTR) {
        continue;
      } else {
        return Fail(absl::UnavailableError(
            absl::StrCat("redis: write to ", address_.ToString(), ": ", strerror(errno))));
      }
      continue;
    }
    ERR_clear_error();
    const int n = SSL_write(ssl_, data, static_cast<int>(std::min<size_t>(size, 1 << 30)));
    if (n > 0) {
      written += static_cast<size_t>(n);
      continue;
    }
    const int error = SSL_get_error(ssl_, n);
    if (error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE) {
      ORDERHOLD_RETURN_IF_ERROR(WaitFor(error == SSL_ERROR_WANT_WRITE, deadline));
      continue;
    }
    std::string reason = SslErrors(errno != 0 ? strerror(errno) : "connection closed");
    if (error == SSL_ERROR_SYSCALL) {
      // The peer hung up while we wrote; it may have said why first, in an alert that waits
      // unread (TLS 1.3 servers check a client certificate after the client's handshake is
      // done, so "certificate required" can meet our first write). One non-blocking read
      // fetches it; nothing there leaves the write's own error.
      char buffer[256];
      ERR_clear_error();
      if (SSL_read(ssl_, buffer, sizeof(buffer)) <= 0 && ERR_peek_error() != 0) {
        reason = SslErrors("");
      }
      ERR_clear_error();
    }
    return Fail(absl::UnavailableError(absl::StrCat("redis: TLS write to ", address_.ToString(),
                                                    ": ", WithHint(std::move(reason)))));
  }
  out_.clear();
  return absl::OkStatus();
}

absl::StatusOr<bool> RedisConnection::Fill(absl::Time deadline, bool soft_deadline) {
  char buffer[kReadChunk];
  const auto wait = [&](bool want_write) -> absl::StatusOr<bool> {
    if (!soft_deadline) {
      ORDERHOLD_RETURN_IF_ERROR(WaitFor(want_write, deadline));
      return true;
    }
    return Poll(want_write, deadline);
  };
  while (true) {
    if (ssl_ == nullptr) {
      // Replies are rarely there the moment a batch is written: wait first, then read once
      // (unless WaitReadable just saw the socket readable).
      if (!readable_) {
        ORDERHOLD_ASSIGN_OR_RETURN(const bool ready, wait(/*want_write=*/false));
        if (!ready) return false;
      }
      readable_ = false;
      const ssize_t n = recv(fd_, buffer, sizeof(buffer), 0);
      if (n > 0) {
        redisReaderFeed(reader_, buffer, static_cast<size_t>(n));
        return true;
      }
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
        if (soft_deadline && deadline <= absl::Now()) return false;
        continue;
      }
      return Fail(absl::UnavailableError(
          n == 0 ? absl::StrCat("redis: connection closed by ", address_.ToString())
                 : absl::StrCat("redis: read from ", address_.ToString(), ": ", strerror(errno))));
    }
    ERR_clear_error();
    const int n = SSL_read(ssl_, buffer, sizeof(buffer));
    if (n > 0) {
      redisReaderFeed(reader_, buffer, static_cast<size_t>(n));
      return true;
    }
    const int error = SSL_get_error(ssl_, n);
    if (error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE) {
      // Also after a record without data (a TLS 1.3 session ticket): wait for the next one.
      ORDERHOLD_ASSIGN_OR_RETURN(const bool ready, wait(error == SSL_ERROR_WANT_WRITE));
      if (!ready) return false;
      continue;
    }
    if (error == SSL_ERROR_ZERO_RETURN || (error == SSL_ERROR_SYSCALL && ERR_peek_error() == 0)) {
      ERR_clear_error();
      return Fail(absl::UnavailableError(
          absl::StrCat("redis: connection closed by ", address_.ToString())));
    }
    return Fail(absl::UnavailableError(absl::StrCat("redis: TLS read from ", address_.ToString(),
                                                    ": ", WithHint(SslErrors("error")))));
  }
}

absl::StatusOr<std::optional<RedisReply>> RedisConnection::Buffered() {
  void* raw = nullptr;
  if (redisReaderGetReply(reader_, &raw) != REDIS_OK) {
    return Fail(absl::UnavailableError(
        absl::StrCat("redis: protocol error from ", address_.ToString(), ": ", reader_->errstr,
                     ssl_ == nullptr ? " (if the port speaks TLS, use rediss://)" : "")));
  }
  if (raw == nullptr) return std::nullopt;
  const std::unique_ptr<RedisReply> reply(static_cast<RedisReply*>(raw));
  return std::move(*reply);
}

absl::StatusOr<RedisReply> RedisConnection::Read(absl::Time deadline) {
  if (broken_) return absl::UnavailableError("redis: connection lost");
  while (true) {
    ORDERHOLD_ASSIGN_OR_RETURN(std::optional<RedisReply> reply, Buffered());
    if (reply.has_value()) return *std::move(reply);
    ORDERHOLD_RETURN_IF_ERROR(Fill(deadline, /*soft_deadline=*/false).status());
  }
}

absl::StatusOr<std::optional<RedisReply>> RedisConnection::TryRead(absl::Time deadline) {
  if (broken_) return absl::UnavailableError("redis: connection lost");
  while (true) {
    ORDERHOLD_ASSIGN_OR_RETURN(std::optional<RedisReply> reply, Buffered());
    if (reply.has_value()) return reply;
    ORDERHOLD_ASSIGN_OR_RETURN(const bool filled, Fill(deadline, /*soft_deadline=*/true));
    if (!filled) return std::nullopt;
  }
}

absl::StatusOr<RedisReply> RedisConnection::Run(const std::vector<std::string>& args,
                                                absl::Time deadline) {
  Append(args);
  ORDERHOLD_RETURN_IF_ERROR(Flush(deadline));
  return Read(deadline);
}

absl::StatusOr<bool> RedisConnection::WaitReadable(absl::Time deadline) {
  if (ssl_ != nullptr && SSL_pending(ssl_) > 0) return true;
  ORDERHOLD_ASSIGN_OR_RETURN(const bool ready, Poll(/*want_write=*/false, deadline));
  readable_ = ready && ssl_ == nullptr;
  return ready;
}

bool RedisConnection::PeerClosed() {
  if (broken_) return true;
  pollfd pfd{fd_, POLLIN, 0};
  const int ready = poll(&pfd, 1, 0);
  if (ready == 0) return false;
  if (ready < 0) return true;
  if (ssl_ == nullptr) {
    char byte;
    const ssize_t n = recv(fd_, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return false;
    broken_ = true;  // EOF, an error, or bytes nobody asked for
    return true;
  }
  // A TLS 1.3 server sends session tickets after the handshake: records without data.
  char buffer[kReadChunk];
  ERR_clear_error();
  SigpipeGuard guard;
  const int n = SSL_read(ssl_, buffer, sizeof(buffer));
  if (n <= 0 && SSL_get_error(ssl_, n) == SSL_ERROR_WANT_READ) return false;
  ERR_clear_error();
  broken_ = true;
  return true;
}

std::vector<std::string> RedisAuthCommand(const std::string& user, const std::string& password) {
  if (password.empty()) return {};
  if (user.empty()) return {"AUTH", password};
  return {"AUTH", user, password};
}

absl::StatusOr<std::vector<std::string>> NodeAuthCommand(const NodeOptions& node,
                                                         absl::string_view what) {
  if (node.password_file.empty()) return RedisAuthCommand(node.user, node.password);
  // A password is short; 4 KiB bounds a wrong path (a large file) without refusing a long one.
  absl::StatusOr<std::string> password = ReadSmallFile(node.password_file, 4096);
  if (!password.ok()) {
    return absl::UnavailableError(
        absl::StrCat(what, ": password file ", password.status().message()));
  }
  absl::string_view text = *password;
  if (absl::ConsumeSuffix(&text, "\n")) absl::ConsumeSuffix(&text, "\r");
  if (text.empty()) {
    return absl::UnavailableError(
        absl::StrCat(what, ": password file ", node.password_file, " is empty"));
  }
  return RedisAuthCommand(node.user, std::string(text));
}

absl::Status ValidateNodeOptions(const NodeOptions& options, absl::string_view what) {
  if (!options.password.empty() && !options.password_file.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": a password and a password file are both given"));
  }
  if (!options.user.empty() && options.password.empty() && options.password_file.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": a user is given without a password"));
  }
  if (options.connect_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": connect_timeout must be > 0"));
  }
  if (absl::StrContains(options.client_name, ' ')) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": client_name must be one word"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<RedisConnection>> ConnectAuthenticated(const HostPort& address,
                                                                      const NodeOptions& node,
                                                                      absl::string_view name_suffix,
                                                                      absl::string_view what,
                                                                      absl::Time deadline) {
  ORDERHOLD_ASSIGN_OR_RETURN(std::unique_ptr<RedisConnection> connection,
                             RedisConnection::Connect(address, node.tls.get(), deadline));
  ORDERHOLD_ASSIGN_OR_RETURN(const std::vector<std::string> auth, NodeAuthCommand(node, what));
  const std::string client_name =
      node.client_name.empty() ? "" : absl::StrCat(node.client_name, name_suffix);
  if (!auth.empty()) connection->Append(auth);
  if (!client_name.empty()) connection->Append({"CLIENT", "SETNAME", client_name});
  ORDERHOLD_RETURN_IF_ERROR(connection->Flush(deadline));
  if (!auth.empty()) {
    ORDERHOLD_ASSIGN_OR_RETURN(const RedisReply reply, connection->Read(deadline));
    if (reply.type == RedisReply::Type::kError) {
      // The error line only (WRONGPASS...): never the credentials.
      return absl::UnavailableError(
          absl::StrCat(what, " ", address.ToString(), " refused AUTH: ", reply.str));
    }
  }
  if (!client_name.empty()) {
    ORDERHOLD_RETURN_IF_ERROR(connection->Read(deadline).status());  // an error reply is fine
  }
  return connection;
}

}  // namespace orderhold::redis
