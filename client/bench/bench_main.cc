// orderhold-bench: flags -> LoadOptions -> connect -> LoadGenerator::Run -> report on stdout.
// Everything else is in client/bench/: load_generator.h (the run, and what the modes mean),
// workload.h (--mix, users, ids), stats.h and report.h (what the numbers mean, the output).
//
// Exit status:
//   0  the run completed, whatever status codes the calls got.
//   1  could not connect: a channel was not READY within 5 s. Also absl::ParseCommandLine's own
//      exit on a flag it cannot parse (unknown flag, "--duration=abc") and after --help, before
//      any of this code runs; its message names the flag.
//   2  a flag value is out of range or inconsistent (message "error: --flag ..." on stderr), or a
//      --tls_* file cannot be read, or the --call_log file cannot be created.
//   3  the run completed but writing the --call_log file failed (disk full).
#include <cstdint>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "client/bench/call_log.h"
#include "client/bench/load_generator.h"
#include "client/bench/report.h"
#include "client/bench/workload.h"
#include "client/tls_flags.h"
#include "orderhold/v1/orderhold.grpc.pb.h"

ABSL_FLAG(std::string, target, "localhost:50051", "OrderHold server address (any gRPC target).");
ABSL_FLAG(int, connections, 4,
          "Separate channels (HTTP/2 connections) to open; calls go round-robin over them.");
ABSL_FLAG(int, concurrency, 50, "Closed loop: calls kept outstanding at all times.");
ABSL_FLAG(double, rate, 0,
          "Calls per second; > 0 selects open loop (latency measured from the intended send "
          "time), 0 is closed loop.");
ABSL_FLAG(int, max_in_flight, 20000,
          "Open loop: cap on outstanding calls; scheduled calls over it are reported as "
          "not_sent.");
ABSL_FLAG(absl::Duration, duration, absl::Seconds(10), "Measured sending time, after --warmup.");
ABSL_FLAG(int64_t, count, 0,
          "Stop after this many measured calls (started, or scheduled in open loop); 0 = no "
          "limit. Whichever of --duration and --count comes first ends the run.");
ABSL_FLAG(absl::Duration, deadline, absl::Seconds(2), "Deadline of each call.");
ABSL_FLAG(absl::Duration, warmup, absl::Seconds(1),
          "Calls in this time before --duration are sent but not recorded.");
ABSL_FLAG(std::string, mix, "place=100",
          "Workload: method=weight pairs from place, pay, list, cancel, extend, get, release "
          "(ratios), e.g. place=70,pay=20,list=10. pay and cancel end holds this run placed; "
          "extend and get extend and read one of the newest of them (ExtendHold, GetHold); list "
          "and release (ReleaseHolds) draw a user.");
ABSL_FLAG(absl::Duration, ttl, absl::ZeroDuration(),
          "PlaceHold ttl, and ExtendHold's wanted time left; 0 leaves it unset (the server's "
          "--default_ttl).");
ABSL_FLAG(int64_t, scopes, 0,
          "PlaceHold scope: 0 sends none (unscoped); N > 0 draws one of N scopes event:0 .. "
          "event:<N-1> per call, uniformly.");
ABSL_FLAG(int64_t, quantity, 0, "PlaceHold quantity (units per hold); 0 leaves it unset (1).");
ABSL_FLAG(int64_t, scope_max_holds, 0,
          "With --scopes: the scope's hold limit carried in each PlaceHold (scope_limits); 0 with "
          "--scope_max_units 0 sends no scope_limits (the server's rules apply).");
ABSL_FLAG(int64_t, scope_max_units, 0,
          "With --scopes: the scope's unit limit carried in each PlaceHold (0: none).");
ABSL_FLAG(int64_t, users, 100000, "Size of the user population.");
ABSL_FLAG(std::string, user_prefix, "u", "User ids are this prefix followed by 0..users-1.");
ABSL_FLAG(std::string, distribution, "uniform",
          "How users are drawn: uniform, or zipf (user 0 the most popular).");
ABSL_FLAG(double, zipf_exponent, 1.1,
          "zipf only: exponent q > 1, P(user i) proportional to (1 + i)^-q.");
ABSL_FLAG(std::string, lb_policy, "",
          "gRPC load-balancing policy of each channel: empty (gRPC's pick_first) or round_robin, "
          "to spread calls over every address --target resolves to, e.g. "
          "--target=ipv4:127.0.0.1:50051,127.0.0.1:50052 --lb_policy=round_robin.");
ABSL_FLAG(std::string, call_log, "",
          "Write one JSON line per completed call to this file (method, ids, status code, start "
          "and end in Unix µs, what the answer said; warmup included): see "
          "client/bench/call_log.h. Empty: none.");
ABSL_FLAG(bool, json, false, "Print the report as one JSON object instead of a table.");
ABSL_FLAG(bool, progress, true, "Print a progress line on stderr once a second.");

namespace {

namespace bench = orderhold::client::bench;

constexpr int kExitConnect = 1;
constexpr int kExitUsage = 2;
constexpr int kExitCallLog = 3;
const absl::Duration kConnectTimeout = absl::Seconds(5);

constexpr char kUsage[] =
    "Generates load on an OrderHold server and reports throughput, latency percentiles and\n"
    "status codes per method.\n"
    "\n"
    "  orderhold-bench --target=host:port --concurrency=50 --duration=30s        (closed loop)\n"
    "  orderhold-bench --target=host:port --rate=2000 --mix=place=70,pay=20,list=10  (open loop)\n"
    "  orderhold-bench --target=host:port --scopes=4 --quantity=2 --scope_max_holds=2  (scoped)\n"
    "  orderhold-bench --target=host:port --mix=place=40,extend=30,get=20,pay=10  (extend, read)\n"
    "  orderhold-bench --target=host:port --tls_ca_file=ca.crt ...                 (over TLS)\n"
    "\n"
    "Exit status: 0 when the run completed (whatever the calls answered), 1 when the server\n"
    "could not be reached within 5s, 2 on an invalid flag value.";

int UsageError(absl::string_view message) {
  std::cerr << "error: " << message << "\n";
  return kExitUsage;
}

}  // namespace

