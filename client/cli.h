// The logic of orderhold-cli, kept apart from flag parsing (cli_main.cc) so tests can drive it.
//
//   orderhold-cli [--target host:port] [--timeout 5s] [--json] place USER ORDER [--ttl 45s]
//   orderhold-cli [--target host:port] [--timeout 5s] [--json] pay USER ORDER
//   orderhold-cli [--target host:port] [--timeout 5s] [--json] list USER
//   orderhold-cli [--target host:port] [--timeout 5s] [--json] cancel USER ORDER
//   orderhold-cli [--target host:port] [--timeout 5s] health [SERVICE]
//   orderhold-cli [--target host:port] watch --group G [--consumer C] [--ack]
//                 [--outcomes EXPIRED,PAID,CANCELLED] [--start earliest|latest] [--max_events N]
//
// TLS: --tls (server verified against gRPC's default roots), --tls_ca_file (implies --tls),
// --tls_cert_file/--tls_key_file (mutual TLS), --tls_server_name (client/tls_flags.h); flags may
// come before or after the command.
//
// watch prints one JSON line (proto3 JSON of HoldEvent) per event, flushed, until interrupted or
// --max_events were printed; with --ack each event is acked after it was printed. When the server
// goes away (UNAVAILABLE, e.g. a restart) it reconnects every second and resumes: unacked events
// come back (its own at once, under the same --consumer name). The default consumer name is
// "<hostname>-<pid>".
//
// health asks the server's grpc.health.v1 service about SERVICE ("" when omitted; the server also
// knows "orderhold.v1.OrderHold" and "liveness"), prints the status name (SERVING, NOT_SERVING)
// and exits 0 only when SERVING, 14 (UNAVAILABLE) when not: an exec probe that also speaks TLS.
//
// Output. Human-readable lines on stdout by default (see the Format* functions), or with --json the
// response message as one line of proto3 JSON, default-valued fields included.
//
// Exit status.
//   0        the call succeeded.
//   1..16    the call failed; the number is its gRPC status code (e.g. 8 RESOURCE_EXHAUSTED,
//            5 NOT_FOUND, 14 UNAVAILABLE, 4 DEADLINE_EXCEEDED), and stderr has one line
//            "error: <CODE_NAME>: <message>".
//   64       usage error (EX_USAGE from sysexits.h): unknown command, wrong argument count, --ttl
//            on a command other than place, watch without --group or with a bad --outcomes or
//            --start, non-positive --timeout, a --tls_* file that cannot be read or a client
//            certificate without its key. Usage text goes to stderr.
//            64 because 2, the usual usage exit, is gRPC's UNKNOWN.
// absl::ParseCommandLine itself exits with 1 (CANCELLED's number; a CLI call is never cancelled)
// on a flag it cannot parse (unknown flag, "--timeout=abc") and after printing --help, before any
// of this code runs.
//
// All functions here are pure except RunCommand, which calls the client and writes to the given
// streams. Thread-compatible; nothing here keeps state.
#ifndef ORDERHOLD_CLIENT_CLI_H_
#define ORDERHOLD_CLIENT_CLI_H_

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "client/orderhold_client.h"
#include "orderhold/v1/orderhold.pb.h"

