#include "client/bench/load_generator.h"

#include <grpcpp/client_context.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/support/channel_arguments.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <thread>
#include <utility>

#include "absl/random/distributions.h"
#include "absl/random/random.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "client/orderhold_client.h"

namespace orderhold::client::bench {
namespace {

struct MethodInfo {
  Method method;
  absl::string_view name;
  absl::string_view mix_key;
};

// One row per method, in Method order.
constexpr std::array<MethodInfo, kNumMethods> kMethodInfo = {{
    {Method::kPlaceHold, "PlaceHold", "place"},
    {Method::kPay, "Pay", "pay"},
    {Method::kListHolds, "ListHolds", "list"},
    {Method::kCancelHold, "CancelHold", "cancel"},
}};

// Mix weights are capped so that their sum can never overflow.
constexpr int64_t kMaxWeight = 1'000'000'000;

// The pacer sleeps until this close to a call's intended time, then spins: sleeps overshoot by
// tens of microseconds (timer slack), which at high rates would be a visible schedule error.
constexpr int64_t kSpinNs = 100'000;

// Distinguishes Recorder instances in the thread_local buffer cache; an id is never reused,
// unlike an address.
std::atomic<uint64_t> next_recorder_id{1};

absl::InsecureBitGen& BitGen() {
  thread_local absl::InsecureBitGen gen;
  return gen;
}

std::chrono::steady_clock::time_point SteadyTime(int64_t ns) {
  return std::chrono::steady_clock::time_point(std::chrono::nanoseconds(ns));
}

void SleepUntilNs(int64_t target_ns) {
  for (;;) {
    const int64_t remaining = target_ns - std::chrono::duration_cast<std::chrono::nanoseconds>(
                                              std::chrono::steady_clock::now().time_since_epoch())
                                              .count();
    if (remaining <= 0) return;
    if (remaining > kSpinNs) {
      absl::SleepFor(absl::Nanoseconds(remaining - kSpinNs));
    } else {
      std::this_thread::yield();
    }
  }
}

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

const char* ConnectivityName(grpc_connectivity_state state) {
  switch (state) {
    case GRPC_CHANNEL_IDLE:
      return "IDLE";
    case GRPC_CHANNEL_CONNECTING:
      return "CONNECTING";
    case GRPC_CHANNEL_READY:
      return "READY";
    case GRPC_CHANNEL_TRANSIENT_FAILURE:
      return "TRANSIENT_FAILURE";
    case GRPC_CHANNEL_SHUTDOWN:
      return "SHUTDOWN";
  }
  return "UNKNOWN";
}

}  // namespace

absl::string_view MethodName(Method method) {
  const int m = static_cast<int>(method);
  return m >= 0 && m < kNumMethods ? kMethodInfo[m].name : "Unknown";
}

absl::string_view MethodMixKey(Method method) {
  const int m = static_cast<int>(method);
  return m >= 0 && m < kNumMethods ? kMethodInfo[m].mix_key : "unknown";
}

int64_t Mix::Total() const {
  int64_t total = 0;
  for (int64_t w : weights) total += w;
  return total;
}

absl::StatusOr<Mix> ParseMix(absl::string_view spec) {
  if (absl::StripAsciiWhitespace(spec).empty()) {
    return absl::InvalidArgumentError("--mix is empty; want e.g. place=70,pay=20,list=10");
  }
  Mix mix;
  std::array<bool, kNumMethods> seen{};
  for (absl::string_view part : absl::StrSplit(spec, ',')) {
    part = absl::StripAsciiWhitespace(part);
    const size_t eq = part.find('=');
    if (eq == absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--mix entry \"", part, "\" is not method=weight (e.g. place=70,pay=20,list=10)"));
    }
    const absl::string_view key = absl::StripAsciiWhitespace(part.substr(0, eq));
    const absl::string_view value = absl::StripAsciiWhitespace(part.substr(eq + 1));
    int m = 0;
    while (m < kNumMethods && kMethodInfo[m].mix_key != key) ++m;
    if (m == kNumMethods) {
      return absl::InvalidArgumentError(
          absl::StrCat("--mix: unknown method \"", key, "\" (want place, pay, list or cancel)"));
    }
    if (seen[m]) {
      return absl::InvalidArgumentError(absl::StrCat("--mix: \"", key, "\" is given twice"));
    }
    seen[m] = true;
    int64_t weight = 0;
    if (!absl::SimpleAtoi(value, &weight) || weight < 0 || weight > kMaxWeight) {
      return absl::InvalidArgumentError(absl::StrCat("--mix: the weight of ", key,
                                                     " must be an integer from 0 to ", kMaxWeight,
                                                     ", got \"", value, "\""));
    }
    mix.weights[m] = weight;
  }
  if (mix.Total() == 0) return absl::InvalidArgumentError("--mix: all weights are zero");
  return mix;
}

