#include "client/cli.h"

#include <google/protobuf/util/json_util.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <iterator>
#include <limits>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "google/protobuf/timestamp.pb.h"
#include "google/rpc/status.pb.h"

namespace orderhold::client {

const char kCliUsage[] =
    "Places, extends, pays, cancels, reads, lists and releases order holds on an OrderHold\n"
    "server, returns units of paid ones; watches hold events.\n"
    "\n"
    "  orderhold-cli [--target host:port] [--timeout 5s] [--json] place USER ORDER [--ttl 45s]\n"
    "                [--scope S] [--quantity N] [--label k=v]... [--scope_max_holds N]\n"
    "                [--scope_max_units N] [--limit_class NAME]\n"
    "  orderhold-cli [--target host:port] [--timeout 5s] [--json] extend USER ORDER [--ttl 10m]\n"
    "                [--request_id ID]\n"
    "  orderhold-cli [--target host:port] [--timeout 5s] [--json] pay USER ORDER\n"
    "                [--payment_reference REF]\n"
    "  orderhold-cli [--target host:port] [--timeout 5s] [--json] return USER ORDER UNITS\n"
    "                --request_id ID\n"
    "  orderhold-cli [--target host:port] [--timeout 5s] [--json] get USER ORDER\n"
    "  orderhold-cli [--target host:port] [--timeout 5s] [--json] list USER [--scope S]\n"
    "  orderhold-cli [--target host:port] [--timeout 5s] [--json] cancel USER ORDER\n"
    "  orderhold-cli [--target host:port] [--timeout 5s] [--json] release USER [--scope S]\n"
    "  orderhold-cli [--target host:port] [--timeout 5s] health [SERVICE]\n"
    "  orderhold-cli [--target host:port] [--timeout 5s] [--json] delete-group GROUP\n"
    "  orderhold-cli [--target host:port] [--timeout 5s] [--json] scope-usage SCOPE\n"
    "  orderhold-cli [--target host:port] [--timeout 5s] [--json] scope-list SCOPE\n"
    "  orderhold-cli [--target host:port] [--timeout 5s] [--json] scope-release SCOPE\n"
    "  orderhold-cli [--target host:port] [--timeout 5s] [--json] rule-put SCOPE [--max_holds N]\n"
    "                [--max_units N] [--total_max_holds N] [--total_max_units N]\n"
    "                [--capacity_units N] [--max_purchased_units N] [--max_purchased_holds N]\n"
    "                [--state OPEN|PAUSED|CLOSED] [--open_time T] [--close_time T]\n"
    "                [--expire_time T] [--class 'NAME;key=value;...']... [--etag ETAG]\n"
    "  orderhold-cli [--target host:port] [--timeout 5s] [--json] rule-get SCOPE\n"
    "  orderhold-cli [--target host:port] [--timeout 5s] [--json] rule-list [--page_size N]\n"
    "                [--page_token T]\n"
    "  orderhold-cli [--target host:port] [--timeout 5s] [--json] rule-delete SCOPE [--etag ETAG]\n"
    "  orderhold-cli [--target host:port] [--timeout 5s] [--json] scope-close SCOPE\n"
    "                [--release_holds]\n"
    "  orderhold-cli [--target host:port] watch --group G [--consumer C] [--ack]\n"
    "                [--outcomes EXPIRED,PAID,CANCELLED,RETURNED] [--start earliest|latest]\n"
    "                [--max_events N]\n"
    "\n"
    "watch prints one JSON line per hold event (a paid hold's return: outcome RETURNED with\n"
    "its returnedUnits) and reconnects when the server goes away.\n"
    "health asks grpc.health.v1 about SERVICE (\"\" when omitted: ready while Redis answers;\n"
    "\"liveness\": up) and exits 0 only when SERVING (14 when NOT_SERVING): a probe for any\n"
    "runtime, over TLS too.\n"
    "Flags may come before or after the command. --ttl unset uses the server's default (30m).\n"
    "place --scope counts the hold against a scope too (e.g. event:E42), --quantity is its units\n"
    "(e.g. tickets), --label k=v (repeatable) is stored with it; --scope_max_holds and\n"
    "--scope_max_units carry the scope's limits (else the server's rules apply); --limit_class\n"
    "NAME places it under that class of the scope's rule (a caller among its principals only,\n"
    "else 7 = PERMISSION_DENIED). list --scope lists that scope's holds. A refusal prints each\n"
    "exceeded limit and when a retry can pass.\n"
    "extend moves a live hold's expiry to now + --ttl (unset: the server's default), never\n"
    "shorter and never past its cap; --request_id makes a retry count once against the\n"
    "server's --max_extensions (8 = RESOURCE_EXHAUSTED when they are used up). pay\n"
    "--payment_reference keeps the charge's reference with the outcome: the same again is\n"
    "already paid, another is refused (9, PAID_WITH_OTHER_REFERENCE). return gives back\n"
    "UNITS of a paid hold (a refund); its --request_id (required: e.g. the refund's id) makes\n"
    "a retry answer the first return again, and more units than are left are refused (9,\n"
    "RETURN_EXCEEDS_QUANTITY). get shows one hold, live or ended. release cancels every live\n"
    "hold of USER (of --scope S only, if given).\n"
    "scope-usage shows a scope's live holds and units across all users, its totals and its\n"
    "units sold and available (a capacity), scope-list lists them (every user's),\n"
    "scope-release cancels them all (an operator's call).\n"
    "rule-put sets a scope's runtime rule, an operator's call (the whole rule: a flag not given\n"
    "is 0 or unset; times in RFC 3339, e.g. 2026-12-07T10:00:00Z); --etag ETAG of the rule read\n"
    "writes only if nobody changed it since (10 = ABORTED otherwise). --class (repeatable: one\n"
    "class of buyers each, with limits of their own) is NAME;key=value;... with the keys\n"
    "max_holds, max_units, max_purchased_units, max_purchased_holds and principal (repeatable;\n"
    "its value is all after the first '=': principal=subject:CN=desk,O=T), e.g. --class\n"
    "'box_office;max_units=20;principal=uri:spiffe://t/box-office;principal=dns:desk.example'.\n"
    "rule-get and rule-list (one page; --page_token goes on) show rules, rule-delete hands the\n"
    "scope back to the server's --scope_limits file, scope-close stops placing in it\n"
    "(--release_holds also cancels its live holds).\n"
    "TLS: --tls_ca_file=ca.crt (implies --tls), plus --tls_cert_file=c.crt --tls_key_file=c.key\n"
    "for mutual TLS, --tls_server_name=NAME when the target's host is not in the certificate.\n"
    "Exit status: 0 on success; the gRPC status code (1-16) when the call fails, with\n"
    "\"error: CODE: message\" on stderr (8 = RESOURCE_EXHAUSTED: a limit reached, 6 =\n"
    "ALREADY_EXISTS, 9 = FAILED_PRECONDITION: the hold already ended, 5 = NOT_FOUND, 14 =\n"
    "UNAVAILABLE); 64 on a usage error.";

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

namespace {

// FormatHoldDetails, and with `extensions_left` (an ExtendHold answer from a server that limits
// extensions) the extensions even when 0, followed by "(N left)".
std::string HoldDetails(const orderhold::v1::Hold& hold, std::optional<uint32_t> extensions_left) {
  std::vector<std::string> parts;
  if (!hold.scope().empty() || hold.quantity() > 1 || !hold.labels().empty()) {
    if (!hold.scope().empty()) {
      // The limits it was placed under: the request's may differ from the server's rules that a
      // scoped list's usage lines show.
      std::vector<std::string> limits;
      if (hold.scope_limits().max_holds() != 0) {
        limits.push_back(absl::StrCat("max_holds ", hold.scope_limits().max_holds()));
      }
      if (hold.scope_limits().max_units() != 0) {
        limits.push_back(absl::StrCat("max_units ", hold.scope_limits().max_units()));
      }
      parts.push_back(
          absl::StrCat("scope ", hold.scope(),
                       limits.empty() ? "" : absl::StrCat(" (", absl::StrJoin(limits, ", "), ")")));
    }
    // An unset quantity (a hold from a release before scopes) is one unit.
    const uint32_t units = std::max<uint32_t>(hold.quantity(), 1);
    parts.push_back(absl::StrCat(units, units == 1 ? " unit" : " units"));
    if (!hold.labels().empty()) {
      // A proto map has no order; people want the same line twice.
      std::vector<std::pair<std::string, std::string>> labels(hold.labels().begin(),
                                                              hold.labels().end());
      std::sort(labels.begin(), labels.end());
      parts.push_back(
          absl::StrCat("labels ", absl::StrJoin(labels, " ", absl::PairFormatter("="))));
    }
    // Every hold of this release has a place time; it is news only beside the details above.
    if (hold.has_place_time()) {
      parts.push_back(
          absl::StrCat("placed at ", FormatTimestamp(FromProtoTimestamp(hold.place_time()))));
    }
  }
  if (hold.has_max_expire_time()) {
    parts.push_back(
        absl::StrCat("cap ", FormatTimestamp(FromProtoTimestamp(hold.max_expire_time()))));
  }
  if (hold.extensions() != 0 || extensions_left.has_value()) {
    std::string extensions = absl::StrCat("extensions ", hold.extensions());
    if (extensions_left.has_value()) absl::StrAppend(&extensions, " (", *extensions_left, " left)");
    parts.push_back(std::move(extensions));
  }
  return absl::StrJoin(parts, ", ");
}

// "; " and the hold's details, or "" when it has none.
std::string DetailsSuffix(const orderhold::v1::Hold& hold,
                          std::optional<uint32_t> extensions_left = std::nullopt) {
  std::string details = HoldDetails(hold, extensions_left);
  return details.empty() ? "" : absl::StrCat("; ", details);
}

// "expires in 29m58s at 2026-11-21T10:00:00Z": a hold's time left and its expiry.
std::string ExpiresIn(const orderhold::v1::Hold& hold) {
  return absl::StrCat("expires in ", FormatRemaining(FromProtoDuration(hold.remaining())), " at ",
                      FormatTimestamp(FromProtoTimestamp(hold.expire_time())));
}

// "1/3", or "1 (no limit)" when `max` is 0.
std::string OfLimit(uint32_t used, uint32_t max) {
  return max == 0 ? absl::StrCat(used, " (no limit)") : absl::StrCat(used, "/", max);
}

// "1 hold", "0 holds", "8 units".
std::string Counted(uint32_t n, absl::string_view noun) {
  return absl::StrCat(n, " ", noun, n == 1 ? "" : "s");
}

// One scope limit as `list --scope` shows it.
struct ListedLimit {
  uint32_t max = 0;      // 0: no limit
  bool differs = false;  // the listed holds carry different values: no one limit to show
};

// The scope's limits a scoped list counts against: those its holds carry (Hold.scope_limits: each
// was placed, and is checked, under its own, often the request's scope_limits), not
// ListHoldsResponse.scope_usage's, which are the server's rules for the scope and may be none
// while every placement carried limits. Without a listed hold that carries limits (none listed):
// the server's rules, what a `place` without --scope_max_* would meet.
std::pair<ListedLimit, ListedLimit> ListedScopeLimits(
    const orderhold::v1::ListHoldsResponse& response, const orderhold::v1::LimitUsage* rules) {
  ListedLimit holds, units;
  bool found = false;
  for (const orderhold::v1::Hold& hold : response.holds()) {
    if (!hold.has_scope_limits()) continue;
    const orderhold::v1::ScopeLimits& limits = hold.scope_limits();
    if (!found) {
      holds.max = limits.max_holds();
      units.max = limits.max_units();
      found = true;
      continue;
    }
    holds.differs = holds.differs || limits.max_holds() != holds.max;
    units.differs = units.differs || limits.max_units() != units.max;
  }
  if (!found && rules != nullptr) {
    holds.max = rules->max_holds();
    units.max = rules->max_units();
  }
  return {holds, units};
}

// OfLimit, or "2 (limits differ by hold)".
std::string OfListedLimit(uint32_t used, ListedLimit limit) {
  return limit.differs ? absl::StrCat(used, " (limits differ by hold)") : OfLimit(used, limit.max);
}

// The usage lines of an answer (no newlines) when ShowsUsage; none otherwise.
std::vector<std::string> UsageLines(const orderhold::v1::LimitUsage& user_usage,
                                    const orderhold::v1::LimitUsage* scope_usage,
                                    absl::string_view scope) {
  if (!ShowsUsage(user_usage, scope_usage)) return {};
  std::vector<std::string> lines = {FormatUsage("user", user_usage)};
  if (scope_usage != nullptr) {
    lines.push_back(FormatUsage(absl::StrCat("scope ", scope), *scope_usage));
  }
  return lines;
}

}  // namespace

std::string FormatHoldDetails(const orderhold::v1::Hold& hold) {
  return HoldDetails(hold, std::nullopt);
}

std::string FormatHold(const orderhold::v1::Hold& hold) {
  return absl::StrCat(hold.order_id(), " (user ", hold.user_id(), ") ", ExpiresIn(hold),
                      DetailsSuffix(hold));
}

std::string FormatUsage(absl::string_view level, const orderhold::v1::LimitUsage& usage) {
  return absl::StrCat(level, ": holds ", OfLimit(usage.holds(), usage.max_holds()), ", units ",
                      OfLimit(usage.units(), usage.max_units()));
}

bool ShowsUsage(const orderhold::v1::LimitUsage& user_usage,
                const orderhold::v1::LimitUsage* scope_usage) {
  return scope_usage != nullptr || user_usage.max_units() != 0 ||
         user_usage.units() != user_usage.holds();
}

std::string FormatPlaceHold(const orderhold::v1::PlaceHoldResponse& response) {
  const orderhold::v1::Hold& hold = response.hold();
  const std::string remaining = FormatRemaining(FromProtoDuration(hold.remaining()));
  std::string out = response.created()
                        ? absl::StrFormat("placed %s for %s: expires in %s (%d/%d active)",
                                          hold.order_id(), hold.user_id(), remaining,
                                          response.active_holds(), response.max_holds())
                        : absl::StrFormat("%s for %s already held: expires in %s (created=false)",
                                          hold.order_id(), hold.user_id(), remaining);
  absl::StrAppend(&out, DetailsSuffix(hold));
  for (const std::string& line :
       UsageLines(response.user_usage(),
                  response.has_scope_usage() ? &response.scope_usage() : nullptr, hold.scope())) {
    absl::StrAppend(&out, "\n", line);
  }
  return out;
}

std::string FormatPay(const orderhold::v1::PayResponse& response) {
  const orderhold::v1::Hold& hold = response.hold();
  const std::string left = FormatRemaining(FromProtoDuration(hold.remaining()));
  const std::string reference =
      hold.payment_reference().empty() ? "" : absl::StrCat(" with ", hold.payment_reference());
  if (response.already_paid()) {
    return absl::StrFormat("%s for %s was already paid%s (had %s left)", hold.order_id(),
                           hold.user_id(), reference, left);
  }
  return absl::StrFormat("paid %s for %s%s (had %s left)", hold.order_id(), hold.user_id(),
                         reference, left);
}

std::string FormatReturnUnits(const orderhold::v1::ReturnUnitsResponse& response) {
  const orderhold::v1::Hold& hold = response.hold();
  const std::string units = Counted(response.returned_units(), "unit");
  // The hold's quantity is always set in an answer; without it the total stands alone.
  const std::string in_all =
      hold.quantity() == 0 ? absl::StrCat("(", response.total_returned_units(), " returned in all)")
                           : absl::StrCat("(", response.total_returned_units(), " of ",
                                          hold.quantity(), " returned in all)");
  std::string out = response.already_returned()
                        ? absl::StrCat(units, " of ", hold.order_id(), " for ", hold.user_id(),
                                       response.returned_units() == 1 ? " was" : " were",
                                       " already returned ", in_all)
                        : absl::StrCat("returned ", units, " of ", hold.order_id(), " for ",
                                       hold.user_id(), " ", in_all);
  if (response.has_scope_usage()) {
    // What the scope's purchase caps (max_purchased_*) count: live holds plus what was bought.
    absl::StrAppend(&out, "\n",
                    FormatUsage(absl::StrCat("scope ", hold.scope(), " held + bought"),
                                response.scope_usage()));
  }
  return out;
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

std::string FormatExtendHold(const orderhold::v1::ExtendHoldResponse& response) {
  const orderhold::v1::Hold& hold = response.hold();
  const char* const capped = response.capped() ? " (capped)" : "";
  std::string out = response.extended()
                        ? absl::StrCat("extended ", hold.order_id(), " for ", hold.user_id(),
                                       capped, ": ", ExpiresIn(hold))
                        : absl::StrCat(hold.order_id(), " for ", hold.user_id(), " unchanged",
                                       capped, ": ", ExpiresIn(hold));
  std::optional<uint32_t> left;
  if (response.has_extensions_left()) left.emplace(response.extensions_left());
  absl::StrAppend(&out, DetailsSuffix(hold, left));
  return out;
}

std::string FormatHoldEvent(const orderhold::v1::HoldEvent& event) {
  // JSON, not a human line: consumers script on it. Every field is printed, so returnedUnits (a
  // RETURNED event's units) is there whatever the outcome.
  google::protobuf::util::JsonPrintOptions options;
  options.always_print_primitive_fields = true;
  std::string line;
  if (!google::protobuf::util::MessageToJsonString(event, &line, options).ok()) return "";
  return line;
}

std::string FormatGetHold(const orderhold::v1::GetHoldResponse& response) {
  const orderhold::v1::Hold& hold = response.hold();
  if (response.outcome() == orderhold::v1::HOLD_OUTCOME_UNSPECIFIED) return FormatHold(hold);
  std::string outcome = orderhold::v1::HoldOutcome_Name(response.outcome());
  // An outcome newer than this binary has no name here.
  if (outcome.empty()) {
    outcome = absl::StrCat("ended (outcome ", static_cast<int>(response.outcome()), ")");
  }
  std::string out = absl::StrCat(hold.order_id(), " (user ", hold.user_id(), ") ", outcome);
  if (response.has_end_time()) {
    absl::StrAppend(&out, " at ", FormatTimestamp(FromProtoTimestamp(response.end_time())));
  }
  if (!hold.payment_reference().empty()) absl::StrAppend(&out, " with ", hold.payment_reference());
  absl::StrAppend(&out, DetailsSuffix(hold));
  return out;
}

std::string FormatReleaseHolds(absl::string_view user_id,
                               const orderhold::v1::ReleaseHoldsResponse& response,
                               absl::string_view scope) {
  const int released = response.holds_size();
  std::string out =
      absl::StrFormat("released %d %s of %s", released, released == 1 ? "hold" : "holds", user_id);
  if (!scope.empty()) absl::StrAppend(&out, " in scope ", scope);
  out += "\n";
  for (const orderhold::v1::Hold& hold : response.holds()) {
    absl::StrAppend(&out, "  ", hold.order_id(), " (had ",
                    FormatRemaining(FromProtoDuration(hold.remaining())), " left)",
                    DetailsSuffix(hold), "\n");
  }
  return out;
}

namespace {

// "97/100 holds, 180 units" for a scope's usage across users (no "/N" where the total is 0).
std::string ScopeUsageText(const orderhold::v1::LimitUsage& usage) {
  std::string out = absl::StrCat(usage.holds());
  if (usage.max_holds() > 0) absl::StrAppend(&out, "/", usage.max_holds());
  absl::StrAppend(&out, usage.holds() == 1 && usage.max_holds() == 0 ? " hold, " : " holds, ",
                  usage.units());
  if (usage.max_units() > 0) absl::StrAppend(&out, "/", usage.max_units());
  absl::StrAppend(&out, usage.units() == 1 && usage.max_units() == 0 ? " unit" : " units");
  return out;
}

}  // namespace

std::string FormatScopeUsage(absl::string_view scope,
                             const orderhold::v1::GetScopeUsageResponse& response) {
  std::string out =
      absl::StrCat(scope, ": ", ScopeUsageText(response.usage()), " across all users");
  if (response.capacity_units() > 0) {
    absl::StrAppend(&out, "; ", response.sold_units(), " sold, ", response.available_units(),
                    " of capacity ", response.capacity_units(), " available");
  } else if (response.sold_units() > 0) {
    absl::StrAppend(&out, "; ", response.sold_units(), " sold");
  }
  if (response.has_earliest_expire_time()) {
    absl::StrAppend(
        &out, "; the earliest expires in ",
        FormatRemaining(FromProtoTimestamp(response.earliest_expire_time()) - absl::Now()));
  }
  return out + "\n";
}

std::string FormatScopeHolds(absl::string_view scope,
                             const orderhold::v1::ListScopeHoldsResponse& response) {
  std::string out =
      absl::StrCat(scope, ": ", ScopeUsageText(response.usage()), " across all users\n");
  for (const orderhold::v1::Hold& hold : response.holds()) {
    absl::StrAppend(&out, "  ", hold.user_id(), " ", hold.order_id(), " (",
                    FormatRemaining(FromProtoDuration(hold.remaining())), " left)",
                    hold.quantity() > 1 ? absl::StrCat(" x", hold.quantity()) : "", "\n");
  }
  return out;
}

std::string FormatReleaseScopeHolds(absl::string_view scope,
                                    const orderhold::v1::ReleaseScopeHoldsResponse& response) {
  const uint32_t released = response.released_count();
  std::string out = absl::StrFormat("released %d %s in scope %s\n", released,
                                    released == 1 ? "hold" : "holds", scope);
  for (const orderhold::v1::Hold& hold : response.holds()) {
    absl::StrAppend(&out, "  ", hold.user_id(), " ", hold.order_id(), " (had ",
                    FormatRemaining(FromProtoDuration(hold.remaining())), " left)",
                    DetailsSuffix(hold), "\n");
  }
  if (static_cast<int>(released) > response.holds_size()) {
    absl::StrAppend(&out, "  ... and ", released - response.holds_size(), " more\n");
  }
  return out;
}

namespace {

// "4 holds / 8 units", or "" when both are 0 (no limit).
std::string HoldsAndUnits(uint32_t holds, uint32_t units) {
  if (holds == 0 && units == 0) return "";
  return absl::StrCat(Counted(holds, "hold"), " / ", Counted(units, "unit"));
}

// A state's name; unspecified reads OPEN (as the server reads it), a state newer than this binary
// by its number.
std::string ScopeStateName(orderhold::v1::ScopeState state) {
  if (state == orderhold::v1::SCOPE_STATE_UNSPECIFIED) return "OPEN";
  const std::string& name = orderhold::v1::ScopeState_Name(state);
  return name.empty() ? absl::StrCat("state ", static_cast<int>(state)) : name;
}

// The limit parts of FormatScopeRule: "per user ...", "totals ...", "capacity N", or "no limits".
std::vector<std::string> RuleLimitParts(const orderhold::v1::ScopeRule& rule) {
  std::vector<std::string> parts;
  if (std::string per_user = HoldsAndUnits(rule.limits().max_holds(), rule.limits().max_units());
      !per_user.empty()) {
    parts.push_back(absl::StrCat("per user ", per_user));
  }
  if (std::string totals = HoldsAndUnits(rule.total_max_holds(), rule.total_max_units());
      !totals.empty()) {
    parts.push_back(absl::StrCat("totals ", totals));
  }
  if (rule.capacity_units() != 0) {
    parts.push_back(absl::StrCat("capacity ", rule.capacity_units()));
  }
  if (std::string bought = HoldsAndUnits(rule.max_purchased_holds(), rule.max_purchased_units());
      !bought.empty()) {
    parts.push_back(absl::StrCat("per user held + bought ", bought));
  }
  if (parts.empty()) parts.push_back("no limits");
  return parts;
}

// One class of a rule as FormatScopeRule shows it, without indent or newline: "class box_office:
// max_units 20, principals uri:spiffe://t/box-office, dns:desk.example" (numbers that are 0 left
// out, "no limits" when all are; principals as stored, none shown when there are none).
std::string ClassLine(absl::string_view name, const orderhold::v1::LimitClass& limit_class) {
  std::vector<std::string> parts;
  const struct {
    const char* key;
    uint32_t value;
  } numbers[] = {
      {"max_holds", limit_class.limits().max_holds()},
      {"max_units", limit_class.limits().max_units()},
      {"max_purchased_holds", limit_class.max_purchased_holds()},
      {"max_purchased_units", limit_class.max_purchased_units()},
  };
  for (const auto& number : numbers) {
    if (number.value != 0) parts.push_back(absl::StrCat(number.key, " ", number.value));
  }
  if (parts.empty()) parts.push_back("no limits");
  if (!limit_class.principals().empty()) {
    parts.push_back(absl::StrCat("principals ", absl::StrJoin(limit_class.principals(), ", ")));
  }
  return absl::StrCat("class ", name, ": ", absl::StrJoin(parts, ", "));
}

}  // namespace

std::string FormatScopeRule(const orderhold::v1::ScopeRule& rule) {
  std::string out = absl::StrCat(rule.scope(), " ", ScopeStateName(rule.state()));
  if (rule.effective_state() != orderhold::v1::SCOPE_STATE_UNSPECIFIED) {
    absl::StrAppend(&out, " (now ", ScopeStateName(rule.effective_state()), ")");
  }
  if (!rule.etag().empty()) absl::StrAppend(&out, " etag ", rule.etag());
  std::vector<std::string> parts = RuleLimitParts(rule);
  if (rule.has_open_time()) {
    parts.push_back(absl::StrCat("opens ", FormatTimestamp(FromProtoTimestamp(rule.open_time()))));
  }
  if (rule.has_close_time()) {
    parts.push_back(
        absl::StrCat("closes ", FormatTimestamp(FromProtoTimestamp(rule.close_time()))));
  }
  if (rule.has_expire_time()) {
    parts.push_back(
        absl::StrCat("expires ", FormatTimestamp(FromProtoTimestamp(rule.expire_time()))));
  }
  absl::StrAppend(&out, ": ", absl::StrJoin(parts, "; "));
  // A proto map has no order; people want the same lines twice.
  std::vector<std::string> names;
  for (const auto& entry : rule.classes()) names.push_back(entry.first);
  std::sort(names.begin(), names.end());
  for (const std::string& name : names) {
    absl::StrAppend(&out, "\n  ", ClassLine(name, rule.classes().at(name)));
  }
  return out;
}

std::string FormatScopeRules(const orderhold::v1::ListScopeRulesResponse& response) {
  if (response.rules().empty() && response.next_page_token().empty()) return "no rules\n";
  std::string out;
  for (const orderhold::v1::ScopeRule& rule : response.rules()) {
    absl::StrAppend(&out, FormatScopeRule(rule), "\n");
  }
  if (!response.next_page_token().empty()) {
    absl::StrAppend(&out, "next page: --page_token ", response.next_page_token(), "\n");
  }
  return out;
}

std::string FormatCloseScope(absl::string_view scope,
                             const orderhold::v1::CloseScopeResponse& response,
                             bool release_holds) {
  const orderhold::v1::ScopeRule& rule = response.rule();
  std::string out =
      absl::StrCat("closed ", rule.scope().empty() ? scope : absl::string_view(rule.scope()));
  if (!rule.etag().empty()) absl::StrAppend(&out, " (etag ", rule.etag(), ")");
  if (release_holds || response.released_count() > 0) {
    absl::StrAppend(&out, "; released ", Counted(response.released_count(), "hold"));
  }
  return out;
}

std::string FormatListHolds(absl::string_view user_id,
                            const orderhold::v1::ListHoldsResponse& response,
                            absl::string_view scope) {
  const orderhold::v1::LimitUsage* scope_usage =
      response.has_scope_usage() ? &response.scope_usage() : nullptr;
  const int listed = response.holds_size();
  const auto [holds_limit, units_limit] = ListedScopeLimits(response, scope_usage);
  std::string out;
  if (scope.empty()) {
    out = absl::StrFormat("%s: %d/%d holds\n", user_id, listed, response.max_holds());
  } else if (holds_limit.differs || holds_limit.max == 0) {
    out = absl::StrFormat("%s in scope %s: %d holds (%s)\n", user_id, scope, listed,
                          holds_limit.differs ? "limits differ by hold" : "no limit");
  } else {
    out = absl::StrFormat("%s in scope %s: %d/%d holds\n", user_id, scope, listed, holds_limit.max);
  }
  for (const orderhold::v1::Hold& hold : response.holds()) {
    absl::StrAppend(&out, "  ", FormatHold(hold), "\n");
  }
  if (!ShowsUsage(response.user_usage(), scope_usage)) return out;
  absl::StrAppend(&out, FormatUsage("user", response.user_usage()), "\n");
  if (scope_usage != nullptr) {
    absl::StrAppend(&out, "scope ", scope, ": holds ",
                    OfListedLimit(scope_usage->holds(), holds_limit), ", units ",
                    OfListedLimit(scope_usage->units(), units_limit), "\n");
  }
  return out;
}

std::string FormatError(const absl::Status& status) {
  return absl::StrCat("error: ", absl::StatusCodeToString(status.code()), ": ", status.message());
}

std::string FormatErrorDetails(const absl::Status& status) {
  const ErrorDetails details = GetErrorDetails(status);
  std::string out;
  if (details.quota_failure.has_value()) {
    for (const auto& violation : details.quota_failure->violations()) {
      absl::StrAppend(&out, "  violation ", violation.subject(), ": ", violation.description(),
                      "\n");
    }
  }
  if (details.error_info.has_value()) {
    const google::rpc::ErrorInfo& info = *details.error_info;
    std::vector<std::string> about;
    if (!info.domain().empty()) about.push_back(info.domain());
    std::vector<std::pair<std::string, std::string>> metadata(info.metadata().begin(),
                                                              info.metadata().end());
    std::sort(metadata.begin(), metadata.end());
    for (const auto& [key, value] : metadata) about.push_back(absl::StrCat(key, "=", value));
    absl::StrAppend(&out, "  reason ", info.reason(),
                    about.empty() ? "" : absl::StrCat(" (", absl::StrJoin(about, "; "), ")"), "\n");
  }
  if (details.retry_info.has_value()) {
    // Exact, not FormatRemaining's truncation: a retry a little early would be refused again.
    absl::StrAppend(&out, "  retry after ",
                    absl::FormatDuration(FromProtoDuration(details.retry_info->retry_delay())),
                    "\n");
  }
  return out;
}

int ExitCodeFor(const absl::Status& status) { return static_cast<int>(status.code()); }

namespace {

// Every command, for the usage errors.
constexpr char kCommandNames[] =
    "place, extend, pay, return, cancel, get, list, release, watch, delete-group, scope-usage, "
    "scope-list, scope-release, scope-close, rule-put, rule-get, rule-list, rule-delete or health";

// The commands about one scope across users and its runtime rule.
struct NamedKind {
  absl::string_view name;
  CliCommand::Kind kind;
};
constexpr NamedKind kScopeCommands[] = {
    {"scope-usage", CliCommand::Kind::kScopeUsage},
    {"scope-list", CliCommand::Kind::kScopeList},
    {"scope-release", CliCommand::Kind::kScopeRelease},
    {"scope-close", CliCommand::Kind::kScopeClose},
    {"rule-put", CliCommand::Kind::kRulePut},
    {"rule-get", CliCommand::Kind::kRuleGet},
    {"rule-list", CliCommand::Kind::kRuleList},
    {"rule-delete", CliCommand::Kind::kRuleDelete},
};

// ParseCommand for one of kScopeCommands: SCOPE (rule-list: no argument), never --ttl.
absl::StatusOr<CliCommand> ParseScopeCommand(const std::vector<std::string>& args,
                                             CliCommand::Kind kind,
                                             std::optional<absl::Duration> ttl) {
  const std::string& name = args[0];
  const bool list = kind == CliCommand::Kind::kRuleList;
  if (list && args.size() != 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("rule-list takes no arguments, got %d argument(s)", args.size() - 1));
  }
  if (!list && args.size() != 2) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s takes SCOPE, got %d arguments", name, args.size() - 1));
  }
  if (ttl.has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--ttl applies only to place and extend, not ", name));
  }
  CliCommand command;
  command.kind = kind;
  if (!list) command.scope = args[1];
  // Sent as the rule's scope; ParseRuleFlags fills in the rest.
  if (kind == CliCommand::Kind::kRulePut) command.rule.set_scope(command.scope);
  return command;
}

// ParseCommand for return: USER ORDER UNITS, never --ttl. UNITS must fit the request's uint32 (0
// does: the server judges it); ParseHoldFlags then requires --request_id.
absl::StatusOr<CliCommand> ParseReturnCommand(const std::vector<std::string>& args,
                                              std::optional<absl::Duration> ttl) {
  if (args.size() != 4) {
    return absl::InvalidArgumentError(
        absl::StrFormat("return takes USER ORDER UNITS, got %d argument(s)", args.size() - 1));
  }
  if (ttl.has_value()) {
    return absl::InvalidArgumentError("--ttl applies only to place and extend, not return");
  }
  int64_t units = 0;
  if (!absl::SimpleAtoi(args[3], &units) || units < 0 ||
      units > std::numeric_limits<uint32_t>::max()) {
    return absl::InvalidArgumentError(absl::StrCat("return: UNITS must be from 0 to ",
                                                   std::numeric_limits<uint32_t>::max(), ", got \"",
                                                   args[3], "\""));
  }
  CliCommand command;
  command.kind = CliCommand::Kind::kReturn;
  command.user_id = args[1];
  command.order_id = args[2];
  command.units = static_cast<uint32_t>(units);
  return command;
}

}  // namespace

