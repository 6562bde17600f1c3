// Unit tests of orderhold-bench's statistics (client/bench/stats.h): percentiles, status-code
// accounting and the recorder. No server, no clock.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <thread>
#include <vector>

#include "client/bench/method.h"
#include "client/bench/stats.h"

namespace orderhold::client::bench {
namespace {

using ::testing::ElementsAre;

constexpr int kOk = 0;
constexpr int kCancelled = 1;
constexpr int kUnknown = 2;
constexpr int kInvalidArgument = 3;
constexpr int kDeadlineExceeded = 4;
constexpr int kNotFound = 5;
constexpr int kResourceExhausted = 8;
constexpr int kUnimplemented = 12;
constexpr int kInternal = 13;
constexpr int kUnavailable = 14;

int Index(Method method) { return static_cast<int>(method); }

// ---------------------------------------------------------------------------------------------
// NearestRankPercentile / ComputePercentiles

std::vector<int64_t> OneTo(int64_t n) {
  std::vector<int64_t> v;
  v.reserve(n);
  for (int64_t i = 1; i <= n; ++i) v.push_back(i);
  return v;
}

TEST(BenchPercentileTest, NearestRankOfOneToThousand) {
  const std::vector<int64_t> sorted = OneTo(1000);
  EXPECT_EQ(NearestRankPercentile(sorted, 50), 500);
  EXPECT_EQ(NearestRankPercentile(sorted, 90), 900);
  EXPECT_EQ(NearestRankPercentile(sorted, 99), 990);
  EXPECT_EQ(NearestRankPercentile(sorted, 99.9), 999);
  EXPECT_EQ(NearestRankPercentile(sorted, 100), 1000);
  EXPECT_EQ(NearestRankPercentile(sorted, 0.1), 1);
  EXPECT_EQ(NearestRankPercentile(sorted, 0.0001), 1);  // Rank clamped up to 1.
}

TEST(BenchPercentileTest, NearestRankRoundsUp) {
  // 10 samples: p50 is rank 5, p51 rank ceil(5.1) = 6.
  const std::vector<int64_t> sorted = OneTo(10);
  EXPECT_EQ(NearestRankPercentile(sorted, 50), 5);
  EXPECT_EQ(NearestRankPercentile(sorted, 51), 6);
  EXPECT_EQ(NearestRankPercentile(sorted, 99.9), 10);
}

TEST(BenchPercentileTest, NearestRankSingleAndEmpty) {
  EXPECT_EQ(NearestRankPercentile({42}, 50), 42);
  EXPECT_EQ(NearestRankPercentile({42}, 99.9), 42);
  EXPECT_EQ(NearestRankPercentile({}, 50), 0);
  EXPECT_EQ(NearestRankPercentile({}, 99.9), 0);
}

TEST(BenchPercentileTest, ComputePercentilesOfOneToThousandUnsorted) {
  std::vector<int64_t> samples = OneTo(1000);
  std::reverse(samples.begin(), samples.end());
  // Interleave a little more disorder.
  std::rotate(samples.begin(), samples.begin() + 333, samples.end());
  const LatencyPercentiles p = ComputePercentiles(samples);
  EXPECT_EQ(p.p50_ns, 500);
  EXPECT_EQ(p.p90_ns, 900);
  EXPECT_EQ(p.p99_ns, 990);
  EXPECT_EQ(p.p999_ns, 999);
  EXPECT_EQ(p.max_ns, 1000);
}

TEST(BenchPercentileTest, ComputePercentilesSingleSample) {
  const LatencyPercentiles p = ComputePercentiles({1234});
  EXPECT_EQ(p.p50_ns, 1234);
  EXPECT_EQ(p.p90_ns, 1234);
  EXPECT_EQ(p.p99_ns, 1234);
  EXPECT_EQ(p.p999_ns, 1234);
  EXPECT_EQ(p.max_ns, 1234);
}

TEST(BenchPercentileTest, ComputePercentilesEmptyIsAllZero) {
  const LatencyPercentiles p = ComputePercentiles({});
  EXPECT_EQ(p.p50_ns, 0);
  EXPECT_EQ(p.p90_ns, 0);
  EXPECT_EQ(p.p99_ns, 0);
  EXPECT_EQ(p.p999_ns, 0);
  EXPECT_EQ(p.max_ns, 0);
}

// ---------------------------------------------------------------------------------------------
// IsServiceError / CountServiceErrors / StatusCodeName

TEST(BenchStatusCodeTest, ServiceErrorCodes) {
  for (int code :
       {kCancelled, kUnknown, kDeadlineExceeded, kUnimplemented, kInternal, kUnavailable}) {
    EXPECT_TRUE(IsServiceError(code)) << StatusCodeName(code);
  }
}

TEST(BenchStatusCodeTest, AnswersAreNotServiceErrors) {
  for (int code : {kOk, kInvalidArgument, kNotFound, kResourceExhausted}) {
    EXPECT_FALSE(IsServiceError(code)) << StatusCodeName(code);
  }
}

TEST(BenchStatusCodeTest, ExactlySixServiceErrorCodes) {
  int n = 0;
  for (int code = 0; code < kNumStatusCodes; ++code) n += IsServiceError(code) ? 1 : 0;
  EXPECT_EQ(n, 6);
  EXPECT_FALSE(IsServiceError(-1));
  EXPECT_FALSE(IsServiceError(kNumStatusCodes));
}

TEST(BenchStatusCodeTest, CountServiceErrorsSumsOnlyServiceErrors) {
  CodeCounts codes{};
  for (int code = 0; code < kNumStatusCodes; ++code) codes[code] = 1000 + code;
  const int64_t expected = (1000 + kCancelled) + (1000 + kUnknown) + (1000 + kDeadlineExceeded) +
                           (1000 + kUnimplemented) + (1000 + kInternal) + (1000 + kUnavailable);
  EXPECT_EQ(CountServiceErrors(codes), expected);
}

TEST(BenchStatusCodeTest, CountServiceErrorsIgnoresAnswers) {
  CodeCounts codes{};
  codes[kOk] = 100;
  codes[kNotFound] = 7;
  codes[kResourceExhausted] = 3;
  codes[kInvalidArgument] = 2;
  EXPECT_EQ(CountServiceErrors(codes), 0);
  codes[kUnavailable] = 5;
  codes[kDeadlineExceeded] = 4;
  EXPECT_EQ(CountServiceErrors(codes), 9);
  EXPECT_EQ(CountServiceErrors(CodeCounts{}), 0);
}

TEST(BenchStatusCodeTest, CanonicalNames) {
  EXPECT_EQ(StatusCodeName(0), "OK");
  EXPECT_EQ(StatusCodeName(1), "CANCELLED");
  EXPECT_EQ(StatusCodeName(3), "INVALID_ARGUMENT");
  EXPECT_EQ(StatusCodeName(4), "DEADLINE_EXCEEDED");
  EXPECT_EQ(StatusCodeName(5), "NOT_FOUND");
  EXPECT_EQ(StatusCodeName(8), "RESOURCE_EXHAUSTED");
  EXPECT_EQ(StatusCodeName(14), "UNAVAILABLE");
  EXPECT_EQ(StatusCodeName(16), "UNAUTHENTICATED");
}

TEST(BenchStatusCodeTest, OutOfRangeNames) {
  EXPECT_EQ(StatusCodeName(17), "CODE_17");
  EXPECT_EQ(StatusCodeName(-1), "CODE_-1");
  EXPECT_EQ(StatusCodeName(1000), "CODE_1000");
}

// ---------------------------------------------------------------------------------------------
// Recorder

TEST(BenchRecorderTest, EmptyMerge) {
  Recorder recorder;
  const Recorder::Merged merged = recorder.Merge();
  for (int m = 0; m < kNumMethods; ++m) {
    EXPECT_TRUE(merged.samples_ns[m].empty());
    EXPECT_EQ(merged.codes[m], CodeCounts{});
  }
}

TEST(BenchRecorderTest, FourThreadsThenMergeCountsEverything) {
  constexpr int kThreads = 4;
  constexpr int kPerThread = 4200;  // a multiple of kNumMethods
  Recorder recorder;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&recorder, t] {
      for (int i = 0; i < kPerThread; ++i) {
        const Method method = static_cast<Method>(i % kNumMethods);
        const int code = (i % 10 == 0) ? kUnavailable : kOk;
        recorder.Record(method, code, int64_t{t} * 1'000'000 + i);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();

  const Recorder::Merged merged = recorder.Merge();
  int64_t samples = 0;
  int64_t ok = 0;
  int64_t unavailable = 0;
  for (int m = 0; m < kNumMethods; ++m) {
    EXPECT_EQ(merged.samples_ns[m].size(),
              static_cast<size_t>(kThreads * kPerThread / kNumMethods));
    samples += static_cast<int64_t>(merged.samples_ns[m].size());
    ok += merged.codes[m][kOk];
    unavailable += merged.codes[m][kUnavailable];
  }
  EXPECT_EQ(samples, kThreads * kPerThread);
  EXPECT_EQ(ok + unavailable, kThreads * kPerThread);
  EXPECT_EQ(unavailable, kThreads * kPerThread / 10);

  // Every sample, from every thread, exactly once.
  std::vector<int64_t> all;
  for (const auto& method_samples : merged.samples_ns) {
    all.insert(all.end(), method_samples.begin(), method_samples.end());
  }
  std::sort(all.begin(), all.end());
  std::vector<int64_t> expected;
  for (int t = 0; t < kThreads; ++t) {
    for (int i = 0; i < kPerThread; ++i) expected.push_back(int64_t{t} * 1'000'000 + i);
  }
  EXPECT_EQ(all, expected);
}

TEST(BenchRecorderTest, OutOfRangeCodeCountedAsUnknown) {
  Recorder recorder;
  recorder.Record(Method::kPay, 99, 1);
  recorder.Record(Method::kPay, -3, 2);
  const Recorder::Merged merged = recorder.Merge();
  EXPECT_EQ(merged.codes[Index(Method::kPay)][kUnknown], 2);
  EXPECT_EQ(merged.samples_ns[Index(Method::kPay)].size(), 2u);
}

TEST(BenchRecorderTest, InvalidMethodIgnored) {
  Recorder recorder;
  recorder.Record(Method::kCount, kOk, 1);
  const Recorder::Merged merged = recorder.Merge();
  for (int m = 0; m < kNumMethods; ++m) EXPECT_TRUE(merged.samples_ns[m].empty());
}

TEST(BenchRecorderTest, TwoRecordersOnOneThreadStaySeparate) {
  Recorder a;
  Recorder b;
  a.Record(Method::kPlaceHold, kOk, 1);
  b.Record(Method::kPlaceHold, kOk, 2);
  a.Record(Method::kPlaceHold, kOk, 3);
  EXPECT_THAT(a.Merge().samples_ns[Index(Method::kPlaceHold)], ElementsAre(1, 3));
  EXPECT_THAT(b.Merge().samples_ns[Index(Method::kPlaceHold)], ElementsAre(2));
}

}  // namespace
}  // namespace orderhold::client::bench
