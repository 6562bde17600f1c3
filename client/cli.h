// The logic of orderhold-cli, kept apart from flag parsing (cli_main.cc) so tests can drive it.
//
//   orderhold-cli [--target host:port] [--timeout 5s] [--json] place USER ORDER [--ttl 45s]
//                 [--scope S] [--quantity N] [--label k=v]... [--scope_max_holds N]
//                 [--scope_max_units N] [--limit_class NAME]
//   orderhold-cli [--target host:port] [--timeout 5s] [--json] extend USER ORDER [--ttl 10m]
//                 [--request_id ID]
//   orderhold-cli [--target host:port] [--timeout 5s] [--json] pay USER ORDER
//                 [--payment_reference REF]
//   orderhold-cli [--target host:port] [--timeout 5s] [--json] return USER ORDER UNITS
//                 --request_id ID
//   orderhold-cli [--target host:port] [--timeout 5s] [--json] get USER ORDER
//   orderhold-cli [--target host:port] [--timeout 5s] [--json] list USER [--scope S]
//   orderhold-cli [--target host:port] [--timeout 5s] [--json] cancel USER ORDER
//   orderhold-cli [--target host:port] [--timeout 5s] [--json] release USER [--scope S]
//   orderhold-cli [--target host:port] [--timeout 5s] health [SERVICE]
//   orderhold-cli [--target host:port] [--timeout 5s] [--json] rule-put SCOPE [--max_holds N]
//                 [--max_units N] [--total_max_holds N] [--total_max_units N]
//                 [--capacity_units N] [--max_purchased_units N] [--max_purchased_holds N]
//                 [--state OPEN|PAUSED|CLOSED] [--open_time T] [--close_time T]
//                 [--expire_time T] [--class 'NAME;key=value;...']... [--etag ETAG]
//   orderhold-cli [--target host:port] [--timeout 5s] [--json] rule-get SCOPE
//   orderhold-cli [--target host:port] [--timeout 5s] [--json] rule-list [--page_size N]
//                 [--page_token T]
//   orderhold-cli [--target host:port] [--timeout 5s] [--json] rule-delete SCOPE [--etag ETAG]
//   orderhold-cli [--target host:port] [--timeout 5s] [--json] scope-close SCOPE [--release_holds]
//   orderhold-cli [--target host:port] watch --group G [--consumer C] [--ack]
//                 [--outcomes EXPIRED,PAID,CANCELLED,RETURNED] [--start earliest|latest]
//                 [--max_events N]
//
// TLS: --tls (server verified against gRPC's default roots), --tls_ca_file (implies --tls),
// --tls_cert_file/--tls_key_file (mutual TLS), --tls_server_name (client/tls_flags.h); flags may
// come before or after the command.
//
// place's --scope, --quantity, --label (repeatable, one k=v each), --scope_max_holds,
// --scope_max_units and --limit_class fill the PlaceHoldRequest fields of the same names (either
// limit flag sends scope_limits, the other then 0 = no limit; --limit_class names a class of the
// scope's runtime rule); list's and release's --scope filter. The values
// are sent as given and the server validates them (INVALID_ARGUMENT naming the field), except
// what cannot be sent at all or is surely a slip, which is a usage error naming the flag: see
// ParseHoldFlags.
//
// The rule commands call PutScopeRule, GetScopeRule, ListScopeRules (one page: --page_token goes
// on), DeleteScopeRule and CloseScope (--release_holds also ends the scope's live holds). rule-put
// sends the whole rule: a flag not given is 0 / unset there, not the stored value; --max_holds and
// --max_units fill ScopeRule.limits (either one sends it), the times are RFC 3339
// ("2026-12-07T10:00:00Z"), --class (repeatable, one class each) fills ScopeRule.classes:
// "NAME;key=value;..." with the keys max_holds, max_units (LimitClass.limits, sent when either is
// given), max_purchased_units, max_purchased_holds and principal (repeatable; its value is all
// after the first '=', so "principal=subject:CN=desk,O=T" is one). See ParseRuleFlags.
//
// extend calls ExtendHold: --ttl is the wanted time left from now (unset: the server's
// --default_ttl), --request_id makes a retried call count once against the server's
// --max_extensions. Its refusal once the extensions are used up (RESOURCE_EXHAUSTED, exit 8)
// prints the QuotaFailure ("hold/extensions") and ErrorInfo (HOLD_EXTENSION_LIMIT) as a PlaceHold
// refusal does. get calls GetHold (a live or an ended hold); release calls ReleaseHolds.
//
// return calls ReturnUnits: gives back UNITS of a PAID hold (a refund), sent as given (0 too: the
// server judges it). --request_id is required (the refund's id): a retry with the same answers
// the first return again ("already returned") and changes nothing, so a return that timed out is
// retried with it. A return of more units than the hold has left is FAILED_PRECONDITION (exit 9)
// with its ErrorInfo (RETURN_EXCEEDS_QUANTITY).
//
// watch prints one JSON line (FormatHoldEvent) per event, flushed, until interrupted or
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
// response message as one line of proto3 JSON, default-valued fields included. The human lines of
// a call that uses none of the scopes-and-units features read exactly as before them: a hold's
// scope, units, labels and place time are shown only for a hold that has a scope, more than one
// unit or labels, and the usage lines only when a scope or units are in play (ShowsUsage). A
// hold's lifetime cap ("cap <time>") is shown whenever it has one (every hold a server with
// ExtendHold places), its extensions when there were any.
//
// Exit status.
//   0        the call succeeded.
//   1..16    the call failed; the number is its gRPC status code (e.g. 8 RESOURCE_EXHAUSTED,
//            5 NOT_FOUND, 14 UNAVAILABLE, 4 DEADLINE_EXCEEDED), and stderr has one line
//            "error: <CODE_NAME>: <message>", followed by one indented line per error detail the
//            server sent (FormatErrorDetails: a refused PlaceHold's quota violations, reason and
//            retry delay; a refused ExtendHold's violation and reason). With --json, a failure
//            that carries details also prints them on stdout as one line of proto3 JSON of
//            google.rpc.Status.
//   64       usage error (EX_USAGE from sysexits.h): unknown command, wrong argument count, --ttl
//            on a command other than place and extend, return without --request_id or with a
//            UNITS that is not a number from 0 to 4294967295, a flag of place, extend, pay,
//            return, list or release given to another command or with a bad value
//            (ParseHoldFlags), a flag of the rule commands or scope-close likewise
//            (ParseRuleFlags), watch without --group or with a bad --outcomes or --start,
//            non-positive --timeout, a --tls_* file that cannot be read or a client certificate
//            without its key. Usage text goes to stderr.
//            64 because 2, the usual usage exit, is gRPC's UNKNOWN.
// absl::ParseCommandLine itself exits with 1 (CANCELLED's number; a CLI call is never cancelled)
// on a flag it cannot parse (unknown flag, "--timeout=abc", "--quantity=two") and after printing
// --help, before any of this code runs.
//
// All functions here are pure except RunCommand, which calls the client and writes to the given
// streams. Thread-compatible; nothing here keeps state.
#ifndef ORDERHOLD_CLIENT_CLI_H_
#define ORDERHOLD_CLIENT_CLI_H_