absl::StatusOr<CliCommand> ParseCommand(const std::vector<std::string>& args,
                                        std::optional<absl::Duration> ttl) {
  if (args.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("missing command (", kCommandNames, ")"));
  }
  const std::string& name = args[0];
  for (const NamedKind& scope_command : kScopeCommands) {
    if (scope_command.name == name) return ParseScopeCommand(args, scope_command.kind, ttl);
  }
  if (name == "return") return ParseReturnCommand(args, ttl);
  CliCommand command;
  size_t want_args = 0;
  if (name == "place") {
    command.kind = CliCommand::Kind::kPlace;
    want_args = 2;
  } else if (name == "extend") {
    command.kind = CliCommand::Kind::kExtend;
    want_args = 2;
  } else if (name == "pay") {
    command.kind = CliCommand::Kind::kPay;
    want_args = 2;
  } else if (name == "get") {
    command.kind = CliCommand::Kind::kGet;
    want_args = 2;
  } else if (name == "release") {
    command.kind = CliCommand::Kind::kRelease;
    want_args = 1;
  } else if (name == "list") {
    command.kind = CliCommand::Kind::kList;
    want_args = 1;
  } else if (name == "cancel") {
    command.kind = CliCommand::Kind::kCancel;
    want_args = 2;
  } else if (name == "watch") {
    command.kind = CliCommand::Kind::kWatch;
    want_args = 0;
  } else if (name == "delete-group") {
    command.kind = CliCommand::Kind::kDeleteGroup;
    if (args.size() != 2) {
      return absl::InvalidArgumentError(
          absl::StrFormat("delete-group takes GROUP, got %d arguments", args.size() - 1));
    }
    if (ttl.has_value()) {
      return absl::InvalidArgumentError("--ttl applies only to place and extend, not delete-group");
    }
    command.group = args[1];
    return command;
  } else if (name == "health") {
    command.kind = CliCommand::Kind::kHealth;
    if (args.size() > 2) {
      return absl::InvalidArgumentError(
          absl::StrFormat("health takes [SERVICE], got %d arguments", args.size() - 1));
    }
    if (args.size() == 2) command.health_service = args[1];
    if (ttl.has_value())
      return absl::InvalidArgumentError("--ttl applies only to place and extend, not health");
    return command;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown command \"", name, "\" (want ", kCommandNames, ")"));
  }
  if (args.size() - 1 != want_args) {
    return absl::InvalidArgumentError(absl::StrFormat("%s takes %s, got %d argument(s)", name,
                                                      want_args == 2   ? "USER ORDER"
                                                      : want_args == 1 ? "USER"
                                                                       : "no arguments",
                                                      args.size() - 1));
  }
  if (ttl.has_value() && command.kind != CliCommand::Kind::kPlace &&
      command.kind != CliCommand::Kind::kExtend) {
    return absl::InvalidArgumentError(
        absl::StrCat("--ttl applies only to place and extend, not ", name));
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
  err << FormatError(status) << '\n' << FormatErrorDetails(status);
  return ExitCodeFor(status);
}