namespace orderhold::client {

// Exit status for usage errors (sysexits.h EX_USAGE); above every gRPC code (0..16).
inline constexpr int kExitUsage = 64;

// The usage text (without the program name line absl adds for --help).
extern const char kCliUsage[];

// A time left, for people: whole seconds when at least 1s ("29m58s", "1h5s", "7s"), whole
// milliseconds under 1s ("850ms"), "<1ms" when positive but under a millisecond, "0s" when zero or
// negative (already expired), "inf" for absl::InfiniteDuration(). Truncates, never rounds up, so it
// never promises more time than there is.
std::string FormatRemaining(absl::Duration remaining);

// An instant as RFC 3339 in UTC with a "Z" suffix; fractional seconds only when non-zero
// ("2026-11-21T10:00:00Z", "2026-11-21T10:00:00.25Z").
std::string FormatTimestamp(absl::Time t);

// One line for a hold, no trailing newline:
//   "order-1 (user alice) expires in 29m58s at 2026-11-21T10:00:00Z"
std::string FormatHold(const orderhold::v1::Hold& hold);

// One line for a PlaceHold answer, no trailing newline:
//   created:  "placed order-1 for alice: expires in 29m58s (1/3 active)"
//   existing: "order-1 for alice already held: expires in 29m58s (created=false)"
std::string FormatPlaceHold(const orderhold::v1::PlaceHoldResponse& response);

// One line for a Pay answer, no trailing newline: "paid order-1 for alice (had 12m3s left)", or
// "order-1 for alice was already paid (had 12m3s left)" for a retry.
std::string FormatPay(const orderhold::v1::PayResponse& response);

// One line for a CancelHold answer, no trailing newline: "cancelled order-1 for alice (had 12m3s
// left)", or "order-1 for alice was already cancelled (had 12m3s left)" for a retry.
std::string FormatCancel(const orderhold::v1::CancelHoldResponse& response);

// A header "alice: 2/3 holds" then one line per hold, indented by two spaces; every line ends in
// '\n'. `user_id` is the user asked about (the response does not repeat it when it is empty).
std::string FormatListHolds(absl::string_view user_id,
                            const orderhold::v1::ListHoldsResponse& response);

// The stderr line for a failed call, no trailing newline: "error: RESOURCE_EXHAUSTED: <message>".
std::string FormatError(const absl::Status& status);

// The process exit status for a call's outcome: 0 for OK, else the numeric status code.
int ExitCodeFor(const absl::Status& status);

// A parsed command line.
struct CliCommand {
  enum class Kind { kPlace, kPay, kList, kCancel, kWatch, kHealth };
  Kind kind = Kind::kList;
  std::string user_id;         // Empty for kWatch.
  std::string order_id;        // Empty for kList and kWatch.
  std::string health_service;  // kHealth only: the service asked about ("" = the server).
  // kWatch only (from --group, --consumer, --ack, --outcomes, --start, --max_events; set by the
  // caller after ParseCommand, checked by ParseWatchFlags).
  orderhold::v1::WatchHoldEventsRequest watch;
  bool ack = false;
  int64_t max_events = 0;  // 0: no limit
  // Only for kPlace; set whenever --ttl was given, even to 0s or a negative value, so that the
  // server (not the CLI) decides whether it is valid.
  std::optional<absl::Duration> ttl;
};

// Builds a command from the positional arguments (argv[0] excluded) and the --ttl flag.
// Returns INVALID_ARGUMENT describing the mistake on a usage error (no or unknown command, wrong
// argument count, --ttl with anything but place); the caller exits with kExitUsage.
absl::StatusOr<CliCommand> ParseCommand(const std::vector<std::string>& args,
                                        std::optional<absl::Duration> ttl);

// Fills command->watch from the watch flags. INVALID_ARGUMENT (a usage error) when `group` is
// empty, `outcomes` names something other than PAID, CANCELLED or EXPIRED (comma-separated, any
// case), `start` is not "earliest" or "latest", or max_events < 0. An empty `consumer` becomes
// "<hostname>-<pid>".
absl::Status ParseWatchFlags(const std::string& group, const std::string& consumer,
                             const std::string& outcomes, const std::string& start,
                             int64_t max_events, bool ack, CliCommand* command);

// Runs `command` against `client`: writes the human or JSON rendering of the answer to `out`, or
// FormatError to `err`. Returns the exit status (ExitCodeFor the call's status; 13 INTERNAL if the
// answer cannot be rendered as JSON).
int RunCommand(const OrderHoldClient& client, const CliCommand& command, bool json,
               std::ostream& out, std::ostream& err);

}  // namespace orderhold::client

#endif  // ORDERHOLD_CLIENT_CLI_H_