#include <cstdint>
#include <map>
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

// What a hold carries beyond its ids and expiry, or "" when it has none of it: "scope event:E42
// (max_holds 2, max_units 8), 2 units, labels row=12 seat=A1, placed at 2026-11-21T09:30:00Z, cap
// 2026-11-21T11:30:00Z, extensions 2". The first four only for a hold with a scope, more than one
// unit or labels (the scope limits it was placed under, those that are not 0; labels by key;
// "placed at" only when place_time is set); "cap" (Hold.max_expire_time, the latest expiry
// ExtendHold can give it) when set; "extensions" when not 0. A plain hold of this release thus
// reads "cap 2026-11-21T11:30:00Z", one of a server without ExtendHold "".
std::string FormatHoldDetails(const orderhold::v1::Hold& hold);

// One line for a hold, no trailing newline:
//   "order-1 (user alice) expires in 29m58s at 2026-11-21T10:00:00Z"
// followed by "; " and FormatHoldDetails when that is not empty.
std::string FormatHold(const orderhold::v1::Hold& hold);

// One usage line, no trailing newline: "<level>: holds 1/3, units 2/8", a limit of 0 shown as
// "(no limit)": "user: holds 1/3, units 2 (no limit)".
std::string FormatUsage(absl::string_view level, const orderhold::v1::LimitUsage& usage);

