#include "tests/testing/fault_proxy.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace orderhold::testing {
namespace {

constexpr absl::Duration kPoll = absl::Milliseconds(20);  // how soon a pump sees a reset or stop

int PollMs() { return static_cast<int>(absl::ToInt64Milliseconds(kPoll)); }  // accept loop

// Closes `fd` with RST instead of FIN.
void CloseWithReset(int fd) {
  linger hard{1, 0};
  setsockopt(fd, SOL_SOCKET, SO_LINGER, &hard, sizeof(hard));
  close(fd);
}

bool SendAll(int fd, const char* data, size_t size) {
  while (size > 0) {
    const ssize_t n = send(fd, data, size, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

int ConnectTo(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0) return -1;
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd >= 0 && connect(fd, found->ai_addr, found->ai_addrlen) != 0) {
    close(fd);
    freeaddrinfo(found);
    return -1;
  }
  freeaddrinfo(found);
  return fd;
}

}  // namespace

// One proxied connection: the client's socket and ours to the target. Closed when both pumps
// have finished (with RST when reset).
struct FaultProxy::Link {
  Link(int client, int server) : client_fd(client), server_fd(server) {}
  ~Link() {
    if (reset.load()) {
      CloseWithReset(client_fd);
      CloseWithReset(server_fd);
    } else {
      close(client_fd);
      close(server_fd);
    }
  }
  const int client_fd, server_fd;
  std::atomic<bool> closed{false};  // stop both pumps (set too once both directions ended)
  std::atomic<bool> reset{false};   // and close with RST
  std::atomic<int> directions_done{0};
};

absl::StatusOr<std::unique_ptr<FaultProxy>> FaultProxy::Start(std::string host, int port) {
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  if (listener < 0 || bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      listen(listener, 128) != 0 ||
      getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    const std::string error = std::strerror(errno);
    if (listener >= 0) close(listener);
    return absl::InternalError(absl::StrCat("fault proxy: cannot listen: ", error));
  }
  return std::unique_ptr<FaultProxy>(
      new FaultProxy(std::move(host), port, listener, ntohs(address.sin_port)));
}

FaultProxy::FaultProxy(std::string host, int target_port, int listener, int port)
    : host_(std::move(host)), target_port_(target_port), listener_(listener), port_(port) {
  acceptor_ = std::thread([this] { AcceptLoop(); });
}

FaultProxy::~FaultProxy() {
  stopping_ = true;
  acceptor_.join();
  std::vector<std::thread> pumps;
  {
    absl::MutexLock lock(&mu_);
    stalled_ = false;
    for (auto& link : links_) link->closed = true;
    links_.clear();
    pumps.swap(pumps_);
  }
  for (std::thread& pump : pumps) pump.join();
  close(listener_);
}

void FaultProxy::SetLatency(absl::Duration latency, absl::Duration jitter) {
  absl::MutexLock lock(&mu_);
  latency_ = latency;
  jitter_ = jitter;
}

void FaultProxy::Stall() {
  absl::MutexLock lock(&mu_);
  stalled_ = true;
}

void FaultProxy::Resume() {
  absl::MutexLock lock(&mu_);
  stalled_ = false;
}

void FaultProxy::ResetAll() {
  absl::MutexLock lock(&mu_);
  for (auto& link : links_) {
    if (!link->closed.exchange(true)) {
      link->reset = true;
      ++resets_;
    }
  }
  links_.clear();
}

void FaultProxy::RefuseNew(bool refuse) {
  absl::MutexLock lock(&mu_);
  refuse_ = refuse;
}

absl::Duration FaultProxy::NextDelay() {
  absl::MutexLock lock(&mu_);
  if (jitter_ <= absl::ZeroDuration()) return latency_;
  random_ ^= random_ << 13;  // xorshift64
  random_ ^= random_ >> 7;
  random_ ^= random_ << 17;
  const double unit = static_cast<double>(random_ % 2000001) / 1000000.0 - 1.0;  // [-1, 1]
  return std::max(absl::ZeroDuration(), latency_ + jitter_ * unit);
}

void FaultProxy::AcceptLoop() {
  while (!stopping_) {
    pollfd waiting{listener_, POLLIN, 0};
    if (poll(&waiting, 1, PollMs()) <= 0) continue;
    const int client = accept(listener_, nullptr, nullptr);
    if (client < 0) continue;
    ++accepted_;
    bool refuse;
    {
      absl::MutexLock lock(&mu_);
      refuse = refuse_;
    }
    const int server = refuse ? -1 : ConnectTo(host_, target_port_);
    if (server < 0) {
      CloseWithReset(client);
      ++resets_;
      continue;
    }
    auto link = std::make_shared<Link>(client, server);
    absl::MutexLock lock(&mu_);
    std::erase_if(links_, [](const auto& l) { return l->closed.load(); });
    links_.push_back(link);
    pumps_.emplace_back([this, link] { Pump(link, /*upstream=*/true); });
    pumps_.emplace_back([this, link] { Pump(link, /*upstream=*/false); });
  }
}

void FaultProxy::Pump(std::shared_ptr<Link> link, bool upstream) {
  const int from = upstream ? link->client_fd : link->server_fd;
  const int to = upstream ? link->server_fd : link->client_fd;
  // Chunks read and not yet forwarded, each with the instant it may go: read as they come, so
  // latency delays bytes without limiting the bandwidth (as a long link does).
  std::deque<std::pair<absl::Time, std::string>> queue;
  absl::Time last_delivery = absl::InfinitePast();
  bool eof = false;
  char buffer[16 * 1024];
  auto stalled = [this] {
    absl::MutexLock lock(&mu_);
    return stalled_;
  };
  while (!link->closed && !stopping_) {
    if (stalled()) {  // nothing read, nothing forwarded: the kernel's buffers fill
      absl::SleepFor(absl::Milliseconds(2));
      continue;
    }
    absl::Time now = absl::Now();
    while (!queue.empty() && queue.front().first <= now) {
      if (!SendAll(to, queue.front().second.data(), queue.front().second.size())) {
        link->closed = true;
        return;
      }
      queue.pop_front();
    }
    if (eof && queue.empty()) {  // pass the half-close on and end this direction
      shutdown(to, SHUT_WR);
      if (++link->directions_done == 2) link->closed = true;
      return;
    }
    absl::Duration wait = kPoll;
    if (!queue.empty()) wait = std::clamp(queue.front().first - now, absl::ZeroDuration(), kPoll);
    if (eof) {
      absl::SleepFor(wait);
      continue;
    }
    pollfd waiting{from, POLLIN, 0};
    const int timeout_ms =
        static_cast<int>(absl::ToInt64Milliseconds(wait + absl::Microseconds(999)));
    if (poll(&waiting, 1, timeout_ms) <= 0) continue;
    const ssize_t n = recv(from, buffer, sizeof(buffer), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      link->closed = true;
      return;
    }
    if (n == 0) {
      eof = true;
      continue;
    }
    // In order, each chunk no earlier than its own arrival + delay.
    last_delivery = std::max(last_delivery, absl::Now() + NextDelay());
    queue.emplace_back(last_delivery, std::string(buffer, static_cast<size_t>(n)));
  }
}

}  // namespace orderhold::testing
