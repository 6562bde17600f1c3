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
//   MASTERDOWN, ROLE not master). The subscription is PINGed every 100 ms (as redis-py's
//   health_check_interval does for pub/sub): a message is seen within that, and a dead or hung
//   subscription within that plus node.connect_timeout; it is then made again, on the first
//   sentinel that accepts, and the address polled at once to cover the gap.
// - All of it runs on one background thread; NodeFor never blocks. While no primary is known
//   NodeFor answers UNAVAILABLE with the last discovery error, so health is NOT_SERVING and calls
//   fail fast; the thread keeps trying, so a server started while every sentinel is down serves
//   once they come up.
//
// Thread-safety: thread-safe.
#ifndef ORDERHOLD_SERVER_REDIS_SENTINEL_TOPOLOGY_H_
#define ORDERHOLD_SERVER_REDIS_SENTINEL_TOPOLOGY_H_

#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "prometheus/counter.h"
#include "server/redis/redis_connection.h"
#include "server/redis/redis_reply.h"
#include "server/redis/redis_topology.h"
#include "server/redis/refresh_schedule.h"

namespace orderhold::redis {

struct SentinelOptions {
  // The sentinels, in the order to try them first (the URL's host list). Non-empty.
  std::vector<HostPort> sentinels;
  // The monitored master's name (--redis_sentinel_master). Non-empty.
  std::string master_name;
  // How to reach the sentinels: their own ACL credentials (--redis_sentinel_username/password;
  // empty: no AUTH), TLS (rediss://: Redis' tls-replication governs the sentinel port too; null:
  // plain TCP), the bound on connecting to one sentinel and on each of its answers ("a few
  // hundreds of milliseconds", says the guide), and CLIENT SETNAME, suffixed so that CLIENT LIST
  // on a sentinel shows who they are: "<client_name>-poll" and "<client_name>-subscription".
  NodeOptions node = TopologyNodeOptions();
  // How often the address is asked again whatever pub/sub says. > 0.
  absl::Duration poll_interval = absl::Seconds(1);
  // Least time between two re-resolutions asked for by ReportNotPrimary. >= 0.
  absl::Duration min_reresolve_interval = absl::Milliseconds(100);
  // Follow `+switch-master` over pub/sub (the fast path). false: poll only (for sentinels whose
  // ACL grants no SUBSCRIBE, as the guide's minimal client ACL, and for tests of the poll). When
  // the sentinels refuse SUBSCRIBE the topology polls anyway and asks again every 30 s.
  bool subscribe = true;
  // orderhold_redis_failovers_total (primary address changes seen), or null.
  prometheus::Counter* failovers = nullptr;
};

class SentinelTopology final : public RedisTopology {
 public:
  // Validates `options` (INVALID_ARGUMENT naming the flag: no sentinel, empty master name, a
  // username without a password, a non-positive timeout or interval, a client_name that is not
  // one word), asks the sentinels once (at most node.connect_timeout per sentinel: a server whose
  // sentinels are up knows its primary from the start), and starts the background thread. An
  // unreachable deployment at start is not an error (NodeFor says UNAVAILABLE until it is found).
  static absl::StatusOr<std::unique_ptr<SentinelTopology>> Create(SentinelOptions options);
  // Stops and joins the background thread: at once when it is idle, else once the sentinel it is
  // waiting for answers or times out (at most one node.connect_timeout).
  ~SentinelTopology() override;

  // The current primary, or UNAVAILABLE: "redis sentinel: no sentinel reachable (tried N: ...)"
  // or "redis sentinel: no sentinel knows master '<name>'" (before the first resolution: "redis
  // sentinel: primary not resolved yet"). Once a primary is known it stays the answer while the
  // sentinels cannot be asked (it is logged): sentinels down do not mean the primary is, and a
  // stale one is caught by the ROLE check and READONLY (ReportNotPrimary).
  absl::StatusOr<HostPort> NodeFor(int slot) override;
  // Re-resolves at once (at most once per min_reresolve_interval) when `address` is the current
  // primary; a report about an older primary is ignored (the change is already known).
  void ReportNotPrimary(const HostPort& address) override;
  // Wakes the background thread for a new resolution (coalesced with other callers', at most one
  // per min_reresolve_interval) and waits until one that started after this call has finished,
  // or `deadline` (UNAVAILABLE "redis sentinel: no answer in time"); then answers as NodeFor.
  absl::StatusOr<HostPort> Refresh(int slot, absl::Time deadline) override;