// The error details of `status` as google.rpc.Status, the message they came in, in proto3 JSON;
// "" when the status has none (or they cannot be rendered, e.g. a type this binary does not know:
// the stderr lines still say what was decoded).
std::string ErrorDetailsJson(const absl::Status& status) {
  google::rpc::Status details;
  status.ForEachPayload([&](absl::string_view type_url, const absl::Cord& value) {
    if (!absl::StartsWith(type_url, kErrorDetailTypeUrlPrefix)) return;
    google::protobuf::Any* any = details.add_details();
    any->set_type_url(std::string(type_url));
    any->set_value(std::string(value));
  });
  if (details.details().empty()) return "";
  details.set_code(static_cast<int32_t>(status.code()));
  details.set_message(std::string(status.message()));
  google::protobuf::util::JsonPrintOptions options;
  options.always_print_primitive_fields = true;
  std::string text;
  if (!google::protobuf::util::MessageToJsonString(details, &text, options).ok()) return "";
  return text;
}

// A failed unary call: PrintError, and with `json` the details' JSON on `out` for scripts.
int PrintFailure(const absl::Status& status, bool json, std::ostream& out, std::ostream& err) {
  if (json) {
    if (const std::string text = ErrorDetailsJson(status); !text.empty()) out << text << '\n';
  }
  return PrintError(status, err);
}

