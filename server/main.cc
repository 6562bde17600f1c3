// orderhold-server: flags -> config -> App + /metrics exposer -> wait for SIGTERM/SIGINT
// (SIGHUP: re-read the --scope_limits and --authz_policy files).
#include <csignal>
#include <cstdio>
#include <exception>
#include <memory>
#include <vector>

#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "prometheus/exposer.h"
#include "prometheus/registry.h"
#include "server/app.h"
#include "server/common/log.h"
#include "server/config.h"

int main(int argc, char** argv) {
  // Debian's abseil is built with Mutex deadlock detection on: every lock then updates a global
  // lock graph (measured: ~2% of server CPU in GraphCycles::GetId under load). Tests keep it on.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  absl::SetProgramUsageMessage(
      "OrderHold: per-user quota of unpaid orders on Redis. Flags fall back to "
      "ORDERHOLD_<FLAG_UPPERCASE> environment variables.");
  // Not for --help and friends: they print each flag's current value, so a password given in
  // ORDERHOLD_REDIS_URL would be printed.
  if (!orderhold::AsksForUsage(argc, argv)) {
    if (absl::Status status = orderhold::ApplyEnvironmentFallbacks(); !status.ok()) {
      std::fprintf(stderr, "orderhold-server: %s\n", std::string(status.message()).c_str());
      return 2;
    }
  }
  absl::ParseCommandLine(argc, argv);
  absl::StatusOr<orderhold::Config> config = orderhold::ConfigFromFlags();
  if (!config.ok()) {
    std::fprintf(stderr, "orderhold-server: %s\n", std::string(config.status().message()).c_str());
    return 2;
  }

  // Block the stop signals before any thread exists, so only sigwait() below receives them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGHUP);  // re-read --scope_limits and --authz_policy
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  orderhold::SetLogFormat(config->log_format);
  orderhold::LogInfo("config: ", orderhold::DescribeConfig(*config));
  if (config->store == orderhold::StoreKind::kNoop) {
    orderhold::LogWarning("--store=noop: BENCHMARKING ONLY, nothing is stored and no limit holds");
  }
  auto registry = std::make_shared<prometheus::Registry>();
  std::unique_ptr<prometheus::Exposer> exposer;
  try {
    exposer = std::make_unique<prometheus::Exposer>(config->metrics_address);
  } catch (const std::exception& e) {  // civetweb throws when the port is taken
    orderhold::LogError("cannot serve metrics on ", config->metrics_address, ": ", e.what());
    return 1;
  }
  exposer->RegisterCollectable(registry);

  absl::StatusOr<std::unique_ptr<orderhold::App>> app = orderhold::App::Start(*config, *registry);
  if (!app.ok()) {
    orderhold::LogError(app.status().message());
    return 1;
  }
  const std::vector<int> metrics_ports = exposer->GetListeningPorts();
  // Tests read the ports from this line (tests/testing/server_process.cc): keep its shape.
  orderhold::LogInfo("serving gRPC on port ", (*app)->grpc_port(), ", metrics on port ",
                     metrics_ports.empty() ? 0 : metrics_ports.front(), " (/metrics)",
                     (*app)->health_port() > 0
                         ? absl::StrCat(", health on port ", (*app)->health_port())
                         : std::string());

  int signal_number = 0;
  while (sigwait(&stop_signals, &signal_number) == 0 && signal_number == SIGHUP) {
    (void)(*app)->ReloadScopeLimits();  // logs and counts its own failure
    (void)(*app)->ReloadAuthzPolicy();  // likewise
    (void)(*app)->ReloadTenants();      // likewise
  }
  orderhold::LogInfo("signal ", signal_number, ": NOT_SERVING, finishing in-flight calls");
  (*app)->Shutdown(config->shutdown_grace);
  orderhold::LogInfo("stopped");
  return 0;
}
