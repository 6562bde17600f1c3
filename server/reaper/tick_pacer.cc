#include "server/reaper/tick_pacer.h"

#include <algorithm>
#include <utility>

namespace orderhold::reaper {

TickPacer::TickPacer(std::vector<int> partitions, absl::Time start, PaceOptions options)
    : partitions_(std::move(partitions)), start_(start), options_(options) {
  int size = 0;
  for (int partition : partitions_) size = std::max(size, partition + 1);
  calls_done_.assign(size, 0);
  skipped_.assign(size, false);
}

absl::Time TickPacer::SlotOf(size_t k) const {
  return start_ +
         options_.window * static_cast<double>(k) / static_cast<double>(partitions_.size());
}

bool TickPacer::full() const { return in_flight_ >= std::max(1, options_.max_in_flight); }

std::optional<int> TickPacer::Next(absl::Time now) {
  if (abandoned_ || full()) return std::nullopt;
  if (!follow_ups_.empty()) {
    const int partition = follow_ups_.front();
    follow_ups_.pop_front();
    ++in_flight_;
    return partition;
  }
  if (next_first_ < partitions_.size() && SlotOf(next_first_) <= now) {
    ++in_flight_;
    const int partition = partitions_[next_first_++];
    PassSkipped();
    return partition;
  }
  return std::nullopt;
}

void TickPacer::Skip(int partition) {
  skipped_[partition] = true;
  PassSkipped();
}

void TickPacer::PassSkipped() {
  while (next_first_ < partitions_.size() && skipped_[partitions_[next_first_]]) ++next_first_;
}

void TickPacer::Done(int partition, bool more) {
  --in_flight_;
  const int calls = ++calls_done_[partition];
  if (!more) return;
  if (calls < options_.max_calls_per_partition) {
    follow_ups_.push_back(partition);
  } else {
    left_.push_back(partition);
  }
}

absl::Time TickPacer::next_slot() const {
  if (abandoned_ || next_first_ >= partitions_.size()) return absl::InfiniteFuture();
  return SlotOf(next_first_);
}

bool TickPacer::finished() const {
  if (in_flight_ > 0) return false;
  if (abandoned_) return true;
  return follow_ups_.empty() && next_first_ >= partitions_.size();
}

bool TickPacer::first_call(int partition) const { return calls_done_[partition] == 0; }

}  // namespace orderhold::reaper