 private:
  explicit SentinelTopology(SentinelOptions options);
  void Run();
  // One resolution: asks the sentinels in order; updates the primary or the error. `why` names
  // the trigger in the log ("poll", "ReportNotPrimary", "poll after resubscribing").
  void Resolve(absl::string_view why);
  // Records `primary` (a change bumps the generation and counts a failover when there was one).
  void SetPrimary(const HostPort& primary, absl::string_view why);
  // Records a failed resolution (logged when the message changes).
  void SetError(absl::Status error);
  // Connects to a sentinel, AUTHs and names the connection node.client_name + `name_suffix`
  // (CLIENT SETNAME, in the same round trip; a refusal, e.g. by an ACL, is ignored), by
  // `deadline`.
  absl::StatusOr<std::unique_ptr<RedisConnection>> ConnectSentinel(const HostPort& sentinel,
                                                                   absl::Time deadline,
                                                                   absl::string_view name_suffix);
  // Asks one sentinel for the master's address: the address, nullopt when it does not know the
  // name, or the error (reusing poll_connection_ when it is to this sentinel).
  absl::StatusOr<std::optional<HostPort>> AskSentinel(const HostPort& sentinel);
  // SUBSCRIBEs to +switch-master on the first sentinel that accepts. Else PERMISSION_DENIED when
  // a sentinel refused SUBSCRIBE (its ACL), UNAVAILABLE when none could be asked.
  absl::Status Subscribe();
  // How long to wait before subscribing again after `failure`: poll_interval, or 30 s after a
  // refusal (it will not go away soon; polling goes on meanwhile).
  absl::Duration SubscribeRetry(const absl::Status& failure) const;
  // PINGs the subscription and handles every message that came before the PONG; drops the
  // subscription (false) when it fails. The PING bounds how long a dead subscription goes unseen
  // (RedisConnection::Read breaks the connection on a timeout, so it cannot just wait in slices).
  bool PumpSubscription();
  // A +switch-master for our master: followed when it starts from the primary we know (or none is
  // known yet); else (an old event, or one was missed) the sentinels are asked again.
  void OnSwitchMaster(const HostPort& from, const HostPort& to);
  bool stopping() const { return schedule_.stopping(); }

  const SentinelOptions options_;
  absl::Mutex mu_;
  std::vector<HostPort> order_ ABSL_GUARDED_BY(mu_);  // sentinels, the last that answered first
  std::optional<HostPort> primary_ ABSL_GUARDED_BY(mu_);
  absl::Status error_ ABSL_GUARDED_BY(mu_);  // the last discovery error; OK after a success
  // When to resolve: every poll_interval, and when asked (ReportNotPrimary, a switch that does
  // not start from what we know), min_reresolve_interval apart.
  RefreshSchedule schedule_;
  // Used by the background thread only.
  std::unique_ptr<RedisConnection> poll_connection_;  // to the sentinel that last answered
  std::unique_ptr<RedisConnection> subscription_;     // SUBSCRIBEd to +switch-master
  bool subscribe_failing_ = false;                    // the last Subscribe() failed (logged once)
  std::thread thread_;
};

// Pure parts of SentinelTopology, exposed for unit tests. Thread-safe (no state).
namespace sentinel_internal {

// The answer to `SENTINEL get-master-addr-by-name <name>`: the address (["ip", "port"]), nullopt
// for a nil reply (the sentinel does not know the name), UNAVAILABLE for an error reply
// ("... answered: <error>") or any other shape, naming `sentinel`.
absl::StatusOr<std::optional<HostPort>> ParseMasterAddrReply(const RedisReply& reply,
                                                             const HostPort& sentinel);

// A switch of a master, as `+switch-master` announces it.
struct MasterSwitch {
  HostPort from;
  HostPort to;
  friend bool operator==(const MasterSwitch&, const MasterSwitch&) = default;
};
// A pub/sub message ["message", "+switch-master", "<name> <oldip> <oldport> <newip> <newport>"]:
// the switch when it is about `master_name`, else nullopt (another master, another message or
// channel, a subscribe confirmation, a malformed payload).
std::optional<MasterSwitch> ParseSwitchMaster(const RedisReply& message,
                                              absl::string_view master_name);

// True for the answer to PING on a subscribed connection (["pong", ""] in RESP2).
bool IsSubscribedPong(const RedisReply& reply);

// What one sentinel said to a resolution that found no address: OK when it answered that it does
// not know the master, else why it could not be asked.
struct Attempt {
  HostPort sentinel;
  absl::Status error;
};
// The discovery error (UNAVAILABLE) after every sentinel was asked and none gave an address:
// "redis sentinel: no sentinel knows master '<name>' (...)" when at least one answered that it
// does not know it, else "redis sentinel: no sentinel reachable (tried N: <each error>)".
absl::Status DiscoveryError(absl::string_view master_name, const std::vector<Attempt>& attempts);

}  // namespace sentinel_internal
}  // namespace orderhold::redis

#endif  // ORDERHOLD_SERVER_REDIS_SENTINEL_TOPOLOGY_H_
