// Unit tests of orderhold-bench's pure functions and small classes (client/bench/load_generator.h):
// mix parsing and method picking, percentiles, status-code accounting, JSON quoting and the JSON
// report, the hold pool, the recorder, the user picker and option validation. No server, no clock.
// The few randomised tests (UserPicker) use large samples and bounds many standard deviations
// wide, so they do not flake.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/bench/load_generator.h"

namespace orderhold::client::bench {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

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
// ParseMix / FormatMix / MethodName / MethodMixKey

TEST(BenchMixTest, ParsesAllThreeKeys) {
  const absl::StatusOr<Mix> mix = ParseMix("place=70,pay=20,list=10");
  ASSERT_TRUE(mix.ok()) << mix.status();
  EXPECT_EQ(mix->weights[Index(Method::kPlaceHold)], 70);
  EXPECT_EQ(mix->weights[Index(Method::kPay)], 20);
  EXPECT_EQ(mix->weights[Index(Method::kListHolds)], 10);
  EXPECT_EQ(mix->Total(), 100);
}

TEST(BenchMixTest, AnyOrderWhitespaceAndMissingKeys) {
  const absl::StatusOr<Mix> mix = ParseMix("  list = 3 ,  place=1 ");
  ASSERT_TRUE(mix.ok()) << mix.status();
  EXPECT_EQ(mix->weights[Index(Method::kPlaceHold)], 1);
  EXPECT_EQ(mix->weights[Index(Method::kPay)], 0);
  EXPECT_EQ(mix->weights[Index(Method::kListHolds)], 3);
  EXPECT_EQ(mix->Total(), 4);
}

TEST(BenchMixTest, WeightsAreRatiosNotPercentages) {
  const absl::StatusOr<Mix> mix = ParseMix("place=7,pay=2,list=1");
  ASSERT_TRUE(mix.ok()) << mix.status();
  EXPECT_EQ(mix->Total(), 10);
}

TEST(BenchMixTest, SingleKeyAndExplicitZeroWeight) {
  const absl::StatusOr<Mix> place_only = ParseMix("place=100");
  ASSERT_TRUE(place_only.ok()) << place_only.status();
  EXPECT_THAT(place_only->weights, ElementsAre(100, 0, 0, 0));

  const absl::StatusOr<Mix> with_zero = ParseMix("place=0,pay=5");
  ASSERT_TRUE(with_zero.ok()) << with_zero.status();
  EXPECT_THAT(with_zero->weights, ElementsAre(0, 5, 0, 0));
}

TEST(BenchMixTest, AllZeroWeightsRejected) {
  const absl::StatusOr<Mix> mix = ParseMix("place=0,pay=0,list=0");
  ASSERT_FALSE(mix.ok());
  EXPECT_EQ(mix.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(mix.status().message()), HasSubstr("all weights are zero"));
}

TEST(BenchMixTest, NegativeWeightRejected) {
  const absl::StatusOr<Mix> mix = ParseMix("place=70,pay=-1");
  ASSERT_FALSE(mix.ok());
  EXPECT_EQ(mix.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(mix.status().message()), HasSubstr("pay"));
  EXPECT_THAT(std::string(mix.status().message()), HasSubstr("-1"));
}

TEST(BenchMixTest, NonIntegerAndHugeWeightsRejected) {
  for (const char* spec :
       {"place=abc", "place=1.5", "place=", "place=10000000000", "place=99999999999999999999999"}) {
    const absl::StatusOr<Mix> mix = ParseMix(spec);
    EXPECT_FALSE(mix.ok()) << spec;
    EXPECT_EQ(mix.status().code(), absl::StatusCode::kInvalidArgument) << spec;
  }
}

TEST(BenchMixTest, UnknownKeyRejected) {
  const absl::StatusOr<Mix> mix = ParseMix("place=1,refund=2");
  ASSERT_FALSE(mix.ok());
  EXPECT_EQ(mix.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(mix.status().message()), HasSubstr("unknown method"));
  EXPECT_THAT(std::string(mix.status().message()), HasSubstr("refund"));
}

TEST(BenchMixTest, KeysAreCaseSensitive) {
  EXPECT_FALSE(ParseMix("PLACE=1").ok());
  EXPECT_FALSE(ParseMix("Place=1").ok());
}

TEST(BenchMixTest, CancelIsAMethod) {
  const absl::StatusOr<Mix> mix = ParseMix(" place = 70, cancel = 30 ");
  ASSERT_TRUE(mix.ok()) << mix.status();
  EXPECT_EQ(mix->weights[static_cast<int>(Method::kCancelHold)], 30);
  EXPECT_EQ(FormatMix(*mix), "place=70,cancel=30");
  EXPECT_EQ(MethodName(Method::kCancelHold), "CancelHold");
  EXPECT_FALSE(ParseMix("cancel=").ok());
}

TEST(BenchMixTest, EmptyRejected) {
  for (const char* spec : {"", "   ", "\t"}) {
    const absl::StatusOr<Mix> mix = ParseMix(spec);
    ASSERT_FALSE(mix.ok()) << "\"" << spec << "\"";
    EXPECT_EQ(mix.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(mix.status().message()), HasSubstr("empty"));
  }
}

TEST(BenchMixTest, MalformedPairsRejected) {
  for (const char* spec : {"place", "place=70,", ",place=70", "place=70,,pay=1", "=5"}) {
    const absl::StatusOr<Mix> mix = ParseMix(spec);
    EXPECT_FALSE(mix.ok()) << spec;
    EXPECT_EQ(mix.status().code(), absl::StatusCode::kInvalidArgument) << spec;
  }
}

TEST(BenchMixTest, RepeatedKeyRejected) {
  const absl::StatusOr<Mix> mix = ParseMix("place=1,pay=1,place=2");
  ASSERT_FALSE(mix.ok());
  EXPECT_EQ(mix.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(mix.status().message()), HasSubstr("twice"));
}

TEST(BenchMixTest, FormatMixIsCanonicalAndRoundTrips) {
  const absl::StatusOr<Mix> mix = ParseMix(" list=10 , pay=0, place=70 ");
  ASSERT_TRUE(mix.ok()) << mix.status();
  EXPECT_EQ(FormatMix(*mix), "place=70,list=10");
  const absl::StatusOr<Mix> again = ParseMix(FormatMix(*mix));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->weights, mix->weights);
}