// The command's name on the command line.
absl::string_view CommandName(CliCommand::Kind kind) {
  switch (kind) {
    case CliCommand::Kind::kPlace:
      return "place";
    case CliCommand::Kind::kPay:
      return "pay";
    case CliCommand::Kind::kList:
      return "list";
    case CliCommand::Kind::kCancel:
      return "cancel";
    case CliCommand::Kind::kExtend:
      return "extend";
    case CliCommand::Kind::kGet:
      return "get";
    case CliCommand::Kind::kRelease:
      return "release";
    case CliCommand::Kind::kWatch:
      return "watch";
    case CliCommand::Kind::kHealth:
      return "health";
    case CliCommand::Kind::kDeleteGroup:
      return "delete-group";
    case CliCommand::Kind::kScopeUsage:
      return "scope-usage";
    case CliCommand::Kind::kScopeList:
      return "scope-list";
    case CliCommand::Kind::kScopeRelease:
      return "scope-release";
    case CliCommand::Kind::kRulePut:
      return "rule-put";
    case CliCommand::Kind::kRuleGet:
      return "rule-get";
    case CliCommand::Kind::kRuleList:
      return "rule-list";
    case CliCommand::Kind::kRuleDelete:
      return "rule-delete";
    case CliCommand::Kind::kScopeClose:
      return "scope-close";
    case CliCommand::Kind::kReturn:
      return "return";
  }
  return "?";
}

