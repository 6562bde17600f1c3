#include "server/reaper/ownership.h"

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <utility>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/common/log.h"
#include "server/common/status_macros.h"

namespace orderhold::reaper {
namespace {

// FNV-1a 64 of "<replica>/<partition>": stable across processes (unlike absl::Hash).
uint64_t Weight(const std::string& replica, int partition) {
  uint64_t hash = 14695981039346656037ull;
  auto mix = [&hash](absl::string_view bytes) {
    for (unsigned char c : bytes) {
      hash ^= c;
      hash *= 1099511628211ull;
    }
  };
  mix(replica);
  mix(absl::StrCat("/", partition));
  // FNV's low bits mix poorly for inputs differing only at the end: finalize (splitmix64).
  hash ^= hash >> 30;
  hash *= 0xbf58476d1ce4e5b9ull;
  hash ^= hash >> 27;
  hash *= 0x94d049bb133111ebull;
  return hash ^ (hash >> 31);
}

}  // namespace

std::string MakeReplicaId() {
  char host[256] = {0};
  if (gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
  absl::BitGen random;
  return absl::StrCat(host[0] != '\0' ? host : "orderhold", "-", getpid(), "-",
                      absl::Hex(absl::Uniform<uint32_t>(random), absl::kZeroPad8));
}

std::string OwnerOf(int partition, const std::vector<std::string>& replicas) {
  const std::string* best = nullptr;
  uint64_t best_weight = 0;
  for (const std::string& replica : replicas) {
    const uint64_t weight = Weight(replica, partition);
    if (best == nullptr || weight > best_weight || (weight == best_weight && replica < *best)) {
      best = &replica;
      best_weight = weight;
    }
  }
  return best == nullptr ? "" : *best;
}

Ownership::Ownership(store::PartitionStore& store, std::string replica_id,
                     absl::Duration membership_ttl, absl::Duration call_timeout)
    : store_(store),
      replica_id_(std::move(replica_id)),
      membership_ttl_(membership_ttl),
      call_timeout_(call_timeout) {}

std::vector<int> Ownership::owned() const {
  absl::MutexLock lock(&mu_);
  return owned_;
}

absl::StatusOr<std::vector<int>> Ownership::Claim(std::optional<absl::Time> now) {
  std::vector<int> all(store_.partition_count());
  for (int i = 0; i < store_.partition_count(); ++i) all[i] = i;
  if (replica_id_.empty()) {
    absl::MutexLock lock(&mu_);
    owned_ = all;
    return all;
  }

  ORDERHOLD_ASSIGN_OR_RETURN(const std::vector<std::string> replicas, Heartbeat(now));
  const std::vector<int> previous = owned();
  std::vector<int> mine, lost;
  for (int partition : all) {
    if (OwnerOf(partition, replicas) == replica_id_) mine.push_back(partition);
  }
  std::set_difference(previous.begin(), previous.end(), mine.begin(), mine.end(),
                      std::back_inserter(lost));
  if (!lost.empty()) ReleaseLeases(lost);
  if (mine != previous) {
    LogInfo("reaper: ", replica_id_, " owns ", mine.size(), " of ", all.size(), " partitions (",
            replicas.size(), " live replicas)");
  }
  absl::MutexLock lock(&mu_);
  owned_ = mine;
  return mine;
}

absl::StatusOr<std::vector<std::string>> Ownership::Heartbeat(std::optional<absl::Time> now) {
  const store::CallOptions call{absl::Now() + call_timeout_, now};
  return Await<std::vector<std::string>>(
      [&](auto done) { store_.Heartbeat(replica_id_, membership_ttl_, call, std::move(done)); });
}

void Ownership::ReleaseLeases(const std::vector<int>& partitions) {
  const store::CallOptions call{absl::Now() + call_timeout_, std::nullopt};
  AwaitAll<bool>(partitions.size(), [&](size_t i, auto done) {
    store_.ReleaseLease(partitions[i], replica_id_, call, std::move(done));
  });
}

void Ownership::HandOver() {
  if (replica_id_.empty()) return;
  std::vector<int> partitions;
  {
    absl::MutexLock lock(&mu_);
    partitions.swap(owned_);
  }
  if (!partitions.empty()) ReleaseLeases(partitions);
  const store::CallOptions call{absl::Now() + call_timeout_, std::nullopt};
  (void)Await<bool>([&](auto done) { store_.Unregister(replica_id_, call, std::move(done)); });
}

}  // namespace orderhold::reaper
