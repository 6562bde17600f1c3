// orderhold-cli: flags -> command -> one call -> output and exit status. The logic (and the exit
// status contract) is in client/cli.h; this file only parses the command line.
#include <cstdint>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/time/time.h"
#include "client/cli.h"
#include "client/orderhold_client.h"
#include "client/tls_flags.h"

ABSL_FLAG(std::string, target, "localhost:50051", "OrderHold server address (any gRPC target).");
ABSL_FLAG(absl::Duration, timeout, absl::Seconds(5), "Deadline for the call, e.g. 500ms, 5s.");
ABSL_FLAG(std::string, tenant, "",
          "The tenant an operator acts in on a server with --tenants (the orderhold-tenant "
          "header). Empty: none.");
ABSL_FLAG(bool, json, false, "Print the response message as proto3 JSON instead of text.");
// std::optional rather than a sentinel default: any given value, 0s or negative included, is sent
// to the server, which owns the validation (INVALID_ARGUMENT naming `ttl`).
ABSL_FLAG(std::optional<absl::Duration>, ttl, std::nullopt,
          "place: how long the hold lives, e.g. 45s, 10m; extend: the wanted time left from now "
          "(never shortens, never passes the hold's cap). Unset: the server's default.");
ABSL_FLAG(std::string, request_id, "",
          "extend: an id unique per attempt (e.g. a UUID), the same on its retries, so a "
          "retried extend counts once against the server's --max_extensions. Unset: none. "
          "return (required): the return's id (e.g. the refund's), the same on its retries, so "
          "a retried return gives the units back once.");
ABSL_FLAG(std::string, payment_reference, "",
          "pay only: the payment provider's reference of the charge (1-128 bytes), kept with the "
          "outcome; a second pay with another is refused (9). Unset: none.");

ABSL_FLAG(std::string, scope, "",
          "place: the scope the hold also counts against, e.g. event:E42; list, release: only "
          "that scope's holds. Unset: none.");
// std::optional: given or not is what decides whether the command may take it.
ABSL_FLAG(std::optional<int64_t>, quantity, std::nullopt,
          "place only: units held, e.g. tickets. Unset: the server counts 1.");
// On the command line never set by absl: main takes every --label out of argv first
// (TakeRepeatedFlag), since absl keeps only the last value of a repeated flag and splits values on
// commas (a label value may hold one). Declared for --help, and read for a --flagfile, where it is
// absl's comma-separated list (--label=seat=A12,row=3: there a value cannot hold a comma).
ABSL_FLAG(std::vector<std::string>, label, {},
          "place only, repeatable: one label key=value stored with the hold, e.g. --label "
          "seat=A12 --label row=3.");
ABSL_FLAG(std::optional<int64_t>, scope_max_holds, std::nullopt,
          "place only, with --scope: the scope's limit of live holds for this placement (0: none). "
          "Either this or --scope_max_units sends the scope's limits; unset: the server's rules.");
ABSL_FLAG(std::optional<int64_t>, scope_max_units, std::nullopt,
          "place only, with --scope: the scope's limit of live units for this placement (0: "
          "none).");
ABSL_FLAG(std::string, limit_class, "",
          "place only, with --scope: the class of the scope's runtime rule (rule-put --class) "
          "the hold is placed under, its limits in place of the rule's per-user ones; refused "
          "(7) unless this client's certificate is among its principals. Unset: none.");

// The rule commands' and scope-close's (ParseRuleFlags). Times are strings, so that a bad one is
// a usage error naming the flag (64), not absl's exit 1.
ABSL_FLAG(std::optional<int64_t>, max_holds, std::nullopt,
          "rule-put only: each user's live holds in the scope, at most (0: none). Either this or "
          "--max_units sends the rule's per-user limits.");
ABSL_FLAG(std::optional<int64_t>, max_units, std::nullopt,
          "rule-put only: each user's live units in the scope, at most (0: none).");
ABSL_FLAG(std::optional<int64_t>, total_max_holds, std::nullopt,
          "rule-put only: the scope's live holds across every user, at most (0: none).");
ABSL_FLAG(std::optional<int64_t>, total_max_units, std::nullopt,
          "rule-put only: the scope's live units across every user, at most (0: none).");
ABSL_FLAG(std::optional<int64_t>, capacity_units, std::nullopt,
          "rule-put only: the scope's live plus sold units, at most (0: none).");
ABSL_FLAG(std::optional<int64_t>, max_purchased_units, std::nullopt,
          "rule-put only: each user's units in the scope, held plus bought, at most (0: none).");