// A count flag as the uint32 the request carries; INVALID_ARGUMENT naming the flag otherwise.
absl::StatusOr<uint32_t> Uint32Flag(absl::string_view flag, int64_t value) {
  if (value < 0 || value > std::numeric_limits<uint32_t>::max()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--", flag, " must be from 0 to ", std::numeric_limits<uint32_t>::max(), ", got ", value));
  }
  return static_cast<uint32_t>(value);
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
          absl::StrCat("--outcomes: \"", name, "\" is not PAID, CANCELLED, EXPIRED or RETURNED"));
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

absl::Status ParseHoldFlags(const HoldFlags& flags, CliCommand* command) {
  const bool place = command->kind == CliCommand::Kind::kPlace;
  const bool list = command->kind == CliCommand::Kind::kList;
  const bool release = command->kind == CliCommand::Kind::kRelease;
  const auto not_for = [&](absl::string_view flag, absl::string_view applies_to) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag, " applies only to ", applies_to,
                                                   ", not ", CommandName(command->kind)));
  };
  if (!flags.scope.empty() && !place && !list && !release) {
    return not_for("scope", "place, list and release");
  }
  // The scope commands take theirs as SCOPE (ParseCommand): --scope is refused above for them.
  if (place || list || release) command->scope = flags.scope;
  const bool returns = command->kind == CliCommand::Kind::kReturn;
  if (!flags.request_id.empty() && command->kind != CliCommand::Kind::kExtend && !returns) {
    return not_for("request_id", "extend and return");
  }
  // The server refuses a return without one (it is what makes a retry safe): said here, naming
  // the flag, before any call.
  if (returns && flags.request_id.empty()) {
    return absl::InvalidArgumentError(
        "return needs --request_id: the return's own id (e.g. the refund's), the same on its "
        "retries");
  }
  command->request_id = flags.request_id;
  if (!flags.payment_reference.empty() && command->kind != CliCommand::Kind::kPay) {
    return not_for("payment_reference", "pay");
  }
  command->payment_reference = flags.payment_reference;
  if (!place) {
    if (flags.quantity.has_value()) return not_for("quantity", "place");
    if (!flags.labels.empty()) return not_for("label", "place");
    if (flags.scope_max_holds.has_value()) return not_for("scope_max_holds", "place");
    if (flags.scope_max_units.has_value()) return not_for("scope_max_units", "place");
    if (!flags.limit_class.empty()) return not_for("limit_class", "place");
    return absl::OkStatus();
  }
  // Sent as given: the server judges the name, and a class without --scope.
  command->limit_class = flags.limit_class;
  if (flags.quantity.has_value()) {
    absl::StatusOr<uint32_t> quantity = Uint32Flag("quantity", *flags.quantity);
    if (!quantity.ok()) return quantity.status();
    command->quantity = *quantity;
  }
  for (const std::string& label : flags.labels) {
    const size_t eq = label.find('=');
    if (eq == std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("--label \"", label, "\" is not key=value (e.g. --label seat=A12)"));
    }
    if (eq == 0) {
      return absl::InvalidArgumentError(absl::StrCat("--label \"", label, "\" has an empty key"));
    }
    // A map keeps one value per key: a second one would be dropped without a word.
    if (!command->labels.emplace(label.substr(0, eq), label.substr(eq + 1)).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("--label: key \"", label.substr(0, eq), "\" is given twice"));
    }
  }
  if (flags.scope_max_holds.has_value() || flags.scope_max_units.has_value()) {
    if (flags.scope.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--", flags.scope_max_holds.has_value() ? "scope_max_holds" : "scope_max_units",
          " needs --scope: scope limits apply to the hold's scope"));
    }
    orderhold::v1::ScopeLimits limits;
    if (flags.scope_max_holds.has_value()) {
      absl::StatusOr<uint32_t> max = Uint32Flag("scope_max_holds", *flags.scope_max_holds);
      if (!max.ok()) return max.status();
      limits.set_max_holds(*max);
    }
    if (flags.scope_max_units.has_value()) {
      absl::StatusOr<uint32_t> max = Uint32Flag("scope_max_units", *flags.scope_max_units);
      if (!max.ok()) return max.status();
      limits.set_max_units(*max);
    }
    command->scope_limits = limits;
  }
  return absl::OkStatus();
}

