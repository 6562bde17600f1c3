#include "client/bench/stats.h"

#include <grpcpp/support/status.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace orderhold::client::bench {
namespace {

// Distinguishes Recorder instances in the thread_local buffer cache; an id is never reused,
// unlike an address.
std::atomic<uint64_t> next_recorder_id{1};

}  // namespace

bool IsServiceError(int code) {
  switch (static_cast<grpc::StatusCode>(code)) {
    case grpc::StatusCode::CANCELLED:
    case grpc::StatusCode::UNKNOWN:
    case grpc::StatusCode::DEADLINE_EXCEEDED:
    case grpc::StatusCode::UNIMPLEMENTED:
    case grpc::StatusCode::INTERNAL:
    case grpc::StatusCode::UNAVAILABLE:
      return true;
    default:
      return false;
  }
}

int64_t CountServiceErrors(const CodeCounts& codes) {
  int64_t errors = 0;
  for (int code = 0; code < kNumStatusCodes; ++code) {
    if (IsServiceError(code)) errors += codes[code];
  }
  return errors;
}

std::string StatusCodeName(int code) {
  if (code < 0 || code >= kNumStatusCodes) return absl::StrCat("CODE_", code);
  // absl::StatusCode uses gRPC's numbering and names.
  return absl::StatusCodeToString(static_cast<absl::StatusCode>(code));
}

int64_t NearestRankPercentile(const std::vector<int64_t>& sorted, double percentile) {
  if (sorted.empty()) return 0;
  const double n = static_cast<double>(sorted.size());
  // The relative nudge undoes floating-point error such as 99.9 * 1000 / 100 = 999.0000000000001,
  // whose ceiling would be one rank too high.
  int64_t rank = static_cast<int64_t>(std::ceil(percentile / 100.0 * n * (1 - 1e-12)));
  rank = std::clamp<int64_t>(rank, 1, static_cast<int64_t>(sorted.size()));
  return sorted[rank - 1];
}

LatencyPercentiles ComputePercentiles(std::vector<int64_t> samples_ns) {
  LatencyPercentiles out;
  if (samples_ns.empty()) return out;
  std::sort(samples_ns.begin(), samples_ns.end());
  out.p50_ns = NearestRankPercentile(samples_ns, 50);
  out.p90_ns = NearestRankPercentile(samples_ns, 90);
  out.p99_ns = NearestRankPercentile(samples_ns, 99);
  out.p999_ns = NearestRankPercentile(samples_ns, 99.9);
  out.max_ns = samples_ns.back();
  return out;
}

Recorder::Recorder() : id_(next_recorder_id.fetch_add(1, std::memory_order_relaxed)) {}

Recorder::ThreadBuffer* Recorder::LocalBuffer() {
  // One cached buffer per thread, for the Recorder that thread used last (in practice the only
  // one). A thread switching Recorders registers a fresh buffer, which is correct, only slower.
  thread_local uint64_t cached_id = 0;
  thread_local ThreadBuffer* cached = nullptr;
  if (cached_id == id_) return cached;
  auto buffer = std::make_unique<ThreadBuffer>();
  ThreadBuffer* raw = buffer.get();
  {
    absl::MutexLock lock(&mu_);
    buffers_.push_back(std::move(buffer));
  }
  cached_id = id_;
  cached = raw;
  return raw;
}

void Recorder::Record(Method method, int code, int64_t latency_ns) {
  const int m = static_cast<int>(method);
  if (m < 0 || m >= kNumMethods) return;
  if (code < 0 || code >= kNumStatusCodes) code = static_cast<int>(grpc::StatusCode::UNKNOWN);
  ThreadBuffer* buffer = LocalBuffer();
  buffer->samples_ns[m].push_back(latency_ns);
  ++buffer->codes[m][code];
}

Recorder::Merged Recorder::Merge() const {
  Merged merged;
  absl::MutexLock lock(&mu_);
  for (int m = 0; m < kNumMethods; ++m) {
    size_t total = 0;
    for (const auto& buffer : buffers_) total += buffer->samples_ns[m].size();
    merged.samples_ns[m].reserve(total);
    for (const auto& buffer : buffers_) {
      merged.samples_ns[m].insert(merged.samples_ns[m].end(), buffer->samples_ns[m].begin(),
                                  buffer->samples_ns[m].end());
      for (int code = 0; code < kNumStatusCodes; ++code) {
        merged.codes[m][code] += buffer->codes[m][code];
      }
    }
  }
  return merged;
}

}  // namespace orderhold::client::bench