// Whether an answer's usage lines are shown: there is a scope level (`scope_usage` non-null), a
// unit limit for the user, or units that differ from the holds (quantities above 1). False for an
// answer to a call without the scopes-and-units features, whose output thus stays as it was.
bool ShowsUsage(const orderhold::v1::LimitUsage& user_usage,
                const orderhold::v1::LimitUsage* scope_usage);

// A PlaceHold answer, no trailing newline. The first line:
//   created:  "placed order-1 for alice: expires in 29m58s (1/3 active)"
//   existing: "order-1 for alice already held: expires in 29m58s (created=false)"
// followed by "; " and FormatHoldDetails when that is not empty. When ShowsUsage, the usage lines
// follow, one per level: "user: holds 1/3, units 2/8" and "scope event:E42: holds 1/2, units 2/8".
std::string FormatPlaceHold(const orderhold::v1::PlaceHoldResponse& response);

// One line for a Pay answer, no trailing newline: "paid order-1 for alice (had 12m3s left)", or
// "order-1 for alice was already paid (had 12m3s left)" for a retry.
std::string FormatPay(const orderhold::v1::PayResponse& response);

// A ReturnUnits answer, no trailing newline. The first line:
//   returned:  "returned 2 units of order-9 for alice (3 of 4 returned in all)"
//   a retry:   "2 units of order-9 for alice were already returned (3 of 4 returned in all)"
// ("1 unit ... was"; "(3 returned in all)" when the answer has no hold quantity). When the answer
// has scope_usage (the scope has a runtime rule), the user's purchase-cap level there follows on a
// second line: "scope event:E42 held + bought: holds 1/2, units 3/8" (FormatUsage: a cap of 0
// reads "(no limit)").
std::string FormatReturnUnits(const orderhold::v1::ReturnUnitsResponse& response);

// One line for a CancelHold answer, no trailing newline: "cancelled order-1 for alice (had 12m3s
// left)", or "order-1 for alice was already cancelled (had 12m3s left)" for a retry.
std::string FormatCancel(const orderhold::v1::CancelHoldResponse& response);

// One line for an ExtendHold answer, no trailing newline. The first part:
//   moved:          "extended order-1 for alice: expires in 12m at 2026-11-21T10:12:00Z"
//   moved, capped:  "extended order-1 for alice (capped): expires in ..." (moved up to its cap)
//   not moved:      "order-1 for alice unchanged: expires in ..." (it already lived that long)
//   at its cap:     "order-1 for alice unchanged (capped): expires in ..."
// followed by "; " and FormatHoldDetails, whose extensions, when the server limits them
// (extensions_left set), are always shown with what is left: "...; cap 2026-11-21T10:30:00Z,
// extensions 1 (1 left)".
std::string FormatExtendHold(const orderhold::v1::ExtendHoldResponse& response);

// One line for a hold event as watch prints it, no trailing newline: the HoldEvent in proto3 JSON,
// default-valued fields included, so a RETURNED event carries "outcome":"RETURNED" and its
// "returnedUnits" (0 for the ends); "" if it cannot be rendered (a time out of the proto's range).
std::string FormatHoldEvent(const orderhold::v1::HoldEvent& event);

// One line for a GetHold answer, no trailing newline: a live hold as FormatHold prints it; an
// ended one as "order-1 (user alice) PAID at 2026-11-21T10:04:43.12Z" (the outcome and its end
// time), followed by "; " and FormatHoldDetails when that is not empty.
std::string FormatGetHold(const orderhold::v1::GetHoldResponse& response);

// A ReleaseHolds answer: "released 2 holds of alice" (with a `scope`: "... of alice in scope
// event:E42"), then one line per released hold, indented by two spaces:
// "  order-1 (had 29m58s left)" followed by "; " and FormatHoldDetails when that is not empty;
// every line ends in '\n'. `user_id` and `scope` are what was asked (the response does not repeat
// them when it is empty).
std::string FormatReleaseHolds(absl::string_view user_id,
                               const orderhold::v1::ReleaseHoldsResponse& response,
                               absl::string_view scope = "");
