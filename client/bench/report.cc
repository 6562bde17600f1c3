#include "client/bench/report.h"

#include <cmath>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace orderhold::client::bench {
namespace {

int64_t SumCodes(const CodeCounts& codes) {
  int64_t sum = 0;
  for (int64_t n : codes) sum += n;
  return sum;
}

double PerSecond(int64_t n, absl::Duration window) {
  const double seconds = absl::ToDoubleSeconds(window);
  return seconds > 0 ? static_cast<double>(n) / seconds : 0.0;
}

// A JSON number with a fixed number of decimals; JSON has no NaN or infinity, so those become 0.
std::string JsonNumber(double value, int decimals) {
  if (!std::isfinite(value)) return "0";
  return absl::StrFormat("%.*f", decimals, value);
}

std::string Ms(int64_t ns) { return absl::StrFormat("%.3f", static_cast<double>(ns) / 1e6); }

std::string CodesText(const CodeCounts& codes) {
  std::string out;
  for (int code = 0; code < kNumStatusCodes; ++code) {
    if (codes[code] == 0) continue;
    absl::StrAppend(&out, out.empty() ? "" : " ", StatusCodeName(code), "=", codes[code]);
  }
  return out.empty() ? "-" : out;
}

// Methods shown in a report: those in the mix, plus any that somehow completed calls.
bool ShowMethod(const RunReport& report, int m) {
  return report.mix.weights[m] > 0 || report.methods[m].completed > 0;
}

}  // namespace

void AppendLatencyJson(const LatencyPercentiles& latency, std::string* out) {
  absl::StrAppend(out, "{\"p50\":", Ms(latency.p50_ns), ",\"p90\":", Ms(latency.p90_ns),
                  ",\"p99\":", Ms(latency.p99_ns), ",\"p999\":", Ms(latency.p999_ns),
                  ",\"max\":", Ms(latency.max_ns), "}");
}

void AppendCodesJson(const CodeCounts& codes, std::string* out) {
  out->push_back('{');
  bool first = true;
  for (int code = 0; code < kNumStatusCodes; ++code) {
    if (codes[code] == 0) continue;
    absl::StrAppend(out, first ? "" : ",", JsonQuote(StatusCodeName(code)), ":", codes[code]);
    first = false;
  }
  out->push_back('}');
}

void Summarize(Recorder::Merged merged, RunReport* report) {
  MethodReport all;
  std::vector<int64_t> all_samples;
  size_t total = 0;
  for (const auto& samples : merged.samples_ns) total += samples.size();
  all_samples.reserve(total);
  for (int m = 0; m < kNumMethods; ++m) {
    MethodReport& method = report->methods[m];
    method = MethodReport{};
    method.codes = merged.codes[m];
    method.completed = SumCodes(method.codes);
    method.errors = CountServiceErrors(method.codes);
    method.throughput = PerSecond(method.completed, report->measured_window);
    all_samples.insert(all_samples.end(), merged.samples_ns[m].begin(), merged.samples_ns[m].end());
    method.latency = ComputePercentiles(std::move(merged.samples_ns[m]));
    for (int code = 0; code < kNumStatusCodes; ++code) all.codes[code] += method.codes[code];
  }
  all.completed = SumCodes(all.codes);
  all.errors = CountServiceErrors(all.codes);
  all.throughput = PerSecond(all.completed, report->measured_window);
  all.latency = ComputePercentiles(std::move(all_samples));
  report->all = all;
  report->send_rate = PerSecond(report->sent, report->send_window);
}

std::string JsonQuote(absl::string_view s) {
  std::string out;
  out.reserve(s.size() + 2);
  out.push_back('"');
  for (const char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          absl::StrAppendFormat(&out, "\\u%04x", static_cast<unsigned char>(c));
        } else {
          out.push_back(c);
        }
    }
  }
  out.push_back('"');
  return out;
}