namespace {

// A usage error for a flag given to a command it does not apply to.
absl::Status FlagNotFor(absl::string_view flag, absl::string_view applies_to,
                        CliCommand::Kind kind) {
  return absl::InvalidArgumentError(
      absl::StrCat("--", flag, " applies only to ", applies_to, ", not ", CommandName(kind)));
}

// The first of rule-put's own flags that was given, or nullptr when none was.
const char* FirstRulePutFlag(const RuleFlags& flags) {
  if (flags.max_holds.has_value()) return "max_holds";
  if (flags.max_units.has_value()) return "max_units";
  if (flags.total_max_holds.has_value()) return "total_max_holds";
  if (flags.total_max_units.has_value()) return "total_max_units";
  if (flags.capacity_units.has_value()) return "capacity_units";
  if (flags.max_purchased_units.has_value()) return "max_purchased_units";
  if (flags.max_purchased_holds.has_value()) return "max_purchased_holds";
  if (!flags.state.empty()) return "state";
  if (!flags.open_time.empty()) return "open_time";
  if (!flags.close_time.empty()) return "close_time";
  if (!flags.expire_time.empty()) return "expire_time";
  if (!flags.classes.empty()) return "class";
  return nullptr;
}

// A count flag, when given, into `out` (Uint32Flag); `out` is left as it is when not.
absl::Status OptionalUint32Flag(absl::string_view flag, const std::optional<int64_t>& value,
                                uint32_t* out) {
  if (!value.has_value()) return absl::OkStatus();
  absl::StatusOr<uint32_t> parsed = Uint32Flag(flag, *value);
  if (!parsed.ok()) return parsed.status();
  *out = *parsed;
  return absl::OkStatus();
}

// rule-put's numbers into `rule`: limits (sent when --max_holds or --max_units was given, the
// other then 0), totals and capacity.
absl::Status SetRuleNumbers(const RuleFlags& flags, orderhold::v1::ScopeRule* rule) {
  uint32_t max_holds = 0, max_units = 0, total_max_holds = 0, total_max_units = 0, capacity = 0;
  absl::Status status = OptionalUint32Flag("max_holds", flags.max_holds, &max_holds);
  if (status.ok()) status = OptionalUint32Flag("max_units", flags.max_units, &max_units);
  if (status.ok()) {
    status = OptionalUint32Flag("total_max_holds", flags.total_max_holds, &total_max_holds);
  }
  if (status.ok()) {
    status = OptionalUint32Flag("total_max_units", flags.total_max_units, &total_max_units);
  }
  if (status.ok()) status = OptionalUint32Flag("capacity_units", flags.capacity_units, &capacity);
  uint32_t purchased_units = 0, purchased_holds = 0;
  if (status.ok()) {
    status = OptionalUint32Flag("max_purchased_units", flags.max_purchased_units, &purchased_units);
  }
  if (status.ok()) {
    status = OptionalUint32Flag("max_purchased_holds", flags.max_purchased_holds, &purchased_holds);
  }
  if (!status.ok()) return status;
  rule->set_max_purchased_units(purchased_units);
  rule->set_max_purchased_holds(purchased_holds);
  if (flags.max_holds.has_value() || flags.max_units.has_value()) {
    rule->mutable_limits()->set_max_holds(max_holds);
    rule->mutable_limits()->set_max_units(max_units);
  }
  rule->set_total_max_holds(total_max_holds);
  rule->set_total_max_units(total_max_units);
  rule->set_capacity_units(capacity);
  return absl::OkStatus();
}

// One --class SPEC, "NAME;key=value;..." (cli.h), as its name and LimitClass: the numbers as the
// request's uint32 (limits only when max_holds or max_units is given, the other then 0), each
// principal as given. INVALID_ARGUMENT naming the flag, the SPEC and the bad part on an empty
// NAME, a part without '=', an unknown key, a number key given twice or a number that is not from
// 0 to 4294967295.
absl::StatusOr<std::pair<std::string, orderhold::v1::LimitClass>> ParseClassSpec(
    const std::string& spec) {
  const auto bad = [&spec](absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat("--class \"", spec, "\": ", what));
  };
  const std::vector<absl::string_view> parts = absl::StrSplit(spec, ';');
  if (parts[0].empty()) {
    return bad(
        "empty NAME (want NAME;key=value;..., e.g. box_office;max_units=20;principal=dns:desk)");
  }
  std::optional<uint32_t> max_holds, max_units, purchased_units, purchased_holds;
  const struct {
    absl::string_view key;
    std::optional<uint32_t>* value;
  } numbers[] = {
      {"max_holds", &max_holds},
      {"max_units", &max_units},
      {"max_purchased_units", &purchased_units},
      {"max_purchased_holds", &purchased_holds},
  };
  orderhold::v1::LimitClass limit_class;
  for (size_t i = 1; i < parts.size(); ++i) {
    const absl::string_view part = parts[i];
    const size_t eq = part.find('=');
    if (eq == absl::string_view::npos) return bad(absl::StrCat("\"", part, "\" is not key=value"));
    const absl::string_view key = part.substr(0, eq);
    const absl::string_view value = part.substr(eq + 1);
    // All after the first '=': a subject ("subject:CN=desk,O=T") holds more.
    if (key == "principal") {
      limit_class.add_principals(std::string(value));
      continue;
    }
    const auto number = std::find_if(std::begin(numbers), std::end(numbers),
                                     [key](const auto& n) { return n.key == key; });
    if (number == std::end(numbers)) {
      return bad(absl::StrCat("unknown key \"", key,
                              "\" (want max_holds, max_units, max_purchased_units, "
                              "max_purchased_holds or principal)"));
    }
    if (number->value->has_value()) return bad(absl::StrCat(key, " is given twice"));
    int64_t parsed = 0;
    if (!absl::SimpleAtoi(value, &parsed) || parsed < 0 ||
        parsed > std::numeric_limits<uint32_t>::max()) {
      return bad(absl::StrCat(key, " must be from 0 to ", std::numeric_limits<uint32_t>::max(),
                              ", got \"", value, "\""));
    }
    *number->value = static_cast<uint32_t>(parsed);
  }
  if (max_holds.has_value() || max_units.has_value()) {
    limit_class.mutable_limits()->set_max_holds(max_holds.value_or(0));
    limit_class.mutable_limits()->set_max_units(max_units.value_or(0));
  }
  limit_class.set_max_purchased_units(purchased_units.value_or(0));
  limit_class.set_max_purchased_holds(purchased_holds.value_or(0));
  return std::make_pair(std::string(parts[0]), std::move(limit_class));
}