std::string FormatMix(const Mix& mix) {
  std::string out;
  for (int m = 0; m < kNumMethods; ++m) {
    if (mix.weights[m] == 0) continue;
    absl::StrAppend(&out, out.empty() ? "" : ",", kMethodInfo[m].mix_key, "=", mix.weights[m]);
  }
  return out;
}

Method PickMethod(const Mix& mix, int64_t draw) {
  for (int m = 0; m < kNumMethods; ++m) {
    if (draw < mix.weights[m]) return static_cast<Method>(m);
    draw -= mix.weights[m];
  }
  // Only reachable with draw >= Total(); the last method with a weight is the closest answer.
  for (int m = kNumMethods - 1; m > 0; --m) {
    if (mix.weights[m] > 0) return static_cast<Method>(m);
  }
  return static_cast<Method>(0);
}

absl::StatusOr<Distribution> ParseDistribution(absl::string_view name) {
  if (name == "uniform") return Distribution::kUniform;
  if (name == "zipf") return Distribution::kZipf;
  return absl::InvalidArgumentError(
      absl::StrCat("--distribution must be uniform or zipf, got \"", name, "\""));
}

absl::string_view DistributionName(Distribution distribution) {
  return distribution == Distribution::kZipf ? "zipf" : "uniform";
}

std::string UserId(absl::string_view prefix, int64_t index) { return absl::StrCat(prefix, index); }

std::string OrderId(uint32_t run_seed, int64_t sequence) {
  return absl::StrFormat("b%08x-%d", run_seed, sequence);
}

UserPicker::UserPicker(int64_t users, Distribution distribution, double zipf_exponent)
    : users_(users), distribution_(distribution) {
  if (distribution_ == Distribution::kZipf) {
    // zipf_distribution draws from [0, k] inclusive, hence users - 1; v = 1 makes P(i) ~ (1+i)^-q.
    zipf_.emplace(users_ - 1, zipf_exponent, 1.0);
  }
}

int64_t UserPicker::Draw() const {
  if (zipf_.has_value()) {
    // The distribution object is a thin wrapper around the precomputed parameters.
    absl::zipf_distribution<int64_t> zipf(*zipf_);
    return zipf(BitGen());
  }
  return absl::Uniform<int64_t>(BitGen(), 0, users_);
}

HoldPool::HoldPool(int64_t capacity) : capacity_(capacity) {}

void HoldPool::Push(PoolEntry entry) {
  absl::MutexLock lock(&mu_);
  if (size_ < capacity_) {
    const int64_t slot = (start_ + size_) % capacity_;
    if (slot == static_cast<int64_t>(ring_.size())) {
      ring_.push_back(entry);
    } else {
      ring_[slot] = entry;
    }
    ++size_;
    return;
  }
  // Full: the newest entry replaces the oldest, which becomes the newest slot.
  ring_[start_] = entry;
  start_ = (start_ + 1) % capacity_;
}

std::optional<PoolEntry> HoldPool::Pop() {
  absl::MutexLock lock(&mu_);
  if (size_ == 0) return std::nullopt;
  --size_;
  return ring_[(start_ + size_) % capacity_];
}