// The scope rpcs' answers as the CLI prints them (scope-usage, scope-list, scope-release).
std::string FormatScopeUsage(absl::string_view scope,
                             const orderhold::v1::GetScopeUsageResponse& response);
std::string FormatScopeHolds(absl::string_view scope,
                             const orderhold::v1::ListScopeHoldsResponse& response);
std::string FormatReleaseScopeHolds(absl::string_view scope,
                                    const orderhold::v1::ReleaseScopeHoldsResponse& response);

// A scope's runtime rule (rule-put, rule-get), no trailing newline. One line:
//   "event:1 OPEN (now OPEN) etag 17: per user 4 holds / 8 units; totals 0 holds / 100 units;
//   capacity 250; opens 2026-12-07T10:00:00Z; closes ...; expires ..."
// A part whose numbers are all 0 (or a time that is unset) is left out, "no limits" stands for
// the three number parts when all are; "(now X)" (effective_state) and "etag E" only when set. An
// unspecified state reads OPEN, as the server reads it. Then one line per class
// (ScopeRule.classes), by name, indented by two spaces:
//   "  class box_office: max_units 20, principals uri:spiffe://t/box-office, dns:desk.example"
// with its numbers that are not 0 (max_holds, max_units, max_purchased_holds,
// max_purchased_units; "no limits" when all are) and its principals as stored.
std::string FormatScopeRule(const orderhold::v1::ScopeRule& rule);

// A ListScopeRules page (rule-list): FormatScopeRule's lines per rule, then, when more follow,
// "next page: --page_token <token>"; "no rules" for an empty last page. Every line ends in '\n'.
std::string FormatScopeRules(const orderhold::v1::ListScopeRulesResponse& response);

// One line for a CloseScope answer (scope-close), no trailing newline: "closed event:1 (etag 18)",
// followed, when `release_holds` was asked, by "; released 12 holds". `scope` is what was asked
// (used when the answer's rule does not name it).
std::string FormatCloseScope(absl::string_view scope,
                             const orderhold::v1::CloseScopeResponse& response, bool release_holds);

// A header "alice: 2/3 holds" then one line per hold (FormatHold), indented by two spaces, then,
// when ShowsUsage, the usage lines as in FormatPlaceHold; every line ends in '\n'. `user_id` is
// the user asked about (the response does not repeat it when it is empty). With a `scope` (the
// list was filtered by it) the header counts against the scope's limit instead:
// "alice in scope event:E42: 1/2 holds", "... 1 holds (no limit)", or "... 2 holds (limits differ
// by hold)". The scope limits shown, there and in the scope's usage line, are those the listed
// holds carry (Hold.scope_limits, e.g. a place's --scope_max_*), not the server's rules that
// ListHoldsResponse.scope_usage reports; the server's rules only when no listed hold carries any.
std::string FormatListHolds(absl::string_view user_id,
                            const orderhold::v1::ListHoldsResponse& response,
                            absl::string_view scope = "");

// The stderr line for a failed call, no trailing newline: "error: RESOURCE_EXHAUSTED: <message>".
std::string FormatError(const absl::Status& status);

// The error details of a failed call (GetErrorDetails in client/orderhold_client.h), one line per
// item, each indented by two spaces and ending in '\n'; "" when there are none (a refused
// ExtendHold: "  violation hold/extensions: ..." and "  reason HOLD_EXTENSION_LIMIT (...)"):
//   "  violation user/scope:event:E42: user_id already has 2 unpaid holds in scope ..."  (each)
//   "  reason SCOPE_HOLD_LIMIT (orderhold.v1; scope=event:E42)"  (domain; metadata by key)
//   "  retry after 9m58.123s"  (exact: the earliest moment a retry can pass)
std::string FormatErrorDetails(const absl::Status& status);

// The process exit status for a call's outcome: 0 for OK, else the numeric status code.
int ExitCodeFor(const absl::Status& status);