ABSL_FLAG(std::optional<int64_t>, max_purchased_holds, std::nullopt,
          "rule-put only: each user's holds in the scope, held plus bought, at most (0: none).");
ABSL_FLAG(std::string, state, "",
          "rule-put only: OPEN, PAUSED or CLOSED (case matters). Unset: OPEN.");
ABSL_FLAG(std::string, open_time, "",
          "rule-put only: no hold is placed before this RFC 3339 time, e.g. "
          "2026-12-07T10:00:00Z (a PAUSED rule opens then). Unset: none.");
ABSL_FLAG(std::string, close_time, "",
          "rule-put only: no hold is placed from this RFC 3339 time on. Unset: none.");
ABSL_FLAG(std::string, expire_time, "",
          "rule-put only: the rule is deleted at this RFC 3339 time (the server's --scope_limits "
          "file applies again). Unset: never.");
// On the command line never set by absl: main takes every --class out of argv first
// (TakeRepeatedFlag), as --label. Declared for --help, and read for a --flagfile, where it is
// absl's comma-separated list (there a class cannot hold a comma, e.g. a subject principal).
ABSL_FLAG(std::vector<std::string>, class, {},
          "rule-put only, repeatable: one class of buyers with limits of their own, "
          "NAME;key=value;... with the keys max_holds, max_units, max_purchased_units, "
          "max_purchased_holds (0: none) and principal (repeatable, who may place in it; all "
          "after the first '='), e.g. --class "
          "'box_office;max_units=20;principal=uri:spiffe://t/box-office;principal=dns:desk'.");
ABSL_FLAG(std::string, etag, "",
          "rule-put, rule-delete: the etag of the rule read; the call changes the rule only if "
          "nobody changed it since (else 10, ABORTED). Unset: whatever the rule is.");
ABSL_FLAG(std::optional<int64_t>, page_size, std::nullopt,
          "rule-list only: rules per page (at most 1000). Unset: the server's default, 100.");
ABSL_FLAG(std::string, page_token, "",
          "rule-list only: the next_page_token of the page before. Unset: the first page.");
ABSL_FLAG(bool, release_holds, false,
          "scope-close only: also cancel every live hold of the scope, one event each.");

ABSL_FLAG(std::string, group, "", "watch only: the consumer group (required).");
ABSL_FLAG(std::string, consumer, "",
          "watch only: this consumer's name in the group. Unset: <hostname>-<pid>.");
ABSL_FLAG(bool, ack, false, "watch only: ack each event after printing it.");
ABSL_FLAG(std::string, outcomes, "",
          "watch only: comma-separated outcomes to receive (PAID,CANCELLED,EXPIRED,RETURNED). "
          "Unset: all.");
ABSL_FLAG(std::string, start, "earliest",
          "watch only: where a new group starts: earliest (retained history) or latest.");
ABSL_FLAG(int64_t, max_events, 0, "watch only: exit after this many events (0: never).");