TEST(BenchMixTest, MethodNamesAndKeys) {
  EXPECT_EQ(MethodName(Method::kPlaceHold), "PlaceHold");
  EXPECT_EQ(MethodName(Method::kPay), "Pay");
  EXPECT_EQ(MethodName(Method::kListHolds), "ListHolds");
  EXPECT_EQ(MethodMixKey(Method::kPlaceHold), "place");
  EXPECT_EQ(MethodMixKey(Method::kPay), "pay");
  EXPECT_EQ(MethodMixKey(Method::kListHolds), "list");
}

// ---------------------------------------------------------------------------------------------
// PickMethod: deterministic, so iterate every draw in [0, Total()).

std::array<int64_t, kNumMethods> CountPicks(const Mix& mix) {
  std::array<int64_t, kNumMethods> counts{};
  for (int64_t draw = 0; draw < mix.Total(); ++draw) ++counts[Index(PickMethod(mix, draw))];
  return counts;
}

TEST(BenchPickMethodTest, WholeRangeFollowsWeightsExactly) {
  const Mix mix{{70, 20, 10}};
  EXPECT_THAT(CountPicks(mix), ElementsAre(70, 20, 10, 0));
}

TEST(BenchPickMethodTest, DrawsAreContiguousInMethodOrder) {
  const Mix mix{{3, 2, 1}};
  EXPECT_EQ(PickMethod(mix, 0), Method::kPlaceHold);
  EXPECT_EQ(PickMethod(mix, 2), Method::kPlaceHold);
  EXPECT_EQ(PickMethod(mix, 3), Method::kPay);
  EXPECT_EQ(PickMethod(mix, 4), Method::kPay);
  EXPECT_EQ(PickMethod(mix, 5), Method::kListHolds);
}

TEST(BenchPickMethodTest, ZeroWeightMethodsNeverPicked) {
  const Mix mix{{0, 5, 0}};
  EXPECT_THAT(CountPicks(mix), ElementsAre(0, 5, 0, 0));
  const Mix ends{{4, 0, 6}};
  EXPECT_THAT(CountPicks(ends), ElementsAre(4, 0, 6, 0));
}

TEST(BenchPickMethodTest, ParsedMixLargeWeights) {
  const absl::StatusOr<Mix> mix = ParseMix("place=7000,pay=2000,list=1000");
  ASSERT_TRUE(mix.ok()) << mix.status();
  EXPECT_THAT(CountPicks(*mix), ElementsAre(7000, 2000, 1000, 0));
}

