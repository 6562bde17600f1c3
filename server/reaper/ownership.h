// Ownership: which index partitions one reaper replica reaps, so that several replicas divide the
// work instead of doing it N times over.
//
// Each tick a replica renews its entry in the store's registry of live replicas (Heartbeat, alive
// for `membership_ttl`) and owns the partitions that rendezvous hashing over the live replicas
// gives it (OwnerOf: highest hash of (replica id, partition) wins, so every replica computes the
// same owner from the same view, and a join or leave moves only 1/N of the partitions). A
// per-partition lease, taken by the reap script itself, fences two replicas whose views briefly
// differ; partitions no longer owned have their leases released at once, and HandOver() (at stop)
// releases all and unregisters, so the others take over at their next tick. A replica killed
// without HandOver() drops out of the registry after membership_ttl and its leases expire on their
// own.
//
// Without a replica id there is no registry and no lease: the replica owns every partition (tests
// and single-process tools).
//
// Thread-safety: thread-safe.
#ifndef ORDERHOLD_SERVER_REAPER_OWNERSHIP_H_
#define ORDERHOLD_SERVER_REAPER_OWNERSHIP_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/store/partition_store.h"

namespace orderhold::reaper {

// A replica id unique enough for the registry: "<hostname>-<pid>-<random hex>".
std::string MakeReplicaId();

// The owner of `partition` among `replicas` by rendezvous (highest random weight) hashing; ""
// when `replicas` is empty. Stable across processes and versions (FNV-1a + splitmix64, not
// absl::Hash).
std::string OwnerOf(int partition, const std::vector<std::string>& replicas);

class Ownership {
 public:
  // `store` must outlive this object. `replica_id` empty: own everything, no registry. Each store
  // call is bounded by `call_timeout` (host clock).
  Ownership(store::PartitionStore& store, std::string replica_id, absl::Duration membership_ttl,
            absl::Duration call_timeout);
  Ownership(const Ownership&) = delete;
  Ownership& operator=(const Ownership&) = delete;

  // Heartbeat, then the partitions this replica owns now (ascending); releases the leases of the
  // partitions it no longer owns. `now` overrides the store clock (tests). On a failed heartbeat
  // (UNAVAILABLE, DEADLINE_EXCEEDED) returns the error and keeps the last view: owned() is
  // unchanged and the leases still fence any overlap.
  absl::StatusOr<std::vector<int>> Claim(std::optional<absl::Time> now);

  // The partitions owned at the last successful Claim() (none before the first, or after
  // HandOver()).
  std::vector<int> owned() const;

  // Releases the leases of the owned partitions and unregisters this replica (best effort, each
  // round bounded by call_timeout), so the others take its partitions over at their next tick.
  // No-op without a replica id.
  void HandOver();

  const std::string& replica_id() const { return replica_id_; }

 private:
  // Renews this replica in the registry; yields the live replicas (bounded by call_timeout).
  absl::StatusOr<std::vector<std::string>> Heartbeat(std::optional<absl::Time> now);
  // Releases the leases of `partitions` (best effort, bounded by call_timeout).
  void ReleaseLeases(const std::vector<int>& partitions);

  store::PartitionStore& store_;
  const std::string replica_id_;
  const absl::Duration membership_ttl_;
  const absl::Duration call_timeout_;
  mutable absl::Mutex mu_;
  std::vector<int> owned_ ABSL_GUARDED_BY(mu_);
};

}  // namespace orderhold::reaper

#endif  // ORDERHOLD_SERVER_REAPER_OWNERSHIP_H_