// rule-put's --class flags into rule.classes; INVALID_ARGUMENT as ParseClassSpec, or naming the
// class when a NAME comes twice (a map keeps one: the first would be dropped without a word).
absl::Status SetRuleClasses(const RuleFlags& flags, orderhold::v1::ScopeRule* rule) {
  for (const std::string& spec : flags.classes) {
    absl::StatusOr<std::pair<std::string, orderhold::v1::LimitClass>> parsed = ParseClassSpec(spec);
    if (!parsed.ok()) return parsed.status();
    auto& [name, limit_class] = *parsed;
    if (rule->classes().count(name) != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("--class \"", spec, "\": class \"", name, "\" is given twice"));
    }
    (*rule->mutable_classes())[name] = std::move(limit_class);
  }
  return absl::OkStatus();
}

// An RFC 3339 time flag (absl::RFC3339_full) as a Timestamp; INVALID_ARGUMENT naming the flag
// otherwise (absl's "infinite-future" and "infinite-past" too: no Timestamp holds them).
absl::StatusOr<google::protobuf::Timestamp> TimeFlag(absl::string_view flag,
                                                     const std::string& value) {
  absl::Time time;
  std::string error;
  const bool parsed = absl::ParseTime(absl::RFC3339_full, value, &time, &error);
  if (!parsed || time == absl::InfiniteFuture() || time == absl::InfinitePast()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--", flag, " \"", value, "\" is not an RFC 3339 time (e.g. 2026-12-07T10:00:00Z)",
        error.empty() ? "" : absl::StrCat(": ", error)));
  }
  return ToProtoTimestamp(time);
}