int64_t HoldPool::size() const {
  absl::MutexLock lock(&mu_);
  return size_;
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
    absl::StrAppend(&out, first ? "" : ",", JsonQuote(kMethodInfo[m].mix_key), ":",
                    r.mix.weights[m]);
    first = false;
  }
  absl::StrAppend(
      &out, "},\"run_seed\":", r.run_seed, ",\"sent\":", r.sent,
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
    absl::StrAppend(&out, first ? "" : ",", JsonQuote(kMethodInfo[m].name),
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
    if (ShowMethod(r, m)) row(kMethodInfo[m].name, r.methods[m]);
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

absl::Status ValidateOptions(const LoadOptions& o) {
  auto invalid = [](auto&&... parts) { return absl::InvalidArgumentError(absl::StrCat(parts...)); };
  if (!std::isfinite(o.rate) || o.rate < 0) {
    return invalid("--rate must be 0 (closed loop) or a positive number of calls/s, got ", o.rate);
  }
  if (o.rate == 0 && o.concurrency < 1) {
    return invalid("--concurrency must be at least 1, got ", o.concurrency);
  }
  if (o.max_in_flight < 1) {
    return invalid("--max_in_flight must be at least 1, got ", o.max_in_flight);
  }
  if (o.duration <= absl::ZeroDuration() || o.duration == absl::InfiniteDuration()) {
    return invalid("--duration must be positive and finite, got ",
                   absl::FormatDuration(o.duration));
  }
  if (o.count < 0) return invalid("--count must be 0 (no limit) or positive, got ", o.count);
  if (o.deadline <= absl::ZeroDuration() || o.deadline == absl::InfiniteDuration()) {
    return invalid("--deadline must be positive and finite, got ",
                   absl::FormatDuration(o.deadline));
  }
  if (o.warmup < absl::ZeroDuration() || o.warmup == absl::InfiniteDuration()) {
    return invalid("--warmup must be zero or positive and finite, got ",
                   absl::FormatDuration(o.warmup));
  }
  if (o.ttl < absl::ZeroDuration() || o.ttl == absl::InfiniteDuration()) {
    return invalid("--ttl must be 0 (server default) or positive and finite, got ",
                   absl::FormatDuration(o.ttl));
  }
  if (o.connections < 1) return invalid("--connections must be at least 1, got ", o.connections);
  if (o.users < 1) return invalid("--users must be at least 1, got ", o.users);
  if (o.distribution == Distribution::kZipf) {
    if (o.users < 2) return invalid("--users must be at least 2 with zipf, got ", o.users);
    // absl::zipf_distribution requires q > 1 (its behaviour is undefined otherwise).
    if (!std::isfinite(o.zipf_exponent) || o.zipf_exponent <= 1) {
      return invalid("--zipf_exponent must be greater than 1, got ", o.zipf_exponent);
    }
  }
  for (int m = 0; m < kNumMethods; ++m) {
    if (o.mix.weights[m] < 0 || o.mix.weights[m] > kMaxWeight) {
      return invalid("--mix: the weight of ", kMethodInfo[m].mix_key, " is out of range");
    }
  }
  if (o.mix.Total() == 0) return invalid("--mix: all weights are zero");
  if (o.pool_capacity < 1) return invalid("pool capacity must be at least 1");
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::shared_ptr<grpc::Channel>>> ConnectChannels(
    const std::string& target, int connections, absl::Duration connect_timeout) {
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  channels.reserve(connections);
  for (int i = 0; i < connections; ++i) {
    grpc::ChannelArguments args;
    // Channels with identical arguments share one subchannel (one TCP connection) through gRPC's
    // global subchannel pool; a distinct value per channel gives each its own connection.
    args.SetInt("orderhold.bench.channel", i);
    channels.push_back(grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args));
  }
  const auto deadline = absl::ToChronoTime(absl::Now() + connect_timeout);
  for (int i = 0; i < connections; ++i) {
    if (!channels[i]->WaitForConnected(deadline)) {
      return absl::UnavailableError(
          absl::StrFormat("could not connect to %s within %s (connection %d of %d is %s)", target,
                          absl::FormatDuration(connect_timeout), i + 1, connections,
                          ConnectivityName(channels[i]->GetState(false))));
    }
  }
  return channels;
}

// One outstanding call; owns everything gRPC needs until the completion callback.
struct LoadGenerator::Call {
  Call(Method method, int64_t intended_ns, bool measured)
      : method(method), intended_ns(intended_ns), measured(measured) {}
  virtual ~Call() = default;

  const Method method;
  const int64_t intended_ns;
  const bool measured;
  grpc::ClientContext context;
};

template <typename Request, typename Response>
struct LoadGenerator::TypedCall final : LoadGenerator::Call {
  using Call::Call;
  Request request;
  Response response;
};

LoadGenerator::LoadGenerator(
    LoadOptions options,
    std::vector<std::shared_ptr<orderhold::v1::OrderHold::StubInterface>> stubs)
    : options_(std::move(options)),
      stubs_(std::move(stubs)),
      users_(options_.users, options_.distribution, options_.zipf_exponent),
      run_seed_(options_.run_seed != 0
                    ? options_.run_seed
                    : absl::Uniform<uint32_t>(absl::IntervalClosed, BitGen(), 1, 0xffffffffu)),
      open_loop_(options_.rate > 0),
      total_weight_(options_.mix.Total()),
      feed_pool_(options_.mix.weights[static_cast<int>(Method::kPay)] > 0 ||
                 options_.mix.weights[static_cast<int>(Method::kCancelHold)] > 0),
      pool_(options_.pool_capacity) {}

LoadGenerator::~LoadGenerator() = default;

int64_t LoadGenerator::NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::pair<std::string, std::string> LoadGenerator::PickHoldToEnd() {
  if (const std::optional<PoolEntry> entry = pool_.Pop(); entry.has_value()) {
    return {UserId(options_.user_prefix, entry->user_index),
            OrderId(run_seed_, entry->order_sequence)};
  }
  return {UserId(options_.user_prefix, users_.Draw()),
          absl::StrFormat("b%08x-missing-%d", run_seed_,
                          missing_order_.fetch_add(1, std::memory_order_relaxed))};
}

void LoadGenerator::StartCall(int64_t intended_ns, bool measured) {
  // Counted before the call exists, so that its completion can never see in_flight_ too low.
  in_flight_.fetch_add(1, std::memory_order_relaxed);
  sent_total_.fetch_add(1, std::memory_order_relaxed);
  if (measured) sent_measured_.fetch_add(1, std::memory_order_relaxed);

  const Method method =
      PickMethod(options_.mix, absl::Uniform<int64_t>(BitGen(), 0, total_weight_));
  orderhold::v1::OrderHold::StubInterface::async_interface* async =
      stubs_[next_stub_.fetch_add(1, std::memory_order_relaxed) % stubs_.size()]->async();
  // The deadline counts from the actual start: in open loop a late call still gets its full time,
  // while its latency (from the intended time) includes the lateness.
  const auto deadline = absl::ToChronoTime(absl::Now() + options_.deadline);

  switch (method) {
    case Method::kPlaceHold: {
      auto* call = new TypedCall<orderhold::v1::PlaceHoldRequest, orderhold::v1::PlaceHoldResponse>(
          method, intended_ns, measured);
      call->context.set_deadline(deadline);
      const int64_t user = users_.Draw();
      const int64_t order = next_order_.fetch_add(1, std::memory_order_relaxed);
      call->request.set_user_id(UserId(options_.user_prefix, user));
      call->request.set_order_id(OrderId(run_seed_, order));
      if (options_.ttl > absl::ZeroDuration()) {
        *call->request.mutable_ttl() = ToProtoDuration(options_.ttl);
      }
      async->PlaceHold(&call->context, &call->request, &call->response,
                       [this, call, user, order](grpc::Status status) {
                         if (feed_pool_ && status.ok() && call->response.created()) {
                           pool_.Push({user, order});
                         }
                         OnDone(call, status);
                       });
      return;
    }
    case Method::kPay: {
      auto* call = new TypedCall<orderhold::v1::PayRequest, orderhold::v1::PayResponse>(
          method, intended_ns, measured);
      call->context.set_deadline(deadline);
      auto [user_id, order_id] = PickHoldToEnd();
      call->request.set_user_id(std::move(user_id));
      call->request.set_order_id(std::move(order_id));
      async->Pay(&call->context, &call->request, &call->response,
                 [this, call](grpc::Status status) { OnDone(call, status); });
      return;
    }
    case Method::kCancelHold: {
      auto* call =
          new TypedCall<orderhold::v1::CancelHoldRequest, orderhold::v1::CancelHoldResponse>(
              method, intended_ns, measured);
      call->context.set_deadline(deadline);
      auto [user_id, order_id] = PickHoldToEnd();
      call->request.set_user_id(std::move(user_id));
      call->request.set_order_id(std::move(order_id));
      async->CancelHold(&call->context, &call->request, &call->response,
                        [this, call](grpc::Status status) { OnDone(call, status); });
      return;
    }
    case Method::kListHolds: {
      auto* call = new TypedCall<orderhold::v1::ListHoldsRequest, orderhold::v1::ListHoldsResponse>(
          method, intended_ns, measured);
      call->context.set_deadline(deadline);
      call->request.set_user_id(UserId(options_.user_prefix, users_.Draw()));
      async->ListHolds(&call->context, &call->request, &call->response,
                       [this, call](grpc::Status status) { OnDone(call, status); });
      return;
    }
    case Method::kCount:
      break;
  }
  // Unreachable (PickMethod never returns kCount); keep the in-flight count balanced anyway.
  ReleaseInFlight();
}

void LoadGenerator::OnDone(Call* call, const grpc::Status& status) {
  const int64_t done_ns = NowNs();
  const int code = static_cast<int>(status.error_code());
  if (call->measured) recorder_.Record(call->method, code, done_ns - call->intended_ns);
  completed_total_.fetch_add(1, std::memory_order_relaxed);
  if (IsServiceError(code)) errors_total_.fetch_add(1, std::memory_order_relaxed);
  // gRPC has moved this callback out of the call before running it, so the context may go now.
  delete call;
  // Closed loop: the next call is counted in in_flight_ before this one is released, so the count
  // cannot touch zero while the run goes on. Starting a call from a callback does not block.
  if (!open_loop_) TryStartClosed();
  ReleaseInFlight();
}

bool LoadGenerator::TryStartClosed() {
  if (stopping_.load(std::memory_order_relaxed)) return false;
  const int64_t now = NowNs();
  if (now >= end_ns_) return false;
  const bool measured = now >= measure_start_ns_;
  if (measured && options_.count > 0 &&
      measured_started_.fetch_add(1, std::memory_order_relaxed) >= options_.count) {
    stopping_.store(true, std::memory_order_relaxed);
    std::lock_guard<std::mutex> lock(done_mu_);
    stop_requested_ = true;
    done_cv_.notify_all();
    return false;
  }
  StartCall(now, measured);
  return true;
}

void LoadGenerator::ReleaseInFlight() {
  if (in_flight_.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  const int64_t now = NowNs();
  std::lock_guard<std::mutex> lock(done_mu_);
  drained_ = true;
  drained_ns_ = now;
  done_cv_.notify_all();
}

int64_t LoadGenerator::RunClosedLoop() {
  for (int i = 0; i < options_.concurrency; ++i) {
    if (!TryStartClosed()) break;
  }
  bool count_reached = false;
  {
    std::unique_lock<std::mutex> lock(done_mu_);
    count_reached =
        done_cv_.wait_until(lock, SteadyTime(end_ns_), [this] { return stop_requested_; });
  }
  // Callbacks stop starting calls at end_ns_ on their own; this also covers the count case.
  stopping_.store(true, std::memory_order_relaxed);
  const int64_t stop_ns = count_reached ? std::min(NowNs(), end_ns_) : end_ns_;
  sending_.store(false, std::memory_order_relaxed);
  ReleaseInFlight();
  return stop_ns;
}

int64_t LoadGenerator::RunOpenLoop() {
  const double period_ns = 1e9 / options_.rate;
  int64_t measured_slots = 0;
  int64_t next_intended_ns = start_ns_;
  for (int64_t i = 0;; ++i) {
    // From the start time each time, not by accumulating the period, so rounding cannot drift.
    const int64_t intended_ns =
        start_ns_ + static_cast<int64_t>(static_cast<double>(i) * period_ns);
    next_intended_ns = intended_ns;
    if (intended_ns >= end_ns_) break;
    const bool measured = intended_ns >= measure_start_ns_;
    if (measured) {
      if (options_.count > 0 && measured_slots >= options_.count) break;
      ++measured_slots;
    }
    // When behind schedule this returns at once: the call goes out late, and its latency still
    // counts from intended_ns.
    SleepUntilNs(intended_ns);
    max_send_lag_ns_ = std::max(max_send_lag_ns_, NowNs() - intended_ns);
    // in_flight_ includes Run's own reference.
    if (in_flight_.load(std::memory_order_relaxed) - 1 >= options_.max_in_flight) {
      not_sent_total_.fetch_add(1, std::memory_order_relaxed);
      if (measured) not_sent_measured_.fetch_add(1, std::memory_order_relaxed);
      continue;
    }
    StartCall(intended_ns, measured);
  }
  // On schedule, sending "ends" where the next slot would have begun (so a run of n slots spans
  // n periods); a pacer that fell behind ends when it actually stopped.
  const int64_t stop_ns = std::max(NowNs(), std::min(next_intended_ns, end_ns_));
  stopping_.store(true, std::memory_order_relaxed);
  sending_.store(false, std::memory_order_relaxed);
  ReleaseInFlight();
  return stop_ns;
}

void LoadGenerator::ProgressLoop() {
  int64_t last_completed = 0;
  int64_t last_ns = start_ns_;
  std::unique_lock<std::mutex> lock(done_mu_);
  while (!done_cv_.wait_for(lock, std::chrono::seconds(1), [this] { return progress_stop_; })) {
    lock.unlock();
    const int64_t now = NowNs();
    Progress p;
    p.elapsed = absl::Nanoseconds(now - start_ns_);
    p.warming_up = now < measure_start_ns_;
    p.sent = sent_total_.load(std::memory_order_relaxed);
    p.completed = completed_total_.load(std::memory_order_relaxed);
    p.current_rate = now > last_ns ? static_cast<double>(p.completed - last_completed) * 1e9 /
                                         static_cast<double>(now - last_ns)
                                   : 0;
    p.in_flight = std::max<int64_t>(0, in_flight_.load(std::memory_order_relaxed) -
                                           (sending_.load(std::memory_order_relaxed) ? 1 : 0));
    p.errors = errors_total_.load(std::memory_order_relaxed);
    p.not_sent = not_sent_total_.load(std::memory_order_relaxed);
    last_completed = p.completed;
    last_ns = now;
    *options_.progress << FormatProgress(p) << std::endl;
    lock.lock();
  }
}

RunReport LoadGenerator::Run() {
  start_ns_ = NowNs();
  measure_start_ns_ = start_ns_ + absl::ToInt64Nanoseconds(options_.warmup);
  end_ns_ = measure_start_ns_ + absl::ToInt64Nanoseconds(options_.duration);

  std::thread progress;
  if (options_.progress != nullptr) progress = std::thread([this] { ProgressLoop(); });

  const int64_t send_stop_ns = open_loop_ ? RunOpenLoop() : RunClosedLoop();
  int64_t drained_ns = 0;
  {
    std::unique_lock<std::mutex> lock(done_mu_);
    // Every call has a deadline, so gRPC completes each one in bounded time.
    done_cv_.wait(lock, [this] { return drained_; });
    drained_ns = drained_ns_;
    progress_stop_ = true;
    done_cv_.notify_all();
  }
  if (progress.joinable()) progress.join();

  RunReport report;
  report.open_loop = open_loop_;
  report.target = options_.target;
  report.concurrency = options_.concurrency;
  report.rate = open_loop_ ? options_.rate : 0;
  report.max_in_flight = options_.max_in_flight;
  report.duration = options_.duration;
  report.warmup = options_.warmup;
  report.count = options_.count;
  report.deadline = options_.deadline;
  report.connections = static_cast<int>(stubs_.size());
  report.users = options_.users;
  report.distribution = options_.distribution;
  report.zipf_exponent = options_.zipf_exponent;
  report.mix = options_.mix;
  report.run_seed = run_seed_;
  report.sent = sent_measured_.load();
  report.not_sent = not_sent_measured_.load();
  report.max_send_lag = absl::Nanoseconds(max_send_lag_ns_);
  report.send_window = absl::Nanoseconds(std::max<int64_t>(0, send_stop_ns - measure_start_ns_));
  report.measured_window = absl::Nanoseconds(std::max<int64_t>(0, drained_ns - measure_start_ns_));
  Summarize(recorder_.Merge(), &report);
  return report;
}

}  // namespace orderhold::client::bench