// A parsed command line.
struct CliCommand {
  enum class Kind {
    kPlace,
    kPay,
    kList,
    kCancel,
    kWatch,
    kHealth,
    kExtend,
    kGet,
    kRelease,
    kDeleteGroup,
    kScopeUsage,    // scope-usage SCOPE: GetScopeUsage
    kScopeList,     // scope-list SCOPE: ListScopeHolds, every page
    kScopeRelease,  // scope-release SCOPE: ReleaseScopeHolds
    kRulePut,       // rule-put SCOPE: PutScopeRule
    kRuleGet,       // rule-get SCOPE: GetScopeRule
    kRuleList,      // rule-list: ListScopeRules, one page
    kRuleDelete,    // rule-delete SCOPE: DeleteScopeRule
    kScopeClose,    // scope-close SCOPE: CloseScope
    kReturn,        // return USER ORDER UNITS: ReturnUnits
  };
  Kind kind = Kind::kList;
  std::string group;           // kDeleteGroup only: the consumer group to delete.
  std::string user_id;         // Empty for kWatch, kHealth and kDeleteGroup.
  std::string order_id;        // Empty for kList, kRelease, kWatch and kHealth.
  std::string health_service;  // kHealth only: the service asked about ("" = the server).
  // kWatch only (from --group, --consumer, --ack, --outcomes, --start, --max_events; set by the
  // caller after ParseCommand, checked by ParseWatchFlags).
  orderhold::v1::WatchHoldEventsRequest watch;
  bool ack = false;
  int64_t max_events = 0;  // 0: no limit
  // Only for kPlace and kExtend; set whenever --ttl was given, even to 0s or a negative value, so
  // that the server (not the CLI) decides whether it is valid.
  std::optional<absl::Duration> ttl;
  // kExtend and kReturn: --request_id ("" = none; set by ParseHoldFlags, which requires it for
  // kReturn).
  std::string request_id;
  // kReturn only: UNITS, the units to give back (0 is sent: the server refuses it).
  uint32_t units = 0;
  // kPay only: --payment_reference ("" = none; set by ParseHoldFlags).
  std::string payment_reference;
  // kPlace, kList and kRelease: --scope ("" = none); kScopeUsage, kScopeList, kScopeRelease and
  // the rule commands but kRuleList: the SCOPE argument. The rest kPlace only (set by
  // ParseHoldFlags).
  std::string scope;
  uint32_t quantity = 0;  // 0: unset (the server counts 1)
  std::map<std::string, std::string> labels;
  std::optional<orderhold::v1::ScopeLimits> scope_limits;
  std::string limit_class;  // --limit_class ("" = none: the rule's own per-person limits)
  // Set by ParseRuleFlags. kRulePut: the rule sent (its scope is `scope`, its etag --etag).
  orderhold::v1::ScopeRule rule;
  // kRuleDelete: --etag ("" = whatever the rule is).
  std::string etag;
  // kRuleList: the request, from --page_size and --page_token.
  orderhold::v1::ListScopeRulesRequest list_rules;
  // kScopeClose: --release_holds.
  bool release_holds = false;
};

// The flags of place, extend, pay, return, list and release, as given on the command line (unset:
// not given).
struct HoldFlags {
  std::string scope;                       // --scope (place, list, release)
  std::string request_id;                  // --request_id (extend, return)
  std::string payment_reference;           // --payment_reference (pay)
  std::optional<int64_t> quantity;         // --quantity (place)
  std::vector<std::string> labels;         // --label, each "key=value" (place)
  std::optional<int64_t> scope_max_holds;  // --scope_max_holds (place)
  std::optional<int64_t> scope_max_units;  // --scope_max_units (place)
  std::string limit_class;                 // --limit_class (place)
};

// The flags of the rule commands and scope-close, as given on the command line (unset: not given).
struct RuleFlags {
  std::optional<int64_t> max_holds;            // --max_holds (rule-put)
  std::optional<int64_t> max_units;            // --max_units (rule-put)
  std::optional<int64_t> total_max_holds;      // --total_max_holds (rule-put)
  std::optional<int64_t> total_max_units;      // --total_max_units (rule-put)
  std::optional<int64_t> capacity_units;       // --capacity_units (rule-put)
  std::optional<int64_t> max_purchased_units;  // --max_purchased_units (rule-put)
  std::optional<int64_t> max_purchased_holds;  // --max_purchased_holds (rule-put)
  std::string state;                           // --state: OPEN, PAUSED or CLOSED (rule-put)
  std::string open_time;                       // --open_time, RFC 3339 (rule-put)
  std::string close_time;                      // --close_time, RFC 3339 (rule-put)
  std::string expire_time;                     // --expire_time, RFC 3339 (rule-put)
  std::vector<std::string> classes;            // --class, each "NAME;key=value;..." (rule-put)
  std::string etag;                            // --etag (rule-put, rule-delete)
  std::optional<int64_t> page_size;            // --page_size (rule-list)
  std::string page_token;                      // --page_token (rule-list)
  bool release_holds = false;                  // --release_holds (scope-close)
};

