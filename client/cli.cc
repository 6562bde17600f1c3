#include "client/cli.h"

#include <google/protobuf/util/json_util.h>
#include <unistd.h>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"

namespace orderhold::client {

const char kCliUsage[] =
    "Places, pays, cancels and lists order holds on an OrderHold server; watches hold events.\n"
    "\n"
    "  orderhold-cli [--target host:port] [--timeout 5s] [--json] place USER ORDER [--ttl 45s]\n"
    "  orderhold-cli [--target host:port] [--timeout 5s] [--json] pay USER ORDER\n"
    "  orderhold-cli [--target host:port] [--timeout 5s] [--json] list USER\n"
    "  orderhold-cli [--target host:port] [--timeout 5s] [--json] cancel USER ORDER\n"
    "  orderhold-cli [--target host:port] [--timeout 5s] health [SERVICE]\n"
    "  orderhold-cli [--target host:port] watch --group G [--consumer C] [--ack]\n"
    "                [--outcomes EXPIRED,PAID,CANCELLED] [--start earliest|latest] [--max_events "
    "N]\n"
    "\n"
    "watch prints one JSON line per hold event and reconnects when the server goes away.\n"
    "health asks grpc.health.v1 about SERVICE (\"\" when omitted: ready while Redis answers;\n"
    "\"liveness\": up) and exits 0 only when SERVING (14 when NOT_SERVING): a probe for any\n"
    "runtime, over TLS too.\n"
    "Flags may come before or after the command. --ttl unset uses the server's default (30m).\n"
    "TLS: --tls_ca_file=ca.crt (implies --tls), plus --tls_cert_file=c.crt --tls_key_file=c.key\n"
    "for mutual TLS, --tls_server_name=NAME when the target's host is not in the certificate.\n"
    "Exit status: 0 on success; the gRPC status code (1-16) when the call fails, with\n"
    "\"error: CODE: message\" on stderr (8 = RESOURCE_EXHAUSTED: user at max holds, 5 = "
    "NOT_FOUND,\n"
    "14 = UNAVAILABLE); 64 on a usage error.";

std::string FormatRemaining(absl::Duration remaining) {
  if (remaining <= absl::ZeroDuration()) return "0s";
  if (remaining == absl::InfiniteDuration()) return "inf";
  if (remaining >= absl::Seconds(1)) {
    return absl::FormatDuration(absl::Trunc(remaining, absl::Seconds(1)));
  }
  if (remaining < absl::Milliseconds(1)) return "<1ms";
  return absl::FormatDuration(absl::Trunc(remaining, absl::Milliseconds(1)));
}

std::string FormatTimestamp(absl::Time t) {
  // RFC3339_full would print "+00:00"; "Z" is what people (and the proto JSON) use for UTC.
  return absl::FormatTime("%Y-%m-%d%ET%H:%M:%E*SZ", t, absl::UTCTimeZone());
}

std::string FormatHold(const orderhold::v1::Hold& hold) {
  return absl::StrCat(hold.order_id(), " (user ", hold.user_id(), ") expires in ",
                      FormatRemaining(FromProtoDuration(hold.remaining())), " at ",
                      FormatTimestamp(FromProtoTimestamp(hold.expire_time())));
}

std::string FormatPlaceHold(const orderhold::v1::PlaceHoldResponse& response) {
  const orderhold::v1::Hold& hold = response.hold();
  const std::string remaining = FormatRemaining(FromProtoDuration(hold.remaining()));
  if (response.created()) {
    return absl::StrFormat("placed %s for %s: expires in %s (%d/%d active)", hold.order_id(),
                           hold.user_id(), remaining, response.active_holds(),
                           response.max_holds());
  }
  return absl::StrFormat("%s for %s already held: expires in %s (created=false)", hold.order_id(),
                         hold.user_id(), remaining);
}

std::string FormatPay(const orderhold::v1::PayResponse& response) {
  const orderhold::v1::Hold& hold = response.hold();
  const std::string left = FormatRemaining(FromProtoDuration(hold.remaining()));
  if (response.already_paid()) {
    return absl::StrFormat("%s for %s was already paid (had %s left)", hold.order_id(),
                           hold.user_id(), left);
  }
  return absl::StrFormat("paid %s for %s (had %s left)", hold.order_id(), hold.user_id(), left);
}

std::string FormatCancel(const orderhold::v1::CancelHoldResponse& response) {
  const orderhold::v1::Hold& hold = response.hold();
  const std::string left = FormatRemaining(FromProtoDuration(hold.remaining()));
  if (response.already_cancelled()) {
    return absl::StrFormat("%s for %s was already cancelled (had %s left)", hold.order_id(),
                           hold.user_id(), left);
  }
  return absl::StrFormat("cancelled %s for %s (had %s left)", hold.order_id(), hold.user_id(),
                         left);
}

std::string FormatListHolds(absl::string_view user_id,
                            const orderhold::v1::ListHoldsResponse& response) {
  std::string out =
      absl::StrFormat("%s: %d/%d holds\n", user_id, response.holds_size(), response.max_holds());
  for (const orderhold::v1::Hold& hold : response.holds()) {
    absl::StrAppend(&out, "  ", FormatHold(hold), "\n");
  }
  return out;
}

std::string FormatError(const absl::Status& status) {
  return absl::StrCat("error: ", absl::StatusCodeToString(status.code()), ": ", status.message());
}

int ExitCodeFor(const absl::Status& status) { return static_cast<int>(status.code()); }

absl::StatusOr<CliCommand> ParseCommand(const std::vector<std::string>& args,
                                        std::optional<absl::Duration> ttl) {
  if (args.empty()) {
    return absl::InvalidArgumentError(
        "missing command (place, pay, cancel, list, watch or health)");
  }
  const std::string& name = args[0];
  CliCommand command;
  size_t want_args = 0;
  if (name == "place") {
    command.kind = CliCommand::Kind::kPlace;
    want_args = 2;
  } else if (name == "pay") {
    command.kind = CliCommand::Kind::kPay;
    want_args = 2;
  } else if (name == "list") {
    command.kind = CliCommand::Kind::kList;
    want_args = 1;
  } else if (name == "cancel") {
    command.kind = CliCommand::Kind::kCancel;
    want_args = 2;
  } else if (name == "watch") {
    command.kind = CliCommand::Kind::kWatch;
    want_args = 0;
  } else if (name == "health") {
    command.kind = CliCommand::Kind::kHealth;
    if (args.size() > 2) {
      return absl::InvalidArgumentError(
          absl::StrFormat("health takes [SERVICE], got %d arguments", args.size() - 1));
    }
    if (args.size() == 2) command.health_service = args[1];
    if (ttl.has_value())
      return absl::InvalidArgumentError("--ttl applies only to place, not health");
    return command;
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "unknown command \"", name, "\" (want place, pay, cancel, list, watch or health)"));
  }
  if (args.size() - 1 != want_args) {
    return absl::InvalidArgumentError(absl::StrFormat("%s takes %s, got %d argument(s)", name,
                                                      want_args == 2   ? "USER ORDER"
                                                      : want_args == 1 ? "USER"
                                                                       : "no arguments",
                                                      args.size() - 1));
  }
  if (ttl.has_value() && command.kind != CliCommand::Kind::kPlace) {
    return absl::InvalidArgumentError(absl::StrCat("--ttl applies only to place, not ", name));
  }
  if (want_args >= 1) command.user_id = args[1];
  if (want_args == 2) command.order_id = args[2];
  command.ttl = ttl;
  return command;
}

