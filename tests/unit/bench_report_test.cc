// Unit tests of orderhold-bench's report (client/bench/report.h): Summarize, JSON quoting, and the
// JSON report, text report and progress line, each pinned byte for byte (tests/bench/run.sh and
// saved results read the JSON). No server, no clock.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "absl/time/time.h"
#include "client/bench/method.h"
#include "client/bench/report.h"
#include "client/bench/stats.h"
#include "client/bench/workload.h"

namespace orderhold::client::bench {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

constexpr int kOk = 0;
constexpr int kNotFound = 5;
constexpr int kUnavailable = 14;

int Index(Method method) { return static_cast<int>(method); }

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

TEST(BenchJsonReportTest, ExtendAndGetAreListedUnderTheirNames) {
  RunReport r;
  r.mix = Mix{{2, 0, 0, 0, 1, 1}};
  Recorder recorder;
  recorder.Record(Method::kExtendHold, kOk, 1'000'000);
  recorder.Record(Method::kGetHold, kNotFound, 2'000'000);
  r.measured_window = absl::Seconds(1);
  Summarize(recorder.Merge(), &r);
  const std::string json = FormatJsonReport(r);
  EXPECT_THAT(json, HasSubstr("\"mix\":{\"place\":2,\"extend\":1,\"get\":1}"));
  EXPECT_THAT(json, HasSubstr("\"ExtendHold\":{\"completed\":1,"));
  EXPECT_THAT(json, HasSubstr("\"GetHold\":{\"completed\":1,"));
  EXPECT_THAT(json, Not(HasSubstr("CancelHold")));
  const std::string text = FormatTextReport(r);
  EXPECT_THAT(text, HasSubstr("mix place=2,extend=1,get=1,"));
  EXPECT_THAT(text, HasSubstr("\nExtendHold          1 "));
  EXPECT_THAT(text, HasSubstr("\nGetHold             1 "));
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

TEST(BenchJsonReportTest, PlaceShapeOnlyWhenSet) {
  // An unscoped run's report has no "place_shape" (WholeReportExactly); a scoped run's has all
  // four numbers, between "mix" and "run_seed".
  RunReport r = SampleReport();
  r.place = PlaceShape{.scopes = 4, .quantity = 2, .scope_max_holds = 0, .scope_max_units = 8};
  EXPECT_THAT(FormatJsonReport(r),
              HasSubstr("\"mix\":{\"place\":70,\"pay\":20},\"place_shape\":{\"scopes\":4,"
                        "\"quantity\":2,\"scope_max_holds\":0,\"scope_max_units\":8},"
                        "\"run_seed\":48879,"));
}

// ---------------------------------------------------------------------------------------------
// FormatTextReport / FormatProgress: what a user reads; pinned byte for byte.

TEST(BenchTextReportTest, ScopedRunAddsThePlaceLine) {
  RunReport r = SampleReport();
  r.place = PlaceShape{.scopes = 4, .quantity = 2, .scope_max_holds = 2, .scope_max_units = 0};
  EXPECT_THAT(FormatTextReport(r),
              HasSubstr("  users 1000 uniform, mix place=70,pay=20, run seed 0000beef\n"
                        "  place scopes=4,quantity=2,scope_max_holds=2\n"
                        "  sent 25000"));
}

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

}  // namespace
}  // namespace orderhold::client::bench
