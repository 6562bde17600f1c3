// orderhold-bench's statistics: exact latency percentiles, the accounting of gRPC status codes
// (which ones count as errors of the service), and the Recorder that collects every call's result
// from gRPC's callback threads without a lock on the hot path. Percentiles are exact, not
// estimated from a histogram: every sample is kept (8 bytes a call) and sorted once, after the run.
#ifndef ORDERHOLD_CLIENT_BENCH_STATS_H_
#define ORDERHOLD_CLIENT_BENCH_STATS_H_

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "client/bench/method.h"

namespace orderhold::client::bench {

// Number of gRPC status codes (OK = 0 .. UNAUTHENTICATED = 16).
inline constexpr int kNumStatusCodes = 17;

// Calls per gRPC status code, indexed by the numeric code.
using CodeCounts = std::array<int64_t, kNumStatusCodes>;

// True for codes that mean the service (or the network) failed rather than answered:
// CANCELLED, UNKNOWN, DEADLINE_EXCEEDED, UNIMPLEMENTED, INTERNAL, UNAVAILABLE. NOT_FOUND,
// RESOURCE_EXHAUSTED and INVALID_ARGUMENT are answers, not failures. Pure.
bool IsServiceError(int code);

// Sum of the counts of the codes for which IsServiceError holds. Pure.
int64_t CountServiceErrors(const CodeCounts& codes);

// The canonical name of a gRPC status code ("OK", "NOT_FOUND", ...); "CODE_<n>" when out of range.
// Pure.
std::string StatusCodeName(int code);

// Latency percentiles of a set of samples, nanoseconds. All zero when there are no samples.
struct LatencyPercentiles {
  int64_t p50_ns = 0;
  int64_t p90_ns = 0;
  int64_t p99_ns = 0;
  int64_t p999_ns = 0;
  int64_t max_ns = 0;
};

// The nearest-rank percentile of ascending-sorted `sorted`: the smallest sample such that at
// least `percentile` percent of the samples are <= it, i.e. sorted[ceil(p/100 * n) - 1] (index
// clamped to [0, n-1]). percentile in (0, 100]. 0 for an empty vector. Pure.
int64_t NearestRankPercentile(const std::vector<int64_t>& sorted, double percentile);

// Sorts `samples_ns` and returns its exact nearest-rank p50/p90/p99/p99.9 and max. Pure.
LatencyPercentiles ComputePercentiles(std::vector<int64_t> samples_ns);

// Records call results without taking a lock on the hot path: each thread appends to its own
// buffer, registered (under a mutex) the first time that thread records into this Recorder.
// Record is thread-safe. Merge must not run concurrently with Record (call it once all calls
// have finished). The buffers belong to the Recorder, so threads may exit before Merge.
class Recorder {
 public:
  Recorder();
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;

  // Records one completed call: its method, numeric gRPC status code (0..16; others are counted
  // as UNKNOWN) and latency in nanoseconds. A method outside [0, kNumMethods) is ignored.
  void Record(Method method, int code, int64_t latency_ns);

  // Everything recorded, from every thread, per method.
  struct Merged {
    // Latency samples per method, nanoseconds, unsorted.
    std::array<std::vector<int64_t>, kNumMethods> samples_ns;
    std::array<CodeCounts, kNumMethods> codes{};
  };
  // All samples and counts recorded so far, from every thread.
  Merged Merge() const;

 private:
  struct ThreadBuffer {
    std::array<std::vector<int64_t>, kNumMethods> samples_ns;
    std::array<CodeCounts, kNumMethods> codes{};
  };
  // This thread's buffer for this Recorder, registering one if needed.
  ThreadBuffer* LocalBuffer();

  // Distinguishes Recorders in the thread_local cache (an address could be reused).
  const uint64_t id_;
  mutable absl::Mutex mu_;
  std::vector<std::unique_ptr<ThreadBuffer>> buffers_ ABSL_GUARDED_BY(mu_);
};

}  // namespace orderhold::client::bench

#endif  // ORDERHOLD_CLIENT_BENCH_STATS_H_