namespace {

// Writes either the human rendering or the JSON of a successful answer; returns the exit status.
int PrintResponse(const google::protobuf::Message& response, const std::string& human, bool json,
                  std::ostream& out, std::ostream& err) {
  if (!json) {
    out << human;
    if (human.empty() || human.back() != '\n') out << '\n';
    return 0;
  }
  google::protobuf::util::JsonPrintOptions options;
  options.always_print_primitive_fields = true;
  std::string text;
  const google::protobuf::util::Status status =
      google::protobuf::util::MessageToJsonString(response, &text, options);
  if (!status.ok()) {
    const absl::Status internal = absl::InternalError(
        absl::StrCat("cannot render the answer as JSON: ", status.message().as_string()));
    err << FormatError(internal) << '\n';
    return ExitCodeFor(internal);
  }
  out << text << '\n';
  return 0;
}

int PrintError(const absl::Status& status, std::ostream& err) {
  err << FormatError(status) << '\n';
  return ExitCodeFor(status);
}

}  // namespace

absl::Status ParseWatchFlags(const std::string& group, const std::string& consumer,
                             const std::string& outcomes, const std::string& start,
                             int64_t max_events, bool ack, CliCommand* command) {
  if (group.empty()) return absl::InvalidArgumentError("watch needs --group");
  orderhold::v1::WatchHoldEventsRequest& request = command->watch;
  request.set_consumer_group(group);
  if (consumer.empty()) {
    char host[256] = {0};
    if (gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
    request.set_consumer(absl::StrCat(host[0] != '\0' ? host : "cli", "-", getpid()));
  } else {
    request.set_consumer(consumer);
  }
  for (absl::string_view name : absl::StrSplit(outcomes, ',', absl::SkipEmpty())) {
    orderhold::v1::HoldOutcome outcome;
    if (!orderhold::v1::HoldOutcome_Parse(absl::AsciiStrToUpper(name), &outcome) ||
        outcome == orderhold::v1::HOLD_OUTCOME_UNSPECIFIED) {
      return absl::InvalidArgumentError(
          absl::StrCat("--outcomes: \"", name, "\" is not PAID, CANCELLED or EXPIRED"));
    }
    request.add_outcomes(outcome);
  }
  if (start == "earliest" || start.empty()) {
    request.set_start_position(orderhold::v1::EARLIEST);
  } else if (start == "latest") {
    request.set_start_position(orderhold::v1::LATEST);
  } else {
    return absl::InvalidArgumentError("--start must be earliest or latest");
  }
  if (max_events < 0) return absl::InvalidArgumentError("--max_events must be >= 0");
  command->max_events = max_events;
  command->ack = ack;
  return absl::OkStatus();
}

namespace {

// The watch loop of orderhold-cli: prints, acks, reconnects on UNAVAILABLE.
int RunWatch(const OrderHoldClient& client, const CliCommand& command, std::ostream& out,
             std::ostream& err) {
  google::protobuf::util::JsonPrintOptions options;
  options.always_print_primitive_fields = true;
  int64_t printed = 0;
  while (true) {
    grpc::ClientContext context;
    absl::Status ack_error;
    const absl::Status status = client.WatchHoldEvents(
        command.watch,
        [&](const orderhold::v1::HoldEvent& event) {
          std::string line;
          (void)google::protobuf::util::MessageToJsonString(event, &line, options);
          out << line << std::endl;
          if (command.ack) {
            auto acked = client.AckHoldEvents(command.watch.consumer_group(), {event.event_id()});
            if (!acked.ok()) {
              ack_error = acked.status();
              return false;
            }
          }
          ++printed;
          return command.max_events == 0 || printed < command.max_events;
        },
        context);
    if (!ack_error.ok()) return PrintError(ack_error, err);
    if (status.ok()) return 0;  // --max_events reached
    if (status.code() != absl::StatusCode::kUnavailable) return PrintError(status, err);
    err << FormatError(status) << "; reconnecting in 1s" << std::endl;
    absl::SleepFor(absl::Seconds(1));
  }
}

}  // namespace

int RunCommand(const OrderHoldClient& client, const CliCommand& command, bool json,
               std::ostream& out, std::ostream& err) {
  switch (command.kind) {
    case CliCommand::Kind::kCancel: {
      auto response = client.CancelHold(command.user_id, command.order_id);
      if (!response.ok()) return PrintError(response.status(), err);
      return PrintResponse(*response, json ? "" : FormatCancel(*response), json, out, err);
    }
    case CliCommand::Kind::kWatch:
      return RunWatch(client, command, out, err);
    case CliCommand::Kind::kPlace: {
      auto response = client.PlaceHold(command.user_id, command.order_id, command.ttl);
      if (!response.ok()) return PrintError(response.status(), err);
      return PrintResponse(*response, json ? "" : FormatPlaceHold(*response), json, out, err);
    }
    case CliCommand::Kind::kPay: {
      auto response = client.Pay(command.user_id, command.order_id);
      if (!response.ok()) return PrintError(response.status(), err);
      return PrintResponse(*response, json ? "" : FormatPay(*response), json, out, err);
    }
    case CliCommand::Kind::kList: {
      auto response = client.ListHolds(command.user_id);
      if (!response.ok()) return PrintError(response.status(), err);
      return PrintResponse(*response, json ? "" : FormatListHolds(command.user_id, *response), json,
                           out, err);
    }
    case CliCommand::Kind::kHealth: {
      auto status = client.Health(command.health_service);
      if (!status.ok()) return PrintError(status.status(), err);
      const std::string name = grpc::health::v1::HealthCheckResponse::ServingStatus_Name(*status);
      out << name << '\n';
      if (*status == grpc::health::v1::HealthCheckResponse::SERVING) return 0;
      return PrintError(absl::UnavailableError(
                            absl::StrCat("health of \"", command.health_service, "\" is ", name)),
                        err);
    }
  }
  return PrintError(absl::InternalError("unhandled command"), err);
}

}  // namespace orderhold::client