// Builds a command from the positional arguments (argv[0] excluded) and the --ttl flag.
// Returns INVALID_ARGUMENT describing the mistake on a usage error (no or unknown command, wrong
// argument count, return's UNITS not a number from 0 to 4294967295, --ttl with anything but place
// and extend); the caller exits with kExitUsage.
absl::StatusOr<CliCommand> ParseCommand(const std::vector<std::string>& args,
                                        std::optional<absl::Duration> ttl);

// Fills command->watch from the watch flags. INVALID_ARGUMENT (a usage error) when `group` is
// empty, `outcomes` names something other than PAID, CANCELLED, EXPIRED or RETURNED
// (comma-separated, any case), `start` is not "earliest" or "latest", or max_events < 0. An empty
// `consumer` becomes "<hostname>-<pid>".
absl::Status ParseWatchFlags(const std::string& group, const std::string& consumer,
                             const std::string& outcomes, const std::string& start,
                             int64_t max_events, bool ack, CliCommand* command);

// Fills command's scope, request_id, payment_reference, quantity, labels, scope_limits and
// limit_class from `flags`. INVALID_ARGUMENT (a usage error) naming the flag when a flag is given
// to a command it does not apply to (--scope: place, list and release; --request_id: extend and
// return; --payment_reference: pay; the others: place), return comes without --request_id, a
// number is negative or above 4294967295 (it cannot be sent), a --label has no '=' or an empty
// key, a label key is given twice, or --scope_max_holds / --scope_max_units come without --scope
// (the server would refuse them). Anything else (the label key's characters, a quantity above the
// server's limits, the request_id's length, the limit_class's name or its use without --scope,
// ...) is the server's to judge.
absl::Status ParseHoldFlags(const HoldFlags& flags, CliCommand* command);

// Fills command's rule (kRulePut: scope, limits, totals, capacity, state, times, classes, etag),
// etag (kRuleDelete), list_rules (kRuleList) and release_holds (kScopeClose) from `flags`.
// INVALID_ARGUMENT (a usage error) naming the flag when a flag is given to a command it does not
// apply to, a number does not fit the request (a limit negative or above 4294967295, --page_size
// negative or above 2147483647), --state is not OPEN, PAUSED or CLOSED (case matters), a time is
// not RFC 3339 (absl::RFC3339_full: "2026-12-07T10:00:00Z", "2026-12-07T11:00:00.5+01:00"), or a
// --class (naming it and the bad part) has an empty NAME, a part without '=', an unknown key, a
// number key given twice, or the NAME of an earlier --class. The rest (limits above the server's
// bounds, open_time after close_time, an expire_time past, a class's name characters or missing
// principals, ...) is the server's to judge.
absl::Status ParseRuleFlags(const RuleFlags& flags, CliCommand* command);

// Removes every occurrence of the flag `name` ("--name=value", "--name value", and the same with
// one dash) from `argv` (argv[0], the program, is kept; nothing after a "--" is looked at) and
// returns the values in order: absl's flags keep only the last value of a repeated flag, and
// --label and --class are repeatable. INVALID_ARGUMENT naming the flag when its last occurrence
// has no value.
absl::StatusOr<std::vector<std::string>> TakeRepeatedFlag(absl::string_view name,
                                                          std::vector<char*>* argv);

// Runs `command` against `client`: writes the human or JSON rendering of the answer to `out`, or
// FormatError and FormatErrorDetails to `err` (with `json`, also the details' JSON to `out`).
// Returns the exit status (ExitCodeFor the call's status; 13 INTERNAL if the answer cannot be
// rendered as JSON).
int RunCommand(const OrderHoldClient& client, const CliCommand& command, bool json,
               std::ostream& out, std::ostream& err);

}  // namespace orderhold::client

#endif  // ORDERHOLD_CLIENT_CLI_H_