std::string FormatJsonReport(const RunReport& r) {
  std::string out;
  absl::StrAppend(&out, "{\"mode\":", r.open_loop ? "\"open\"" : "\"closed\"",
                  ",\"target\":", JsonQuote(r.target), ",\"concurrency\":", r.concurrency,
                  ",\"rate\":", JsonNumber(r.rate, 3), ",\"max_in_flight\":", r.max_in_flight,
                  ",\"duration_s\":", JsonNumber(absl::ToDoubleSeconds(r.duration), 3),
                  ",\"warmup_s\":", JsonNumber(absl::ToDoubleSeconds(r.warmup), 3),
                  ",\"count\":", r.count,
                  ",\"deadline_s\":", JsonNumber(absl::ToDoubleSeconds(r.deadline), 3));
  absl::StrAppend(&out, ",\"connections\":", r.connections, ",\"users\":", r.users,
                  ",\"distribution\":", JsonQuote(DistributionName(r.distribution)),
                  ",\"zipf_exponent\":", JsonNumber(r.zipf_exponent, 3), ",\"mix\":{");
  bool first = true;
  for (int m = 0; m < kNumMethods; ++m) {
    if (r.mix.weights[m] == 0) continue;
    absl::StrAppend(&out, first ? "" : ",", JsonQuote(MethodMixKey(static_cast<Method>(m))), ":",
                    r.mix.weights[m]);
    first = false;
  }
  out += "}";
  if (r.place.IsSet()) {
    absl::StrAppend(&out, ",\"place_shape\":{\"scopes\":", r.place.scopes,
                    ",\"quantity\":", r.place.quantity,
                    ",\"scope_max_holds\":", r.place.scope_max_holds,
                    ",\"scope_max_units\":", r.place.scope_max_units, "}");
  }
  absl::StrAppend(
      &out, ",\"run_seed\":", r.run_seed, ",\"sent\":", r.sent,
      ",\"send_rate\":", JsonNumber(r.send_rate, 1),
      ",\"send_window_s\":", JsonNumber(absl::ToDoubleSeconds(r.send_window), 3),
      ",\"measured_window_s\":", JsonNumber(absl::ToDoubleSeconds(r.measured_window), 3),
      ",\"max_send_lag_ms\":", Ms(absl::ToInt64Nanoseconds(r.max_send_lag)),
      ",\"completed\":", r.all.completed, ",\"not_sent\":", r.not_sent,
      ",\"throughput\":", JsonNumber(r.all.throughput, 1), ",\"errors\":", r.all.errors,
      ",\"latency_ms\":");
  AppendLatencyJson(r.all.latency, &out);
  out += ",\"codes\":";
  AppendCodesJson(r.all.codes, &out);
  out += ",\"methods\":{";
  first = true;
  for (int m = 0; m < kNumMethods; ++m) {
    if (!ShowMethod(r, m)) continue;
    const MethodReport& method = r.methods[m];
    absl::StrAppend(&out, first ? "" : ",", JsonQuote(MethodName(static_cast<Method>(m))),
                    ":{\"completed\":", method.completed,
                    ",\"throughput\":", JsonNumber(method.throughput, 1),
                    ",\"errors\":", method.errors, ",\"latency_ms\":");
    AppendLatencyJson(method.latency, &out);
    out += ",\"codes\":";
    AppendCodesJson(method.codes, &out);
    out += "}";
    first = false;
  }
  out += "}}";
  return out;
}

std::string FormatTextReport(const RunReport& r) {
  std::string out;
  if (r.open_loop) {
    absl::StrAppendFormat(&out, "orderhold-bench: open loop at %.1f calls/s (max_in_flight %d)",
                          r.rate, r.max_in_flight);
  } else {
    absl::StrAppendFormat(&out, "orderhold-bench: closed loop, concurrency %d", r.concurrency);
  }
  absl::StrAppendFormat(&out, ", target %s, %d connection(s)\n", r.target, r.connections);
  absl::StrAppendFormat(&out, "  duration %s after %s warmup", absl::FormatDuration(r.duration),
                        absl::FormatDuration(r.warmup));
  if (r.count > 0) absl::StrAppendFormat(&out, " (or %d calls)", r.count);
  absl::StrAppendFormat(&out, ", deadline %s\n  users %d %s", absl::FormatDuration(r.deadline),
                        r.users, DistributionName(r.distribution));
  if (r.distribution == Distribution::kZipf) {
    absl::StrAppendFormat(&out, " (exponent %g)", r.zipf_exponent);
  }
  absl::StrAppendFormat(&out, ", mix %s, run seed %08x\n", FormatMix(r.mix), r.run_seed);
  if (r.place.IsSet()) absl::StrAppend(&out, "  place ", FormatPlaceShape(r.place), "\n");
  absl::StrAppendFormat(&out, "  sent %d in %.3fs (%.1f/s), not_sent %d", r.sent,
                        absl::ToDoubleSeconds(r.send_window), r.send_rate, r.not_sent);
  if (r.open_loop) {
    absl::StrAppendFormat(&out, ", max send lag %s ms",
                          Ms(absl::ToInt64Nanoseconds(r.max_send_lag)));
  }
  out += "\n";
  absl::StrAppendFormat(&out, "  completed %d in %.3fs: throughput %.1f/s, errors %d\n",
                        r.all.completed, absl::ToDoubleSeconds(r.measured_window), r.all.throughput,
                        r.all.errors);
  out += "\n";
  absl::StrAppendFormat(&out, "%-10s %10s %11s %9s %9s %9s %9s %9s  %s\n", "method", "completed",
                        "throughput", "p50 ms", "p90 ms", "p99 ms", "p99.9 ms", "max ms", "codes");
  auto row = [&out](absl::string_view name, const MethodReport& m) {
    absl::StrAppendFormat(&out, "%-10s %10d %11.1f %9s %9s %9s %9s %9s  %s\n", name, m.completed,
                          m.throughput, Ms(m.latency.p50_ns), Ms(m.latency.p90_ns),
                          Ms(m.latency.p99_ns), Ms(m.latency.p999_ns), Ms(m.latency.max_ns),
                          CodesText(m.codes));
  };
  for (int m = 0; m < kNumMethods; ++m) {
    if (ShowMethod(r, m)) row(MethodName(static_cast<Method>(m)), r.methods[m]);
  }
  row("all", r.all);
  return out;
}

std::string FormatProgress(const Progress& p) {
  std::string out = absl::StrFormat(
      "[%7.1fs] sent %d completed %d rate %.0f/s in_flight %d errors %d",
      absl::ToDoubleSeconds(p.elapsed), p.sent, p.completed, p.current_rate, p.in_flight, p.errors);
  if (p.not_sent > 0) absl::StrAppend(&out, " not_sent ", p.not_sent);
  if (p.warming_up) out += " (warmup)";
  return out;
}

}  // namespace orderhold::client::bench