int main(int argc, char** argv) {
  // As in the server: Debian's abseil checks every Mutex for deadlock cycles, a cost the generator
  // must not add to what it measures (the hold pool is locked on every PlaceHold, Pay,
  // CancelHold, ExtendHold and GetHold).
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  absl::SetProgramUsageMessage(kUsage);
  // absl's --help lists only flags from a file named after the program; ours live here.
  absl::FlagsUsageConfig usage_config;
  usage_config.contains_help_flags = [](absl::string_view file) {
    return absl::EndsWith(file, "client/bench/bench_main.cc") ||
           absl::EndsWith(file, orderhold::client::kTlsFlagsFile);
  };
  usage_config.contains_helpshort_flags = usage_config.contains_help_flags;
  absl::SetFlagsUsageConfig(usage_config);
  const std::vector<char*> positional = absl::ParseCommandLine(argc, argv);
  if (positional.size() > 1) {
    return UsageError(absl::StrCat("unexpected argument \"", positional[1],
                                   "\" (orderhold-bench takes flags only)"));
  }

  bench::LoadOptions options;
  options.target = absl::GetFlag(FLAGS_target);
  options.connections = absl::GetFlag(FLAGS_connections);
  options.concurrency = absl::GetFlag(FLAGS_concurrency);
  options.rate = absl::GetFlag(FLAGS_rate);
  options.max_in_flight = absl::GetFlag(FLAGS_max_in_flight);
  options.duration = absl::GetFlag(FLAGS_duration);
  options.count = absl::GetFlag(FLAGS_count);
  options.deadline = absl::GetFlag(FLAGS_deadline);
  options.warmup = absl::GetFlag(FLAGS_warmup);
  options.ttl = absl::GetFlag(FLAGS_ttl);
  options.place.scopes = absl::GetFlag(FLAGS_scopes);
  options.place.quantity = absl::GetFlag(FLAGS_quantity);
  options.place.scope_max_holds = absl::GetFlag(FLAGS_scope_max_holds);
  options.place.scope_max_units = absl::GetFlag(FLAGS_scope_max_units);
  options.users = absl::GetFlag(FLAGS_users);
  options.user_prefix = absl::GetFlag(FLAGS_user_prefix);
  options.zipf_exponent = absl::GetFlag(FLAGS_zipf_exponent);
  const absl::StatusOr<bench::Mix> mix = bench::ParseMix(absl::GetFlag(FLAGS_mix));
  if (!mix.ok()) return UsageError(mix.status().message());
  options.mix = *mix;
  const absl::StatusOr<bench::Distribution> distribution =
      bench::ParseDistribution(absl::GetFlag(FLAGS_distribution));
  if (!distribution.ok()) return UsageError(distribution.status().message());
  options.distribution = *distribution;
  if (const absl::Status valid = bench::ValidateOptions(options); !valid.ok()) {
    return UsageError(valid.message());
  }
  const absl::StatusOr<orderhold::client::TlsOptions> tls =
      orderhold::client::TlsOptionsFromFlags();
  if (!tls.ok()) return UsageError(tls.status().message());
  if (absl::GetFlag(FLAGS_progress)) options.progress = &std::cerr;
  const std::string lb_policy = absl::GetFlag(FLAGS_lb_policy);
  if (!lb_policy.empty() && lb_policy != "pick_first" && lb_policy != "round_robin") {
    return UsageError(
        absl::StrCat("--lb_policy must be pick_first or round_robin, got \"", lb_policy, "\""));
  }
  std::unique_ptr<bench::CallLog> call_log;
  if (const std::string path = absl::GetFlag(FLAGS_call_log); !path.empty()) {
    absl::StatusOr<std::unique_ptr<bench::CallLog>> opened = bench::CallLog::Open(path);
    if (!opened.ok()) return UsageError(opened.status().message());
    call_log = *std::move(opened);
    options.call_log = call_log.get();
  }

  const auto channels =
      bench::ConnectChannels(options.target, *tls, options.connections, kConnectTimeout, lb_policy);
  if (absl::IsInvalidArgument(channels.status())) return UsageError(channels.status().message());
  if (!channels.ok()) {
    std::cerr << "error: " << channels.status().message() << "\n";
    return kExitConnect;
  }
  std::vector<std::shared_ptr<orderhold::v1::OrderHold::StubInterface>> stubs;
  for (const auto& channel : *channels) stubs.push_back(orderhold::v1::OrderHold::NewStub(channel));

  bench::LoadGenerator generator(options, std::move(stubs));
  const bench::RunReport report = generator.Run();
  if (absl::GetFlag(FLAGS_json)) {
    std::cout << bench::FormatJsonReport(report) << "\n";
  } else {
    std::cout << bench::FormatTextReport(report);
  }
  if (call_log != nullptr && !call_log->Close()) {
    std::cerr << "error: --call_log: writing " << absl::GetFlag(FLAGS_call_log) << " failed\n";
    return kExitCallLog;
  }
  return 0;
}
