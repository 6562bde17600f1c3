// SentinelTopology: the primary of a Redis Sentinel deployment (--redis_mode=sentinel), found
// and followed as the Sentinel client guide says
// (https://redis.io/docs/reference/sentinel-clients/):
//
// - Resolve: ask the sentinels in order, each with a short timeout, `SENTINEL
//   get-master-addr-by-name <master>`; the first that answers an address moves to the front of
//   the list. No sentinel reachable and "no sentinel knows this master name" are distinct errors.
// - Follow: one connection SUBSCRIBEd to `+switch-master` on a sentinel: a switch of our master
//   changes the address at once (the generation goes up, so the client drops every connection to
//   the old primary before writing to it again). Pub/sub can miss events (the connection dies,
//   the sentinel restarts), so the address is also polled every `poll_interval`, and at once
//   (rate-limited) when a data connection reports the node is not a primary (READONLY,
//   MASTERDOWN, ROLE not master).
// - All of it runs on one background thread; NodeFor never blocks. While no primary is known
//   NodeFor answers UNAVAILABLE with the last discovery error, so health is NOT_SERVING and calls
//   fail fast; the thread keeps trying, so a server started while every sentinel is down serves
//   once they come up.
//
// Thread-safety: thread-safe.
#ifndef ORDERHOLD_SERVER_STORE_SENTINEL_TOPOLOGY_H_
#define ORDERHOLD_SERVER_STORE_SENTINEL_TOPOLOGY_H_

#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "prometheus/counter.h"
#include "server/store/redis_connection.h"
#include "server/store/redis_topology.h"

namespace orderhold::store {

struct SentinelOptions {
  // The sentinels, in the order to try them first (the URL's host list). Non-empty.
  std::vector<HostPort> sentinels;
  // The monitored master's name (--redis_sentinel_master). Non-empty.
  std::string master_name;
  // The sentinels' own ACL credentials (--redis_sentinel_username/password); empty: no AUTH.
  std::string username;
  std::string password;
  // TLS to the sentinels (rediss://: Redis' tls-replication governs the sentinel port too), or
  // null for plain TCP.
  std::shared_ptr<const TlsContext> tls;
  // Bound on connecting to one sentinel and on each of its answers ("a few hundreds of
  // milliseconds", says the guide).
  absl::Duration sentinel_timeout = absl::Milliseconds(300);
  // How often the address is asked again whatever pub/sub says.
  absl::Duration poll_interval = absl::Seconds(1);
  // Least time between two re-resolutions asked for by ReportNotPrimary.
  absl::Duration min_reresolve_interval = absl::Milliseconds(100);
  // orderhold_redis_failovers_total (primary address changes seen), or null.
  prometheus::Counter* failovers = nullptr;
};

class SentinelTopology final : public RedisTopology {
 public:
  // Validates `options` (INVALID_ARGUMENT naming the flag: no sentinel, empty master name) and
  // starts the background thread, which resolves at once. Does not wait for a sentinel: an
  // unreachable deployment at start is not an error (NodeFor says UNAVAILABLE until it is found).
  static absl::StatusOr<std::unique_ptr<SentinelTopology>> Create(SentinelOptions options);
  // Stops and joins the background thread (within about 100 ms).
  ~SentinelTopology() override;

  // The current primary, or UNAVAILABLE: "redis sentinel: no sentinel reachable (tried N: ...)"
  // or "redis sentinel: no sentinel knows master '<name>'" (before the first resolution: "redis
  // sentinel: primary not resolved yet").
  absl::StatusOr<HostPort> NodeFor(int slot) override;
  void ReportNotPrimary(const HostPort& address) override;

 private:
  explicit SentinelTopology(SentinelOptions options);
  void Run();
  // One resolution: asks the sentinels in order; updates the primary or the error.
  void Resolve();
  // Records `primary` (a change bumps the generation and counts a failover when there was one).
  void SetPrimary(const HostPort& primary, absl::string_view why);
  // Connects to a sentinel and AUTHs.
  absl::StatusOr<std::unique_ptr<RedisConnection>> ConnectSentinel(const HostPort& sentinel);

  const SentinelOptions options_;
  absl::Mutex mu_;
  std::vector<HostPort> order_ ABSL_GUARDED_BY(mu_);  // sentinels, the last that answered first
  std::optional<HostPort> primary_ ABSL_GUARDED_BY(mu_);
  absl::Status error_ ABSL_GUARDED_BY(mu_);
  bool reresolve_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace orderhold::store

#endif  // ORDERHOLD_SERVER_STORE_SENTINEL_TOPOLOGY_H_
