// FaultProxy: a TCP proxy on a free loopback port, placed between the code under test and a
// server (Redis), that injects the network faults a kernel without `tc netem` cannot: latency with
// jitter, stalls (bytes held, connections kept), resets (every connection closed with RST) and
// refusing new connections. Toxiproxy's idea (https://github.com/Shopify/toxiproxy), which Debian
// does not package; no protocol knowledge: bytes are forwarded as they come.
//
//   auto proxy = FaultProxy::Start("127.0.0.1", redis->port());
//   config.redis_url = ParsedRedisUrl(absl::StrCat("redis://127.0.0.1:", (*proxy)->port()));
//   (*proxy)->SetLatency(absl::Milliseconds(50), absl::Milliseconds(20));  // 50 +- 20 ms a chunk
//   (*proxy)->Stall();  ...  (*proxy)->Resume();
//   (*proxy)->ResetAll();
//
// One thread per direction of each connection (tests open tens of connections, not thousands).
// Latency delays each chunk read from one side by latency +- jitter (uniform) before it is
// written to the other, in order; chunks are read as they come, so latency does not limit the
// bandwidth. A stall stops reading and forwarding in both directions (the kernel buffers until
// its windows fill); Resume() lets the held bytes through.
// Thread-safe. The destructor closes everything and joins its threads.
#ifndef ORDERHOLD_TESTS_TESTING_FAULT_PROXY_H_
#define ORDERHOLD_TESTS_TESTING_FAULT_PROXY_H_

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace orderhold::testing {

class FaultProxy {
 public:
  // Listens on 127.0.0.1:<free port> and forwards each connection to host:port. INTERNAL when
  // the listening socket cannot be made.
  static absl::StatusOr<std::unique_ptr<FaultProxy>> Start(std::string host, int port);
  ~FaultProxy();
  FaultProxy(const FaultProxy&) = delete;
  FaultProxy& operator=(const FaultProxy&) = delete;

  int port() const { return port_; }

  // Each chunk is delayed latency +- jitter (>= 0) before it is forwarded. Zero: none.
  void SetLatency(absl::Duration latency, absl::Duration jitter = absl::ZeroDuration());
  // Holds every byte in both directions until Resume(); connections stay open.
  void Stall();
  void Resume();
  // Closes every open connection with RST (SO_LINGER 0) on both sides, as a peer or middlebox
  // that resets does. New connections are accepted as before.
  void ResetAll();
  // While set, new connections are accepted and closed at once with RST (a server that is down).
  void RefuseNew(bool refuse);

  // Connections accepted so far, and connections reset by ResetAll/RefuseNew.
  int accepted() const { return accepted_.load(); }
  int resets() const { return resets_.load(); }

 private:
  struct Link;
  FaultProxy(std::string host, int target_port, int listener, int port);
  void AcceptLoop();
  void Pump(std::shared_ptr<Link> link, bool upstream);
  // How long the next chunk waits, from the latency settings.
  absl::Duration NextDelay();

  const std::string host_;
  const int target_port_;
  const int listener_;
  const int port_;
  std::atomic<bool> stopping_{false};
  std::atomic<int> accepted_{0}, resets_{0};
  std::thread acceptor_;
  absl::Mutex mu_;
  absl::Duration latency_ ABSL_GUARDED_BY(mu_);
  absl::Duration jitter_ ABSL_GUARDED_BY(mu_);
  bool stalled_ ABSL_GUARDED_BY(mu_) = false;
  bool refuse_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t random_ ABSL_GUARDED_BY(mu_) = 0x9e3779b97f4a7c15;
  std::vector<std::shared_ptr<Link>> links_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> pumps_ ABSL_GUARDED_BY(mu_);
};

}  // namespace orderhold::testing

#endif  // ORDERHOLD_TESTS_TESTING_FAULT_PROXY_H_