TEST(BenchPickMethodTest, OutOfRangeDrawPicksLastWeightedMethod) {
  // Documented precondition is draw < Total(); beyond it the function stays within the mix.
  EXPECT_EQ(PickMethod(Mix{{5, 5, 0}}, 10), Method::kPay);
  EXPECT_EQ(PickMethod(Mix{{5, 0, 0}}, 100), Method::kPlaceHold);
}

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
// JsonQuote

TEST(BenchJsonQuoteTest, PlainAndEmpty) {
  EXPECT_EQ(JsonQuote(""), "\"\"");
  EXPECT_EQ(JsonQuote("localhost:50051"), "\"localhost:50051\"");
}

TEST(BenchJsonQuoteTest, QuotesAndBackslash) {
  EXPECT_EQ(JsonQuote("a\"b"), R"("a\"b")");
  EXPECT_EQ(JsonQuote("a\\b"), R"("a\\b")");
  EXPECT_EQ(JsonQuote("\\\""), R"("\\\"")");
}

TEST(BenchJsonQuoteTest, NamedControlCharacters) {
  EXPECT_EQ(JsonQuote("\b\f\n\r\t"), R"("\b\f\n\r\t")");
}

TEST(BenchJsonQuoteTest, OtherControlCharactersAsUnicodeEscapes) {
  EXPECT_EQ(JsonQuote(std::string("a\0b", 3)), R"("a\u0000b")");
  EXPECT_EQ(JsonQuote("\x01"), R"("\u0001")");
  EXPECT_EQ(JsonQuote("\x1f"), R"("\u001f")");
  EXPECT_EQ(JsonQuote("\x0b"), R"("\u000b")");
}

TEST(BenchJsonQuoteTest, NonControlBytesCopied) {
  EXPECT_EQ(JsonQuote(" ~/"), "\" ~/\"");
  EXPECT_EQ(JsonQuote("\x7f"), "\"\x7f\"");
  EXPECT_EQ(JsonQuote("caf\xc3\xa9"), "\"caf\xc3\xa9\"");  // UTF-8 stays UTF-8.
}

// ---------------------------------------------------------------------------------------------
// FormatJsonReport (what tests/bench/run.sh reads, by substring) and Summarize

RunReport SampleReport() {
  RunReport r;
  r.open_loop = true;
  r.target = "localhost:50051";
  r.rate = 2500;
  r.max_in_flight = 100;
  r.duration = absl::Seconds(10);
  r.warmup = absl::Seconds(1);
  r.deadline = absl::Seconds(2);
  r.connections = 4;
  r.users = 1000;
  r.mix = Mix{{70, 20, 0}};
  r.run_seed = 0xbeef;
  r.sent = 25000;
  r.send_window = absl::Seconds(10);
  r.measured_window = absl::Seconds(10);

  Recorder recorder;
  for (int i = 1; i <= 1000; ++i) {
    // Latencies 1..1000 microseconds for PlaceHold, all OK.
    recorder.Record(Method::kPlaceHold, kOk, int64_t{i} * 1000);
  }
  recorder.Record(Method::kPay, kNotFound, 2'000'000);
  recorder.Record(Method::kPay, kUnavailable, 3'000'000);
  Summarize(recorder.Merge(), &r);
  return r;
}