// rule-put's state and times into `rule`.
absl::Status SetRuleStateAndTimes(const RuleFlags& flags, orderhold::v1::ScopeRule* rule) {
  if (!flags.state.empty()) {
    orderhold::v1::ScopeState state;
    // The proto's names, case and all, as --json prints them.
    if (!orderhold::v1::ScopeState_Parse(flags.state, &state) ||
        state == orderhold::v1::SCOPE_STATE_UNSPECIFIED) {
      return absl::InvalidArgumentError(
          absl::StrCat("--state \"", flags.state, "\" is not OPEN, PAUSED or CLOSED"));
    }
    rule->set_state(state);
  }
  const struct {
    const char* flag;
    const std::string& value;
    google::protobuf::Timestamp* (orderhold::v1::ScopeRule::*field)();
  } times[] = {
      {"open_time", flags.open_time, &orderhold::v1::ScopeRule::mutable_open_time},
      {"close_time", flags.close_time, &orderhold::v1::ScopeRule::mutable_close_time},
      {"expire_time", flags.expire_time, &orderhold::v1::ScopeRule::mutable_expire_time},
  };
  for (const auto& time : times) {
    if (time.value.empty()) continue;
    absl::StatusOr<google::protobuf::Timestamp> parsed = TimeFlag(time.flag, time.value);
    if (!parsed.ok()) return parsed.status();
    *(rule->*time.field)() = *parsed;
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ParseRuleFlags(const RuleFlags& flags, CliCommand* command) {
  using Kind = CliCommand::Kind;
  const Kind kind = command->kind;
  if (const char* flag = FirstRulePutFlag(flags); flag != nullptr && kind != Kind::kRulePut) {
    return FlagNotFor(flag, "rule-put", kind);
  }
  if (!flags.etag.empty() && kind != Kind::kRulePut && kind != Kind::kRuleDelete) {
    return FlagNotFor("etag", "rule-put and rule-delete", kind);
  }
  if (flags.page_size.has_value() && kind != Kind::kRuleList) {
    return FlagNotFor("page_size", "rule-list", kind);
  }
  if (!flags.page_token.empty() && kind != Kind::kRuleList) {
    return FlagNotFor("page_token", "rule-list", kind);
  }
  if (flags.release_holds && kind != Kind::kScopeClose) {
    return FlagNotFor("release_holds", "scope-close", kind);
  }
  command->release_holds = flags.release_holds;
  if (kind == Kind::kRuleDelete) command->etag = flags.etag;
  if (kind == Kind::kRuleList) {
    const int64_t page_size = flags.page_size.value_or(0);
    if (page_size < 0 || page_size > std::numeric_limits<int32_t>::max()) {
      return absl::InvalidArgumentError(absl::StrCat("--page_size must be from 0 to ",
                                                     std::numeric_limits<int32_t>::max(), ", got ",
                                                     page_size));
    }
    command->list_rules.set_page_size(static_cast<int32_t>(page_size));
    command->list_rules.set_page_token(flags.page_token);
  }
  if (kind != Kind::kRulePut) return absl::OkStatus();
  command->rule.set_scope(command->scope);
  command->rule.set_etag(flags.etag);
  if (absl::Status numbers = SetRuleNumbers(flags, &command->rule); !numbers.ok()) return numbers;
  if (absl::Status classes = SetRuleClasses(flags, &command->rule); !classes.ok()) return classes;
  return SetRuleStateAndTimes(flags, &command->rule);
}

absl::StatusOr<std::vector<std::string>> TakeRepeatedFlag(absl::string_view name,
                                                          std::vector<char*>* argv) {
  std::vector<std::string> values;
  std::vector<char*> kept;
  kept.reserve(argv->size());
  size_t i = 0;
  if (!argv->empty()) kept.push_back((*argv)[i++]);  // the program
  for (; i < argv->size(); ++i) {
    const absl::string_view arg = (*argv)[i];
    if (arg == "--") break;  // absl's end of flags: what follows are arguments, kept as they are
    absl::string_view rest = arg;
    if ((!absl::ConsumePrefix(&rest, "--") && !absl::ConsumePrefix(&rest, "-")) ||
        !absl::ConsumePrefix(&rest, name)) {
      kept.push_back((*argv)[i]);
      continue;
    }
    if (absl::ConsumePrefix(&rest, "=")) {
      values.emplace_back(rest);
    } else if (rest.empty()) {  // "--name value"
      if (i + 1 == argv->size()) {
        return absl::InvalidArgumentError(absl::StrCat("--", name, " needs a value"));
      }
      values.emplace_back((*argv)[++i]);
    } else {  // another flag that starts with `name` ("--labels"): absl's to judge
      kept.push_back((*argv)[i]);
    }
  }
  kept.insert(kept.end(), argv->begin() + static_cast<std::ptrdiff_t>(i), argv->end());
  *argv = std::move(kept);
  return values;
}

namespace {

// The watch loop of orderhold-cli: prints, acks, reconnects on UNAVAILABLE.
int RunWatch(const OrderHoldClient& client, const CliCommand& command, std::ostream& out,
             std::ostream& err) {
  int64_t printed = 0;
  while (true) {
    grpc::ClientContext context;
    absl::Status ack_error;
    const absl::Status status = client.WatchHoldEvents(
        command.watch,
        [&](const orderhold::v1::HoldEvent& event) {
          out << FormatHoldEvent(event) << std::endl;
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

// RunCommand for health: prints the status name; 0 only when SERVING.
int RunHealth(const OrderHoldClient& client, const CliCommand& command, std::ostream& out,
              std::ostream& err) {
  auto status = client.Health(command.health_service);
  if (!status.ok()) return PrintError(status.status(), err);
  const std::string name = grpc::health::v1::HealthCheckResponse::ServingStatus_Name(*status);
  out << name << '\n';
  if (*status == grpc::health::v1::HealthCheckResponse::SERVING) return 0;
  return PrintError(
      absl::UnavailableError(absl::StrCat("health of \"", command.health_service, "\" is ", name)),
      err);
}

// RunCommand for return (a paid hold's ReturnUnits), apart to keep RunCommand a page long.
int RunReturn(const OrderHoldClient& client, const CliCommand& command, bool json,
              std::ostream& out, std::ostream& err) {
  auto response =
      client.ReturnUnits(command.user_id, command.order_id, command.units, command.request_id);
  // A refusal of more units than are left prints its ErrorInfo (RETURN_EXCEEDS_QUANTITY).
  if (!response.ok()) return PrintFailure(response.status(), json, out, err);
  return PrintResponse(*response, json ? "" : FormatReturnUnits(*response), json, out, err);
}

// RunCommand for the commands about one scope across users and its runtime rule (kScopeCommands).
int RunScopeCommand(const OrderHoldClient& client, const CliCommand& command, bool json,
                    std::ostream& out, std::ostream& err) {
  if (command.kind == CliCommand::Kind::kScopeUsage) {
    auto response = client.GetScopeUsage(command.scope);
    if (!response.ok()) return PrintFailure(response.status(), json, out, err);
    return PrintResponse(*response, json ? "" : FormatScopeUsage(command.scope, *response), json,
                         out, err);
  }
  if (command.kind == CliCommand::Kind::kScopeList) {
    auto response = client.ListAllScopeHolds(command.scope);
    if (!response.ok()) return PrintFailure(response.status(), json, out, err);
    return PrintResponse(*response, json ? "" : FormatScopeHolds(command.scope, *response), json,
                         out, err);
  }
  if (command.kind == CliCommand::Kind::kScopeRelease) {
    auto response = client.ReleaseScopeHolds(command.scope);
    if (!response.ok()) return PrintFailure(response.status(), json, out, err);
    return PrintResponse(*response, json ? "" : FormatReleaseScopeHolds(command.scope, *response),
                         json, out, err);
  }
  if (command.kind == CliCommand::Kind::kRuleList) {
    auto response = client.ListScopeRules(command.list_rules);
    if (!response.ok()) return PrintFailure(response.status(), json, out, err);
    return PrintResponse(*response, json ? "" : FormatScopeRules(*response), json, out, err);
  }
  if (command.kind == CliCommand::Kind::kRuleDelete) {
    auto response = client.DeleteScopeRule(command.scope, command.etag);
    if (!response.ok()) return PrintFailure(response.status(), json, out, err);
    return PrintResponse(*response, json ? "" : absl::StrCat("deleted the rule of ", command.scope),
                         json, out, err);
  }
  if (command.kind == CliCommand::Kind::kScopeClose) {
    auto response = client.CloseScope(command.scope, command.release_holds);
    if (!response.ok()) return PrintFailure(response.status(), json, out, err);
    return PrintResponse(
        *response, json ? "" : FormatCloseScope(command.scope, *response, command.release_holds),
        json, out, err);
  }
  // kRulePut, kRuleGet: both answer the rule.
  auto response = command.kind == CliCommand::Kind::kRulePut ? client.PutScopeRule(command.rule)
                                                             : client.GetScopeRule(command.scope);
  if (!response.ok()) return PrintFailure(response.status(), json, out, err);
  return PrintResponse(*response, json ? "" : FormatScopeRule(*response), json, out, err);
}

}  // namespace

int RunCommand(const OrderHoldClient& client, const CliCommand& command, bool json,
               std::ostream& out, std::ostream& err) {
  switch (command.kind) {
    case CliCommand::Kind::kCancel: {
      auto response = client.CancelHold(command.user_id, command.order_id);
      if (!response.ok()) return PrintFailure(response.status(), json, out, err);
      return PrintResponse(*response, json ? "" : FormatCancel(*response), json, out, err);
    }
    case CliCommand::Kind::kWatch:
      return RunWatch(client, command, out, err);
    case CliCommand::Kind::kPlace: {
      PlaceHoldOptions options;
      options.ttl = command.ttl;
      options.scope = command.scope;
      options.quantity = command.quantity;
      options.labels = command.labels;
      options.scope_limits = command.scope_limits;
      options.limit_class = command.limit_class;
      auto response = client.PlaceHold(command.user_id, command.order_id, options);
      if (!response.ok()) return PrintFailure(response.status(), json, out, err);
      return PrintResponse(*response, json ? "" : FormatPlaceHold(*response), json, out, err);
    }
    case CliCommand::Kind::kPay: {
      auto response = client.Pay(command.user_id, command.order_id, command.payment_reference);
      if (!response.ok()) return PrintFailure(response.status(), json, out, err);
      return PrintResponse(*response, json ? "" : FormatPay(*response), json, out, err);
    }
    case CliCommand::Kind::kReturn:
      return RunReturn(client, command, json, out, err);
    case CliCommand::Kind::kExtend: {
      ExtendHoldOptions options;
      options.ttl = command.ttl;
      options.request_id = command.request_id;
      auto response = client.ExtendHold(command.user_id, command.order_id, options);
      // A refusal at --max_extensions prints its QuotaFailure and ErrorInfo as PlaceHold's do.
      if (!response.ok()) return PrintFailure(response.status(), json, out, err);
      return PrintResponse(*response, json ? "" : FormatExtendHold(*response), json, out, err);
    }
    case CliCommand::Kind::kGet: {
      auto response = client.GetHold(command.user_id, command.order_id);
      if (!response.ok()) return PrintFailure(response.status(), json, out, err);
      return PrintResponse(*response, json ? "" : FormatGetHold(*response), json, out, err);
    }
    case CliCommand::Kind::kRelease: {
      auto response = client.ReleaseHolds(command.user_id, command.scope);
      if (!response.ok()) return PrintFailure(response.status(), json, out, err);
      return PrintResponse(
          *response, json ? "" : FormatReleaseHolds(command.user_id, *response, command.scope),
          json, out, err);
    }
    case CliCommand::Kind::kList: {
      auto response = client.ListAllHolds(command.user_id, command.scope);
      if (!response.ok()) return PrintFailure(response.status(), json, out, err);
      return PrintResponse(*response,
                           json ? "" : FormatListHolds(command.user_id, *response, command.scope),
                           json, out, err);
    }
    case CliCommand::Kind::kDeleteGroup: {
      auto response = client.DeleteConsumerGroup(command.group);
      if (!response.ok()) return PrintFailure(response.status(), json, out, err);
      return PrintResponse(*response,
                           json ? "" : absl::StrCat("deleted consumer group ", command.group, "\n"),
                           json, out, err);
    }
    case CliCommand::Kind::kScopeUsage:
    case CliCommand::Kind::kScopeList:
    case CliCommand::Kind::kScopeRelease:
    case CliCommand::Kind::kScopeClose:
    case CliCommand::Kind::kRulePut:
    case CliCommand::Kind::kRuleGet:
    case CliCommand::Kind::kRuleList:
    case CliCommand::Kind::kRuleDelete:
      return RunScopeCommand(client, command, json, out, err);
    case CliCommand::Kind::kHealth:
      return RunHealth(client, command, out, err);
  }
  return PrintError(absl::InternalError("unhandled command"), err);
}

}  // namespace orderhold::client
