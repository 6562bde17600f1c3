// What an orderhold-bench run reports and how it prints it: RunReport (the configuration echoed
// and what was measured, per method and overall), Summarize (which turns a Recorder's samples into
// one), and its two forms, a table for people (FormatTextReport) and one JSON object for scripts
// (FormatJsonReport; tests/bench/run.sh reads it); plus the once-a-second progress line. The
// formats are pinned byte for byte by tests/unit/bench_report_test.cc.
//
// Throughput, as reported: recorded (completed, measured) calls divided by the measured window,
// which runs from the end of the warmup until the last call completed, i.e. the send window plus
// the drain. This is the rate a client actually got served; it is a little below the send rate
// when the drain is long. The send rate (measured calls sent / send window) is reported apart.
#ifndef ORDERHOLD_CLIENT_BENCH_REPORT_H_
#define ORDERHOLD_CLIENT_BENCH_REPORT_H_

#include <array>
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "client/bench/method.h"
#include "client/bench/stats.h"
#include "client/bench/workload.h"

namespace orderhold::client::bench {

// Results of one method (or of all methods together).
struct MethodReport {
  // Completed measured calls (any status).
  int64_t completed = 0;
  // completed / RunReport::measured_window, calls per second.
  double throughput = 0;
  LatencyPercentiles latency;
  CodeCounts codes{};
  // CountServiceErrors(codes).
  int64_t errors = 0;
};

// What a run was configured with and what it measured. Everything counts measured calls only
// (those started, or scheduled in open loop, after the warmup).
struct RunReport {
  // Configuration, echoed.
  bool open_loop = false;
  std::string target;
  int concurrency = 0;
  double rate = 0;  // Target calls/s in open loop; 0 in closed loop.
  int max_in_flight = 0;
  absl::Duration duration;
  absl::Duration warmup;
  int64_t count = 0;
  absl::Duration deadline;
  int connections = 0;
  int64_t users = 0;
  Distribution distribution = Distribution::kUniform;
  double zipf_exponent = 0;
  Mix mix;
  PlaceShape place;  // The default: unscoped PlaceHolds.
  uint32_t run_seed = 0;

  // Measured.
  int64_t sent = 0;      // Calls started.
  int64_t not_sent = 0;  // Open loop: scheduled calls skipped because max_in_flight was reached.
  absl::Duration send_window;      // End of warmup until sending stopped.
  absl::Duration measured_window;  // End of warmup until the last call completed.
  double send_rate = 0;            // sent / send_window, calls per second.
  // Open loop: the largest delay between a call's intended and actual send time (all calls, warmup
  // included). Large values mean the generator, not the server, could not keep up with the rate;
  // the delay is part of those calls' latency. Zero in closed loop.
  absl::Duration max_send_lag;
  std::array<MethodReport, kNumMethods> methods;
  MethodReport all;
};

// Fills `report`'s per-method and overall results from merged recordings: counts, exact
// percentiles, throughput over report->measured_window (0 when that window is not positive) and
// send_rate over report->send_window. Reads sent, send_window and measured_window from `report`.
// Pure apart from writing `report`.
void Summarize(Recorder::Merged merged, RunReport* report);

// `s` as a JSON string literal, quotes included: escapes '"', '\\' and control characters
// (\b \f \n \r \t, others as \u00XX). Bytes >= 0x80 are copied as they are (UTF-8 stays UTF-8).
// Pure.
std::string JsonQuote(absl::string_view s);

// Appends `latency` as a JSON object {"p50":..,"p90":..,"p99":..,"p999":..,"max":..} to `out`:
// milliseconds with microsecond resolution, as in FormatJsonReport (which uses it). Pure.
void AppendLatencyJson(const LatencyPercentiles& latency, std::string* out);

// Appends `codes` as a JSON object {"OK":..,"NOT_FOUND":..} to `out`: the codes with a non-zero
// count, by StatusCodeName, in numeric order, as in FormatJsonReport (which uses it). Pure.
void AppendCodesJson(const CodeCounts& codes, std::string* out);

// The report as ONE JSON object, one line, no trailing newline:
//   {"mode":"closed"|"open","target":..,"concurrency":..,"rate":..,"max_in_flight":..,
//    "duration_s":..,"warmup_s":..,"count":..,"deadline_s":..,"connections":..,"users":..,
//    "distribution":..,"zipf_exponent":..,"mix":{"place":70,...},
//    ["place_shape":{"scopes":..,"quantity":..,"scope_max_holds":..,"scope_max_units":..},]
//    "run_seed":..,"sent":..,
//    "send_rate":..,"send_window_s":..,"measured_window_s":..,"max_send_lag_ms":..,
//    "completed":..,"not_sent":..,
//    "throughput":..,"errors":..,"latency_ms":{"p50":..,"p90":..,"p99":..,"p999":..,"max":..},
//    "codes":{"OK":..,...},"methods":{"PlaceHold":{"completed":..,"throughput":..,"errors":..,
//    "latency_ms":{...},"codes":{...}},...}}
// "place_shape" only when the run's PlaceShape is set (a scoped mix), all four numbers then;
// "mix" lists non-zero weights; "methods" lists methods with non-zero weight (or, should that ever
// happen, with completed calls); "codes" lists codes with a non-zero count (absent means 0).
// Latencies in milliseconds with microsecond resolution, rates in calls per second. Pure.
std::string FormatJsonReport(const RunReport& report);

// The report as a human-readable table (several lines, each ending in '\n'): the configuration,
// the send and completion totals, then one row per method shown in the JSON and a row "all". A set
// PlaceShape adds the line "  place scopes=4,quantity=2,..." (FormatPlaceShape) after the mix.
// Pure.
std::string FormatTextReport(const RunReport& report);

// A snapshot of a run in progress, for the once-a-second progress line. Counts include warmup.
struct Progress {
  absl::Duration elapsed;  // Since the run started (warmup included).
  bool warming_up = false;
  int64_t sent = 0;
  int64_t completed = 0;
  double current_rate = 0;  // Completions per second over the last interval.
  int64_t in_flight = 0;
  int64_t errors = 0;    // Service errors (IsServiceError), warmup included.
  int64_t not_sent = 0;  // Open loop, warmup included.
};

// One progress line, no trailing newline:
//   "[    3.0s] sent 30012 completed 29962 rate 10003/s in_flight 50 errors 0"
// with " not_sent <n>" appended when n > 0 and " (warmup)" during the warmup. Pure.
std::string FormatProgress(const Progress& progress);

}  // namespace orderhold::client::bench

#endif  // ORDERHOLD_CLIENT_BENCH_REPORT_H_