TEST(BenchSummarizeTest, CountsErrorsThroughputAndPercentiles) {
  const RunReport r = SampleReport();
  EXPECT_EQ(r.all.completed, 1002);
  EXPECT_EQ(r.all.errors, 1);
  EXPECT_DOUBLE_EQ(r.all.throughput, 100.2);
  EXPECT_EQ(r.all.codes[kOk], 1000);
  EXPECT_EQ(r.all.codes[kNotFound], 1);
  EXPECT_EQ(r.all.codes[kUnavailable], 1);
  EXPECT_EQ(r.all.latency.max_ns, 3'000'000);
  EXPECT_DOUBLE_EQ(r.send_rate, 2500);

  const MethodReport& place = r.methods[Index(Method::kPlaceHold)];
  EXPECT_EQ(place.completed, 1000);
  EXPECT_EQ(place.errors, 0);
  EXPECT_EQ(place.latency.p50_ns, 500'000);
  EXPECT_EQ(place.latency.p99_ns, 990'000);
  EXPECT_EQ(place.latency.p999_ns, 999'000);
  EXPECT_EQ(place.latency.max_ns, 1'000'000);

  const MethodReport& pay = r.methods[Index(Method::kPay)];
  EXPECT_EQ(pay.completed, 2);
  EXPECT_EQ(pay.errors, 1);
  EXPECT_EQ(r.methods[Index(Method::kListHolds)].completed, 0);
}

TEST(BenchSummarizeTest, ZeroWindowsGiveZeroRates) {
  RunReport r;
  r.sent = 10;
  Recorder recorder;
  recorder.Record(Method::kPlaceHold, kOk, 5);
  Summarize(recorder.Merge(), &r);
  EXPECT_EQ(r.all.completed, 1);
  EXPECT_EQ(r.all.throughput, 0.0);
  EXPECT_EQ(r.send_rate, 0.0);
}

TEST(BenchJsonReportTest, HasTheKeysRunShReads) {
  const std::string json = FormatJsonReport(SampleReport());
  EXPECT_THAT(json, StartsWith("{"));
  EXPECT_EQ(json.back(), '}');
  EXPECT_THAT(json, Not(HasSubstr("\n")));

  EXPECT_THAT(json, HasSubstr("\"mode\":\"open\""));
  EXPECT_THAT(json, HasSubstr("\"rate\":2500.000"));
  EXPECT_THAT(json, HasSubstr("\"completed\":1002"));
  EXPECT_THAT(json, HasSubstr("\"throughput\":100.2"));
  EXPECT_THAT(json, HasSubstr("\"errors\":1,"));
  EXPECT_THAT(json, HasSubstr("\"latency_ms\":{\"p50\":"));
  EXPECT_THAT(json, HasSubstr("\"p99\":"));
  EXPECT_THAT(json, HasSubstr("\"p999\":"));
  EXPECT_THAT(json, HasSubstr("\"max\":3.000}"));
  EXPECT_THAT(json, HasSubstr("\"codes\":{\"OK\":1000,\"NOT_FOUND\":1,\"UNAVAILABLE\":1}"));
}

TEST(BenchJsonReportTest, PerMethodLatencyInMilliseconds) {
  const std::string json = FormatJsonReport(SampleReport());
  EXPECT_THAT(json, HasSubstr("\"PlaceHold\":{\"completed\":1000,"));
  EXPECT_THAT(json, HasSubstr("\"latency_ms\":{\"p50\":0.500,\"p90\":0.900,\"p99\":0.990,"
                              "\"p999\":0.999,\"max\":1.000}"));
  EXPECT_THAT(json, HasSubstr("\"Pay\":{\"completed\":2,"));
  // ListHolds has zero weight and no calls: not listed.
  EXPECT_THAT(json, Not(HasSubstr("ListHolds")));
}

TEST(BenchJsonReportTest, MixConfigurationAndEscaping) {
  RunReport r = SampleReport();
  r.target = "host\"with\\odd";
  const std::string json = FormatJsonReport(r);
  EXPECT_THAT(json, HasSubstr("\"mix\":{\"place\":70,\"pay\":20}"));
  EXPECT_THAT(json, HasSubstr(R"("target":"host\"with\\odd")"));
  EXPECT_THAT(json, HasSubstr("\"run_seed\":48879"));
  EXPECT_THAT(json, HasSubstr("\"distribution\":\"uniform\""));
}

TEST(BenchJsonReportTest, ClosedLoopAndNoSamples) {
  RunReport r;
  r.mix = Mix{{100, 0, 0}};
  r.concurrency = 50;
  const std::string json = FormatJsonReport(r);
  EXPECT_THAT(json, HasSubstr("\"mode\":\"closed\""));
  EXPECT_THAT(json, HasSubstr("\"rate\":0.000"));
  EXPECT_THAT(json, HasSubstr("\"completed\":0"));
  EXPECT_THAT(json, HasSubstr("\"throughput\":0.0"));
  EXPECT_THAT(json, HasSubstr("\"errors\":0"));
  EXPECT_THAT(json, HasSubstr("\"latency_ms\":{\"p50\":0.000"));
  EXPECT_THAT(json, HasSubstr("\"codes\":{}"));
}

TEST(BenchJsonReportTest, BracesAndQuotesBalance) {
  const std::string json = FormatJsonReport(SampleReport());
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < json.size(); ++i) {
    const char c = json[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') in_string = true;
    if (c == '{') ++depth;
    if (c == '}') {
      --depth;
      ASSERT_GE(depth, 0) << "at " << i;
      if (depth == 0) {
        EXPECT_EQ(i, json.size() - 1) << "object closes early";
      }
    }
  }
  EXPECT_FALSE(in_string);
  EXPECT_EQ(depth, 0);
}

TEST(BenchJsonReportTest, WholeReportExactly) {
  // Pins the whole format: scripts (tests/bench/run.sh) and saved results read these bytes.
  EXPECT_EQ(FormatJsonReport(SampleReport()),
            "{\"mode\":\"open\",\"target\":\"localhost:50051\",\"concurrency\":0,\"rate\":2500.000,"
            "\"max_in_flight\":100,\"duration_s\":10.000,\"warmup_s\":1.000,\"count\":0,"
            "\"deadline_s\":2.000,\"connections\":4,\"users\":1000,\"distribution\":\"uniform\","
            "\"zipf_exponent\":0.000,\"mix\":{\"place\":70,\"pay\":20},\"run_seed\":48879,"
            "\"sent\":25000,\"send_rate\":2500.0,\"send_window_s\":10.000,"
            "\"measured_window_s\":10.000,\"max_send_lag_ms\":0.000,\"completed\":1002,"
            "\"not_sent\":0,\"throughput\":100.2,\"errors\":1,"
            "\"latency_ms\":{\"p50\":0.501,\"p90\":0.902,\"p99\":0.992,\"p999\":2.000,"
            "\"max\":3.000},\"codes\":{\"OK\":1000,\"NOT_FOUND\":1,\"UNAVAILABLE\":1},"
            "\"methods\":{\"PlaceHold\":{\"completed\":1000,\"throughput\":100.0,\"errors\":0,"
            "\"latency_ms\":{\"p50\":0.500,\"p90\":0.900,\"p99\":0.990,\"p999\":0.999,"
            "\"max\":1.000},\"codes\":{\"OK\":1000}},\"Pay\":{\"completed\":2,"
            "\"throughput\":0.2,\"errors\":1,\"latency_ms\":{\"p50\":2.000,\"p90\":3.000,"
            "\"p99\":3.000,\"p999\":3.000,\"max\":3.000},"
            "\"codes\":{\"NOT_FOUND\":1,\"UNAVAILABLE\":1}}}}");
}

// ---------------------------------------------------------------------------------------------
// FormatTextReport / FormatProgress: what a user reads; pinned byte for byte.

TEST(BenchTextReportTest, OpenLoopReport) {
  EXPECT_EQ(
      FormatTextReport(SampleReport()),
      "orderhold-bench: open loop at 2500.0 calls/s (max_in_flight 100), target "
      "localhost:50051, 4 connection(s)\n"
      "  duration 10s after 1s warmup, deadline 2s\n"
      "  users 1000 uniform, mix place=70,pay=20, run seed 0000beef\n"
      "  sent 25000 in 10.000s (2500.0/s), not_sent 0, max send lag 0.000 ms\n"
      "  completed 1002 in 10.000s: throughput 100.2/s, errors 1\n"
      "\n"
      "method      completed  throughput    p50 ms    p90 ms    p99 ms  p99.9 ms    max ms  codes\n"
      "PlaceHold        1000       100.0     0.500     0.900     0.990     0.999     1.000  "
      "OK=1000\n"
      "Pay                 2         0.2     2.000     3.000     3.000     3.000     3.000  "
      "NOT_FOUND=1 UNAVAILABLE=1\n"
      "all              1002       100.2     0.501     0.902     0.992     2.000     3.000  "
      "OK=1000 NOT_FOUND=1 UNAVAILABLE=1\n");
}

TEST(BenchTextReportTest, ClosedLoopZipfWithCountAndNoCalls) {
  RunReport r;
  r.target = "t";
  r.concurrency = 50;
  r.connections = 1;
  r.duration = absl::Seconds(5);
  r.warmup = absl::ZeroDuration();
  r.count = 100;
  r.deadline = absl::Seconds(2);
  r.users = 10;
  r.distribution = Distribution::kZipf;
  r.zipf_exponent = 1.1;
  r.mix = Mix{{0, 0, 0, 1}};
  r.run_seed = 1;
  Summarize(Recorder().Merge(), &r);
  EXPECT_EQ(
      FormatTextReport(r),
      "orderhold-bench: closed loop, concurrency 50, target t, 1 connection(s)\n"
      "  duration 5s after 0 warmup (or 100 calls), deadline 2s\n"
      "  users 10 zipf (exponent 1.1), mix cancel=1, run seed 00000001\n"
      "  sent 0 in 0.000s (0.0/s), not_sent 0\n"
      "  completed 0 in 0.000s: throughput 0.0/s, errors 0\n"
      "\n"
      "method      completed  throughput    p50 ms    p90 ms    p99 ms  p99.9 ms    max ms  codes\n"
      "CancelHold          0         0.0     0.000     0.000     0.000     0.000     0.000  -\n"
      "all                 0         0.0     0.000     0.000     0.000     0.000     0.000  -\n");
}

TEST(BenchProgressTest, Line) {
  Progress p;
  p.elapsed = absl::Seconds(3);
  p.sent = 30012;
  p.completed = 29962;
  p.current_rate = 10003;
  p.in_flight = 50;
  EXPECT_EQ(FormatProgress(p),
            "[    3.0s] sent 30012 completed 29962 rate 10003/s in_flight 50 errors 0");
  p.elapsed = absl::Milliseconds(123456);
  p.errors = 2;
  p.not_sent = 7;
  p.warming_up = true;
  EXPECT_EQ(FormatProgress(p),
            "[  123.5s] sent 30012 completed 29962 rate 10003/s in_flight 50 errors 2 not_sent 7 "
            "(warmup)");
}

// ---------------------------------------------------------------------------------------------
// HoldPool

TEST(BenchHoldPoolTest, EmptyPopsNullopt) {
  HoldPool pool(4);
  EXPECT_EQ(pool.size(), 0);
  EXPECT_EQ(pool.Pop(), std::nullopt);
}

TEST(BenchHoldPoolTest, PopIsLifo) {
  HoldPool pool(10);
  pool.Push({1, 10});
  pool.Push({2, 20});
  pool.Push({3, 30});
  EXPECT_EQ(pool.size(), 3);
  EXPECT_EQ(pool.Pop(), (PoolEntry{3, 30}));
  EXPECT_EQ(pool.Pop(), (PoolEntry{2, 20}));
  pool.Push({4, 40});
  EXPECT_EQ(pool.Pop(), (PoolEntry{4, 40}));
  EXPECT_EQ(pool.Pop(), (PoolEntry{1, 10}));
  EXPECT_EQ(pool.Pop(), std::nullopt);
  EXPECT_EQ(pool.size(), 0);
}

TEST(BenchHoldPoolTest, FullPoolOverwritesOldest) {
  HoldPool pool(3);
  for (int64_t i = 1; i <= 5; ++i) pool.Push({i, i * 100});
  EXPECT_EQ(pool.size(), 3);
  EXPECT_EQ(pool.Pop(), (PoolEntry{5, 500}));
  EXPECT_EQ(pool.Pop(), (PoolEntry{4, 400}));
  EXPECT_EQ(pool.Pop(), (PoolEntry{3, 300}));
  EXPECT_EQ(pool.Pop(), std::nullopt);
}

TEST(BenchHoldPoolTest, WrapsAroundRepeatedly) {
  HoldPool pool(3);
  for (int64_t i = 1; i <= 7; ++i) pool.Push({i, i});  // Holds 5, 6, 7.
  EXPECT_EQ(pool.Pop(), (PoolEntry{7, 7}));            // Holds 5, 6.
  pool.Push({8, 8});                                   // Holds 5, 6, 8.
  pool.Push({9, 9});                                   // Full: drops 5; holds 6, 8, 9.
  EXPECT_EQ(pool.size(), 3);
  EXPECT_EQ(pool.Pop(), (PoolEntry{9, 9}));
  EXPECT_EQ(pool.Pop(), (PoolEntry{8, 8}));
  EXPECT_EQ(pool.Pop(), (PoolEntry{6, 6}));
  EXPECT_EQ(pool.Pop(), std::nullopt);
}

TEST(BenchHoldPoolTest, CapacityOne) {
  HoldPool pool(1);
  pool.Push({1, 1});
  pool.Push({2, 2});
  EXPECT_EQ(pool.size(), 1);
  EXPECT_EQ(pool.Pop(), (PoolEntry{2, 2}));
  EXPECT_EQ(pool.Pop(), std::nullopt);
}

TEST(BenchHoldPoolTest, ConcurrentPushPopKeepsCount) {
  HoldPool pool(1'000'000);
  constexpr int kThreads = 4;
  constexpr int kPerThread = 5000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&pool, t] {
      for (int i = 0; i < kPerThread; ++i) pool.Push({t, i});
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(pool.size(), kThreads * kPerThread);
  int popped = 0;
  while (pool.Pop().has_value()) ++popped;
  EXPECT_EQ(popped, kThreads * kPerThread);
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
  constexpr int kPerThread = 3000;
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

// ---------------------------------------------------------------------------------------------
// UserPicker, ParseDistribution, UserId, OrderId

TEST(BenchUserPickerTest, UniformStaysInRangeAndCoversIt) {
  constexpr int64_t kUsers = 10;
  const UserPicker picker(kUsers, Distribution::kUniform, 1.1);
  std::array<int64_t, kUsers> counts{};
  for (int i = 0; i < 20000; ++i) {
    const int64_t user = picker.Draw();
    ASSERT_GE(user, 0);
    ASSERT_LT(user, kUsers);
    ++counts[user];
  }
  // Expected 2000 each (standard deviation ~42): very loose bounds.
  for (int64_t user = 0; user < kUsers; ++user) {
    EXPECT_GT(counts[user], 1000) << user;
    EXPECT_LT(counts[user], 3000) << user;
  }
}

TEST(BenchUserPickerTest, UniformSingleUser) {
  const UserPicker picker(1, Distribution::kUniform, 1.1);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(picker.Draw(), 0);
}

TEST(BenchUserPickerTest, ZipfStaysInRangeAndFavoursIndexZero) {
  constexpr int64_t kUsers = 100;
  constexpr int kDraws = 20000;
  const UserPicker picker(kUsers, Distribution::kZipf, 1.1);
  std::array<int64_t, kUsers> counts{};
  for (int i = 0; i < kDraws; ++i) {
    const int64_t user = picker.Draw();
    ASSERT_GE(user, 0);
    ASSERT_LT(user, kUsers);
    ++counts[user];
  }
  // P(0) is about 0.23 here (uniform would be 0.01), P(1) about 0.11: expected ~4700 vs ~2200,
  // each with a standard deviation under 70.
  EXPECT_GT(counts[0], kDraws / 10);
  EXPECT_GT(counts[0], counts[1]);
  EXPECT_EQ(*std::max_element(counts.begin(), counts.end()), counts[0]);
  EXPECT_GT(counts[0], 10 * counts[kUsers - 1]);
}

TEST(BenchUserPickerTest, ZipfTwoUsers) {
  const UserPicker picker(2, Distribution::kZipf, 2.0);
  int zeros = 0;
  for (int i = 0; i < 10000; ++i) {
    const int64_t user = picker.Draw();
    ASSERT_TRUE(user == 0 || user == 1) << user;
    zeros += user == 0 ? 1 : 0;
  }
  // P(0) = 1 / (1 + 2^-2) = 0.8.
  EXPECT_GT(zeros, 6000);
}

TEST(BenchUserPickerTest, ParseDistribution) {
  EXPECT_EQ(ParseDistribution("uniform").value_or(Distribution::kZipf), Distribution::kUniform);
  EXPECT_EQ(ParseDistribution("zipf").value_or(Distribution::kUniform), Distribution::kZipf);
  for (const char* bad : {"", "Zipf", "UNIFORM", " zipf", "normal"}) {
    const absl::StatusOr<Distribution> d = ParseDistribution(bad);
    ASSERT_FALSE(d.ok()) << bad;
    EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(d.status().message()), StartsWith("--distribution"));
  }
  EXPECT_EQ(DistributionName(Distribution::kUniform), "uniform");
  EXPECT_EQ(DistributionName(Distribution::kZipf), "zipf");
}

TEST(BenchUserPickerTest, UserAndOrderIds) {
  EXPECT_EQ(UserId("u", 42), "u42");
  EXPECT_EQ(UserId("", 0), "0");
  EXPECT_EQ(OrderId(0xbeef, 17), "b0000beef-17");
  EXPECT_EQ(OrderId(0xffffffffu, 0), "bffffffff-0");
  EXPECT_NE(OrderId(1, 5), OrderId(2, 5));
}

// ---------------------------------------------------------------------------------------------
// ValidateOptions

void ExpectRejected(const LoadOptions& options, const std::string& flag) {
  const absl::Status status = ValidateOptions(options);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << flag << ": " << status;
  EXPECT_THAT(std::string(status.message()), StartsWith(flag)) << status;
}

TEST(BenchValidateOptionsTest, DefaultsAreValid) {
  EXPECT_TRUE(ValidateOptions(LoadOptions{}).ok()) << ValidateOptions(LoadOptions{});
}

TEST(BenchValidateOptionsTest, ValidVariants) {
  LoadOptions open;
  open.rate = 1000;
  open.concurrency = 0;  // Ignored in open loop.
  EXPECT_TRUE(ValidateOptions(open).ok()) << ValidateOptions(open);

  LoadOptions zipf;
  zipf.distribution = Distribution::kZipf;
  zipf.users = 2;
  zipf.zipf_exponent = 1.01;
  zipf.warmup = absl::ZeroDuration();
  zipf.count = 100;
  zipf.ttl = absl::Seconds(30);
  EXPECT_TRUE(ValidateOptions(zipf).ok()) << ValidateOptions(zipf);

  LoadOptions one_user;
  one_user.users = 1;
  EXPECT_TRUE(ValidateOptions(one_user).ok()) << ValidateOptions(one_user);
}

TEST(BenchValidateOptionsTest, BadRate) {
  for (double rate :
       {-1.0, std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN()}) {
    LoadOptions o;
    o.rate = rate;
    ExpectRejected(o, "--rate");
  }
}

TEST(BenchValidateOptionsTest, BadConcurrencyInClosedLoop) {
  LoadOptions o;
  o.concurrency = 0;
  ExpectRejected(o, "--concurrency");
  EXPECT_THAT(std::string(ValidateOptions(o).message()), HasSubstr("got 0"));
}

TEST(BenchValidateOptionsTest, BadMaxInFlight) {
  LoadOptions o;
  o.max_in_flight = 0;
  ExpectRejected(o, "--max_in_flight");
}

TEST(BenchValidateOptionsTest, BadDuration) {
  for (absl::Duration d : {absl::ZeroDuration(), absl::Seconds(-1), absl::InfiniteDuration()}) {
    LoadOptions o;
    o.duration = d;
    ExpectRejected(o, "--duration");
  }
}

TEST(BenchValidateOptionsTest, BadCount) {
  LoadOptions o;
  o.count = -1;
  ExpectRejected(o, "--count");
}

TEST(BenchValidateOptionsTest, BadDeadline) {
  for (absl::Duration d :
       {absl::ZeroDuration(), absl::Milliseconds(-5), absl::InfiniteDuration()}) {
    LoadOptions o;
    o.deadline = d;
    ExpectRejected(o, "--deadline");
  }
}

TEST(BenchValidateOptionsTest, BadWarmup) {
  for (absl::Duration d : {absl::Seconds(-1), absl::InfiniteDuration()}) {
    LoadOptions o;
    o.warmup = d;
    ExpectRejected(o, "--warmup");
  }
}

TEST(BenchValidateOptionsTest, BadTtl) {
  for (absl::Duration d : {absl::Seconds(-1), absl::InfiniteDuration()}) {
    LoadOptions o;
    o.ttl = d;
    ExpectRejected(o, "--ttl");
  }
}

TEST(BenchValidateOptionsTest, BadConnections) {
  LoadOptions o;
  o.connections = 0;
  ExpectRejected(o, "--connections");
}

TEST(BenchValidateOptionsTest, BadUsers) {
  LoadOptions o;
  o.users = 0;
  ExpectRejected(o, "--users");

  LoadOptions zipf;
  zipf.distribution = Distribution::kZipf;
  zipf.users = 1;
  ExpectRejected(zipf, "--users");
  EXPECT_THAT(std::string(ValidateOptions(zipf).message()), HasSubstr("zipf"));
}

TEST(BenchValidateOptionsTest, BadZipfExponent) {
  for (double q : {1.0, 0.5, -2.0, std::numeric_limits<double>::infinity(),
                   std::numeric_limits<double>::quiet_NaN()}) {
    LoadOptions o;
    o.distribution = Distribution::kZipf;
    o.zipf_exponent = q;
    ExpectRejected(o, "--zipf_exponent");
  }
  // Only checked for zipf.
  LoadOptions uniform;
  uniform.zipf_exponent = 0.5;
  EXPECT_TRUE(ValidateOptions(uniform).ok());
}

TEST(BenchValidateOptionsTest, BadMix) {
  LoadOptions zero;
  zero.mix = Mix{{0, 0, 0}};
  ExpectRejected(zero, "--mix");

  LoadOptions negative;
  negative.mix = Mix{{10, -1, 0}};
  ExpectRejected(negative, "--mix");
  EXPECT_THAT(std::string(ValidateOptions(negative).message()), HasSubstr("pay"));
}

TEST(BenchValidateOptionsTest, BadPoolCapacity) {
  LoadOptions o;
  o.pool_capacity = 0;
  const absl::Status status = ValidateOptions(o);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr("pool capacity"));
}

}  // namespace
}  // namespace orderhold::client::bench
