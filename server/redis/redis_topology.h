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
#ifndef ORDERHOLD_SERVER_REDIS_REDIS_TOPOLOGY_H_
#define ORDERHOLD_SERVER_REDIS_REDIS_TOPOLOGY_H_

#include <atomic>
#include <cstdint>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/redis/redis_connection.h"

namespace orderhold::redis {

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

  // Whether a new connection to `node` (as NodeFor named it), set up at `*generation` (read
  // before NodeFor) and connected to `peer` (RedisConnection::peer: the address the name resolved
  // to), may be used; on OK `*generation` is the generation it counts as made at. UNAVAILABLE
  // (the caller drops it) when the topology cannot vouch for it. Default: OK, unchanged (a
  // topology with discovery vouches through Refresh). Thread-safe.
  virtual absl::Status AcceptConnection(const HostPort& node, absl::string_view peer,
                                        uint64_t* generation) {
    (void)node;
    (void)peer;
    (void)generation;
    return absl::OkStatus();
  }

  // Whether new connections must check ROLE is "master" before use (the Sentinel client guide's
  // step 3); a node that is not gets ReportNotPrimary and the connect fails UNAVAILABLE.
  virtual bool verify_role() const { return true; }

 protected:
  void BumpGeneration() { generation_.fetch_add(1, std::memory_order_acq_rel); }

 private:
  std::atomic<uint64_t> generation_{0};
};

// One fixed address (--redis_mode=standalone). The name is resolved again on every connect
// (RedisConnection::Connect), which is how a DNS-based failover (managed Redis) is followed. A
// demoted primary keeps serving reads on its pooled connections (only a write gets READONLY),
// possibly behind the new primary, so a read must never go to a node not known to be the primary:
// - once any connection learns the node is not the primary (READONLY or MASTERDOWN on a call,
//   ROLE at connect: ReportNotPrimary), the generation goes up, so every pooled connection is
//   dropped and made again, resolving the name afresh;
// - a new connection that reached another address than the last one did (the name moved) does
//   the same before it is used (AcceptConnection), so no connection to the old address serves
//   anything once a write may have been acknowledged at the new one;
// - a new connection during which the generation went up is refused: it may have reached the old
//   node, which must not become the pool's address again.
// A name with several addresses that connects alternate between would reconnect the pool at each
// switch: a standalone primary's name is expected to have one.
class StandaloneTopology final : public RedisTopology {
 public:
  explicit StandaloneTopology(HostPort address) : address_(std::move(address)) {}
  absl::StatusOr<HostPort> NodeFor(int) override { return address_; }
  void ReportNotPrimary(const HostPort&) override {
    absl::MutexLock lock(&mu_);
    BumpGeneration();
  }
  absl::Status AcceptConnection(const HostPort& node, absl::string_view peer,
                                uint64_t* generation) override {
    absl::MutexLock lock(&mu_);
    if (*generation != this->generation()) {
      return absl::UnavailableError(
          absl::StrCat("redis: ", node.ToString(), " failed over while connecting; reconnecting"));
    }
    if (peer.empty() || peer == peer_) return absl::OkStatus();
    if (!peer_.empty()) BumpGeneration();  // the name moved: drop the connections to the old one
    peer_ = std::string(peer);
    *generation = this->generation();
    return absl::OkStatus();
  }

 private:
  const HostPort address_;
  absl::Mutex mu_;                         // orders generation changes with peer_
  std::string peer_ ABSL_GUARDED_BY(mu_);  // the address the last accepted connection reached
};

}  // namespace orderhold::redis

#endif  // ORDERHOLD_SERVER_REDIS_REDIS_TOPOLOGY_H_
