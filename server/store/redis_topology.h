// RedisTopology: "which node" — the node a command must go to, and when that changes. The
// connection layer (redis_client.h) asks it before every connect and drops every connection made
// before a change, so that after a failover nothing more is written to the old primary.
//
// Modes (--redis_mode): standalone (StandaloneTopology, below: one address, re-resolved by DNS on
// every connect, as a managed Redis fails over by moving its DNS name) and sentinel
// (sentinel_topology.h). Redis Cluster answers per slot, hence NodeFor(slot); standalone and
// Sentinel serve every slot from their one primary.
//
// Thread-safety: every method is thread-safe.
#ifndef ORDERHOLD_SERVER_STORE_REDIS_TOPOLOGY_H_
#define ORDERHOLD_SERVER_STORE_REDIS_TOPOLOGY_H_

#include <atomic>
#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/store/redis_connection.h"

namespace orderhold::store {

class RedisTopology {
 public:
  // NodeFor's argument for a command without a key (any primary will do).
  static constexpr int kAnySlot = -1;

  virtual ~RedisTopology() = default;

  // The primary that serves `slot` (0-16383, or kAnySlot). UNAVAILABLE, saying why, while no
  // primary is known (Sentinel: no sentinel reachable, or none knows the master name). Never
  // blocks on I/O: a topology with discovery does it in the background.
  virtual absl::StatusOr<HostPort> NodeFor(int slot) = 0;

  // Asks the source of truth again instead of answering from memory, waiting for the answer until
  // `deadline`: the Sentinel client guide's "re-resolve on every reconnect". The client calls it
  // once a new connection is set up and drops the connection unless it names the same node, so a
  // connect that started before a failover and completed after it (an old primary that hung and
  // resumed still answers as master for seconds) is never used. UNAVAILABLE as NodeFor, or when
  // no answer came by `deadline`. Default: NodeFor (a fixed address has nothing to ask).
  virtual absl::StatusOr<HostPort> Refresh(int slot, absl::Time deadline) {
    (void)deadline;
    return NodeFor(slot);
  }

  // Goes up by one at every change of a primary's address (a failover seen). A connection made
  // at an older generation must be dropped before anything more is written to it.
  uint64_t generation() const { return generation_.load(std::memory_order_acquire); }

  // A connection to `address` learnt it is not a primary (READONLY, MASTERDOWN, or ROLE answered
  // "slave" at connect): re-resolve soon. The caller drops that connection itself.
  virtual void ReportNotPrimary(const HostPort& address) = 0;

  // Whether new connections must check ROLE is "master" before use (the Sentinel client guide's
  // step 3); a node that is not gets ReportNotPrimary and the connect fails UNAVAILABLE.
  virtual bool verify_role() const { return true; }

 protected:
  void BumpGeneration() { generation_.fetch_add(1, std::memory_order_acq_rel); }

 private:
  std::atomic<uint64_t> generation_{0};
};

// One fixed address (--redis_mode=standalone). The name is resolved again on every connect
// (RedisConnection::Connect), which is how a DNS-based failover (managed Redis) is followed;
// ReportNotPrimary has nothing to re-resolve beyond that, so it does nothing.
class StandaloneTopology final : public RedisTopology {
 public:
  explicit StandaloneTopology(HostPort address) : address_(std::move(address)) {}
  absl::StatusOr<HostPort> NodeFor(int) override { return address_; }
  void ReportNotPrimary(const HostPort&) override {}

 private:
  const HostPort address_;
};

}  // namespace orderhold::store

#endif  // ORDERHOLD_SERVER_STORE_REDIS_TOPOLOGY_H_