namespace {

int UsageError(const std::string& message) {
  std::cerr << "error: " << message << "\n\n" << orderhold::client::kCliUsage << "\n";
  return orderhold::client::kExitUsage;
}

// The flags of the rule commands and scope-close, as given; `classes` are the --class values
// taken out of argv (TakeRepeatedFlag).
orderhold::client::RuleFlags RuleFlagsFromFlags(const std::vector<std::string>& classes) {
  orderhold::client::RuleFlags flags;
  flags.max_holds = absl::GetFlag(FLAGS_max_holds);
  flags.max_units = absl::GetFlag(FLAGS_max_units);
  flags.total_max_holds = absl::GetFlag(FLAGS_total_max_holds);
  flags.total_max_units = absl::GetFlag(FLAGS_total_max_units);
  flags.capacity_units = absl::GetFlag(FLAGS_capacity_units);
  flags.max_purchased_units = absl::GetFlag(FLAGS_max_purchased_units);
  flags.max_purchased_holds = absl::GetFlag(FLAGS_max_purchased_holds);
  flags.state = absl::GetFlag(FLAGS_state);
  flags.open_time = absl::GetFlag(FLAGS_open_time);
  flags.close_time = absl::GetFlag(FLAGS_close_time);
  flags.expire_time = absl::GetFlag(FLAGS_expire_time);
  flags.classes = absl::GetFlag(FLAGS_class);
  flags.classes.insert(flags.classes.end(), classes.begin(), classes.end());
  flags.etag = absl::GetFlag(FLAGS_etag);
  flags.page_size = absl::GetFlag(FLAGS_page_size);
  flags.page_token = absl::GetFlag(FLAGS_page_token);
  flags.release_holds = absl::GetFlag(FLAGS_release_holds);
  return flags;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(orderhold::client::kCliUsage);
  // absl's --help lists only flags from a file named after the program (orderhold-cli.cc); ours
  // live here. Note that --help itself exits with 1 (absl's choice).
  absl::FlagsUsageConfig usage_config;
  usage_config.contains_help_flags = [](absl::string_view file) {
    return absl::EndsWith(file, "client/cli_main.cc") ||
           absl::EndsWith(file, orderhold::client::kTlsFlagsFile);
  };
  usage_config.contains_helpshort_flags = usage_config.contains_help_flags;
  absl::SetFlagsUsageConfig(usage_config);
  std::vector<char*> flags_and_args(argv, argv + argc);
  absl::StatusOr<std::vector<std::string>> labels =
      orderhold::client::TakeRepeatedFlag("label", &flags_and_args);
  if (!labels.ok()) return UsageError(std::string(labels.status().message()));
  absl::StatusOr<std::vector<std::string>> classes =
      orderhold::client::TakeRepeatedFlag("class", &flags_and_args);
  if (!classes.ok()) return UsageError(std::string(classes.status().message()));
  const std::vector<char*> positional =
      absl::ParseCommandLine(static_cast<int>(flags_and_args.size()), flags_and_args.data());
  // positional[0] is the program name.
  const std::vector<std::string> args(positional.begin() + 1, positional.end());

  absl::StatusOr<orderhold::client::CliCommand> command =
      orderhold::client::ParseCommand(args, absl::GetFlag(FLAGS_ttl));
  if (!command.ok()) return UsageError(std::string(command.status().message()));
  orderhold::client::HoldFlags hold_flags;
  hold_flags.scope = absl::GetFlag(FLAGS_scope);
  hold_flags.request_id = absl::GetFlag(FLAGS_request_id);
  hold_flags.payment_reference = absl::GetFlag(FLAGS_payment_reference);
  hold_flags.quantity = absl::GetFlag(FLAGS_quantity);
  hold_flags.labels = absl::GetFlag(FLAGS_label);
  hold_flags.labels.insert(hold_flags.labels.end(), labels->begin(), labels->end());
  hold_flags.scope_max_holds = absl::GetFlag(FLAGS_scope_max_holds);
  hold_flags.scope_max_units = absl::GetFlag(FLAGS_scope_max_units);
  hold_flags.limit_class = absl::GetFlag(FLAGS_limit_class);
  if (const absl::Status held = orderhold::client::ParseHoldFlags(hold_flags, &*command);
      !held.ok()) {
    return UsageError(std::string(held.message()));
  }
  if (const absl::Status rule =
          orderhold::client::ParseRuleFlags(RuleFlagsFromFlags(*classes), &*command);
      !rule.ok()) {
    return UsageError(std::string(rule.message()));
  }
  if (command->kind == orderhold::client::CliCommand::Kind::kWatch) {
    const absl::Status watch = orderhold::client::ParseWatchFlags(
        absl::GetFlag(FLAGS_group), absl::GetFlag(FLAGS_consumer), absl::GetFlag(FLAGS_outcomes),
        absl::GetFlag(FLAGS_start), absl::GetFlag(FLAGS_max_events), absl::GetFlag(FLAGS_ack),
        &*command);
    if (!watch.ok()) return UsageError(std::string(watch.message()));
  }

  orderhold::client::ClientOptions options;
  options.timeout = absl::GetFlag(FLAGS_timeout);
  options.tenant = absl::GetFlag(FLAGS_tenant);
  if (options.timeout <= absl::ZeroDuration()) {
    return UsageError("--timeout must be positive, got " + absl::FormatDuration(options.timeout));
  }

  const absl::StatusOr<orderhold::client::TlsOptions> tls =
      orderhold::client::TlsOptionsFromFlags();
  if (!tls.ok()) return UsageError(std::string(tls.status().message()));

  const absl::StatusOr<std::unique_ptr<orderhold::client::OrderHoldClient>> client =
      orderhold::client::OrderHoldClient::Create(absl::GetFlag(FLAGS_target), *tls, options);
  // A TLS file that cannot be read: the command line names a wrong file.
  if (!client.ok()) return UsageError(std::string(client.status().message()));
  return orderhold::client::RunCommand(**client, *command, absl::GetFlag(FLAGS_json), std::cout,
                                       std::cerr);
}
