// RedisHoldStore's runtime scope rules: scope_rule.lua writes a rule, scope_rules.lua reads one or
// a page of a partition's; place_hold.lua reads the rule of the scope it places in (lua/prelude/
// "A scope's runtime rule" has the format, keys.h the keys).
#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "server/store/redis_hold_store.h"
#include "server/store/redis_script_call.h"

namespace orderhold::store {

using internal::Arg;
using internal::BadReply;
using internal::Eval;
using internal::FromMillis;
using internal::NowArg;
using internal::ParsedAs;
using internal::StrOf;

namespace {

int64_t MillisOf(const std::optional<absl::Time>& t) {
  return t.has_value() ? absl::ToUnixMillis(*t) : 0;
}

std::optional<absl::Time> TimeOf(int64_t ms) {
  if (ms == 0) return std::nullopt;
  return FromMillis(ms);
}

// The rule from its state on, as scope_rule.lua's A.rule.
std::string PackedBody(const ScopeRuleRecord& rule) {
  return absl::StrCat(static_cast<int>(rule.state), ":", MillisOf(rule.open_time), ":",
                      MillisOf(rule.close_time), ":", MillisOf(rule.expire_time), ":",
                      rule.limits.max_holds, ":", rule.limits.max_units, ":", rule.totals.max_holds,
                      ":", rule.totals.max_units, ":", rule.capacity_units, ":",
                      rule.purchases.max_units, ":", rule.purchases.max_holds, ":");
}

// The rule's limit classes as the prelude packs them after the id ("" = none): the count, then
// each class (names in byte order, a std::map's) with its limits and its principals, lengths
// before every string.
std::string PackedClasses(const ScopeRuleRecord& rule) {
  if (rule.classes.empty()) return "";
  std::string out = absl::StrCat(rule.classes.size(), ":");
  for (const auto& [name, c] : rule.classes) {
    absl::StrAppend(&out, name.size(), ":", name, c.limits.max_holds, ":", c.limits.max_units, ":",
                    c.purchases.max_units, ":", c.purchases.max_holds, ":", c.principals.size(),
                    ":");
    for (const std::string& principal : c.principals) {
      absl::StrAppend(&out, principal.size(), ":", principal);
    }
  }
  return out;
}

// The classes packed in `tail` (PackedClasses' format) into `classes`; false when malformed.
bool UnpackClasses(absl::string_view tail, std::map<std::string, LimitClassRecord>* classes) {
  if (tail.empty()) return true;
  // A length-prefixed or ':'-ended decimal at the front of `tail`, consumed.
  const auto number = [&tail](int64_t* n) {
    const size_t colon = tail.find(':');
    if (colon == absl::string_view::npos || !absl::SimpleAtoi(tail.substr(0, colon), n) || *n < 0) {
      return false;
    }
    tail.remove_prefix(colon + 1);
    return true;
  };
  const auto text = [&tail, &number](std::string* out) {
    int64_t len = 0;
    if (!number(&len) || static_cast<size_t>(len) > tail.size()) return false;
    *out = std::string(tail.substr(0, static_cast<size_t>(len)));
    tail.remove_prefix(static_cast<size_t>(len));
    return true;
  };
  int64_t count = 0;
  if (!number(&count)) return false;
  for (int64_t i = 0; i < count; ++i) {
    std::string name;
    int64_t n[5];
    if (!text(&name)) return false;
    for (int64_t& field : n) {
      if (!number(&field)) return false;
    }
    LimitClassRecord& c = (*classes)[name];
    c.limits = LevelLimits{n[0], n[1]};
    c.purchases = LevelLimits{n[3], n[2]};
    for (int64_t p = 0; p < n[4]; ++p) {
      if (!text(&c.principals.emplace_back())) return false;
    }
  }
  return tail.empty();
}

// A write's result from scope_rule.lua's reply, for `scope`.
absl::StatusOr<ScopeRuleResult> WriteResultOf(const std::string& scope, const std::string& etag,
                                              const lua::ScopeRuleReply& r) {
  ScopeRuleResult result;
  result.now = FromMillis(r.now);
  switch (r.result) {
    case 1:
      break;
    case 0:
      return absl::NotFoundError("scope: has no runtime rule");
    case -1: {
      std::optional<ScopeRuleRecord> current = internal::UnpackScopeRule(scope, r.rule);
      return absl::AbortedError(absl::StrCat(
          "etag: \"", etag, "\" is not the rule's etag (",
          current.has_value() ? absl::StrCat("now \"", current->etag, "\"") : "it has no rule",
          "); read it again and retry (AIP-154)"));
    }
    case -2:
      return absl::InvalidArgumentError("rule.expire_time: must be after now (the Redis clock)");
    default:
      return BadReply("scope_rule.lua");
  }
  if (!r.rule.empty()) {
    result.rule = internal::UnpackScopeRule(scope, r.rule);
    if (!result.rule.has_value()) return BadReply("scope_rule.lua");
  }
  return result;
}

}  // namespace

namespace internal {

std::optional<ScopeRuleRecord> UnpackScopeRule(absl::string_view scope, absl::string_view packed) {
  // 13 numbers, each ended by ':', then the classes (PackedClasses; "" = none).
  std::vector<absl::string_view> parts = absl::StrSplit(packed, absl::MaxSplits(':', 13));
  if (parts.size() < 14) return std::nullopt;
  int64_t n[13];
  for (int i = 0; i < 13; ++i) {
    if (!absl::SimpleAtoi(parts[i], &n[i]) || n[i] < 0) return std::nullopt;
  }
  if (n[1] < 1 || n[1] > 3) return std::nullopt;
  ScopeRuleRecord rule;
  rule.scope = std::string(scope);
  rule.etag = absl::StrCat(n[0]);
  rule.state = static_cast<ScopeState>(n[1]);
  rule.open_time = TimeOf(n[2]);
  rule.close_time = TimeOf(n[3]);
  rule.expire_time = TimeOf(n[4]);
  rule.limits = LevelLimits{n[5], n[6]};
  rule.totals = LevelLimits{n[7], n[8]};
  rule.capacity_units = n[9];
  rule.purchases = LevelLimits{n[11], n[10]};
  if (!UnpackClasses(parts[13], &rule.classes)) return std::nullopt;
  return rule;
}

}  // namespace internal

void RedisHoldStore::WriteScopeRule(std::string scope, const char* op, std::string etag,
                                    std::string body, std::string classes,
                                    const CallOptions& options, Callback<ScopeRuleResult> done) {
  if (!keeps_scope_rules()) {
    HoldStore::GetScopeRule(std::move(scope), options, std::move(done));  // its refusal
    return;
  }
  const int partition = KeySchema::PartitionOf(scope);
  redis::RedisCommand command = Eval({keys_.ScopeRuleKey(scope), keys_.ScopeRulesKey(partition),
                                      keys_.ScopeRuleVersionsKey(partition)},
                                     lua::ScopeRuleArgv<Arg>{.scope = scope,
                                                             .op = op,
                                                             .etag = etag,
                                                             .rule = body,
                                                             .now = NowArg(options),
                                                             .classes = classes});
  command.writes = true;
  command.inline_ok = true;  // one command per gRPC call: see redis_client.h
  client_->Submit(std::move(command), options.deadline,
                  ParsedAs<lua::ScopeRuleReply>(
                      std::move(done),
                      [scope = std::move(scope), etag = std::move(etag)](
                          const lua::ScopeRuleReply& r) { return WriteResultOf(scope, etag, r); }));
}

void RedisHoldStore::PutScopeRule(ScopeRuleRecord rule, CallOptions options,
                                  Callback<ScopeRuleResult> done) {
  std::string body = PackedBody(rule);
  std::string classes = PackedClasses(rule);
  WriteScopeRule(std::move(rule.scope), "put", std::move(rule.etag), std::move(body),
                 std::move(classes), options, std::move(done));
}

void RedisHoldStore::DeleteScopeRule(std::string scope, std::string etag, CallOptions options,
                                     Callback<ScopeRuleResult> done) {
  WriteScopeRule(std::move(scope), "delete", std::move(etag), "", "", options, std::move(done));
}

void RedisHoldStore::CloseScopeRule(std::string scope, CallOptions options,
                                    Callback<ScopeRuleResult> done) {
  WriteScopeRule(std::move(scope), "close", "", "", "", options, std::move(done));
}

void RedisHoldStore::GetScopeRule(std::string scope, CallOptions options,
                                  Callback<ScopeRuleResult> done) {
  if (!keeps_scope_rules()) {
    HoldStore::GetScopeRule(std::move(scope), options, std::move(done));
    return;
  }
  redis::RedisCommand command =
      Eval({keys_.ScopeRulesKey(KeySchema::PartitionOf(scope))},
           lua::ScopeRulesArgv<Arg>{
               .scope = scope, .after = "", .count = int64_t{1}, .now = NowArg(options)});
  command.inline_ok = true;
  client_->Submit(
      std::move(command), options.deadline,
      ParsedAs<lua::ScopeRulesReply>(
          std::move(done), [](const lua::ScopeRulesReply& r) -> absl::StatusOr<ScopeRuleResult> {
            ScopeRuleResult result;
            result.now = FromMillis(r.now);
            if (r.rules.size() == 2) {
              std::optional<absl::string_view> scope = StrOf(r.rules[0]),
                                               packed = StrOf(r.rules[1]);
              if (!scope || !packed) return BadReply("scope_rules.lua");
              result.rule = internal::UnpackScopeRule(*scope, *packed);
              if (!result.rule.has_value()) return BadReply("scope_rules.lua");
            } else if (!r.rules.empty()) {
              return BadReply("scope_rules.lua");
            }
            return result;
          }));
}

void RedisHoldStore::ListScopeRules(ScopeRuleCursor from, int page_size, CallOptions options,
                                    Callback<ListScopeRulesResult> done) {
  if (!keeps_scope_rules()) {
    HoldStore::ListScopeRules(std::move(from), page_size, options, std::move(done));
    return;
  }
  if (from.partition < 0 || from.partition >= KeySchema::kPartitionCount) {
    std::move(done)(absl::InvalidArgumentError("page_token: partition out of range"));
    return;
  }
  // One partition a call, until the page is full or the partitions end.
  auto page = std::make_shared<ListScopeRulesResult>();
  ListScopeRulesFrom(std::move(from), std::max(1, page_size), options, std::move(page),
                     std::move(done));
}

void RedisHoldStore::ListScopeRulesFrom(ScopeRuleCursor from, int page_size, CallOptions options,
                                        std::shared_ptr<ListScopeRulesResult> page,
                                        Callback<ListScopeRulesResult> done) {
  const int want = page_size - static_cast<int>(page->rules.size());
  redis::RedisCommand command =
      Eval({keys_.ScopeRulesKey(from.partition)},
           lua::ScopeRulesArgv<Arg>{
               .scope = "", .after = from.scope, .count = int64_t{want}, .now = NowArg(options)});
  command.inline_ok = true;
  client_->Submit(std::move(command), options.deadline,
                  [this, from, page_size, options, page,
                   done = std::move(done)](absl::StatusOr<redis::RedisReply> reply) mutable {
                    lua::ScopeRulesReply r;
                    absl::Status status = reply.ok() ? lua::Parse(*reply, &r) : reply.status();
                    if (status.ok() && r.rules.size() % 2 != 0)
                      status = BadReply("scope_rules.lua");
                    for (size_t i = 0; status.ok() && i < r.rules.size(); i += 2) {
                      std::optional<absl::string_view> scope = StrOf(r.rules[i]),
                                                       packed = StrOf(r.rules[i + 1]);
                      std::optional<ScopeRuleRecord> rule;
                      if (scope && packed) rule = internal::UnpackScopeRule(*scope, *packed);
                      if (!rule.has_value()) {
                        status = BadReply("scope_rules.lua");
                      } else {
                        page->rules.push_back(*std::move(rule));
                      }
                    }
                    if (!status.ok()) {
                      std::move(done)(status);
                      return;
                    }
                    page->now = FromMillis(r.now);
                    ScopeRuleCursor next = from;
                    if (r.more == 1) {
                      next.scope = std::string(r.last);
                    } else {
                      next = ScopeRuleCursor{from.partition + 1, ""};
                    }
                    const bool full = static_cast<int>(page->rules.size()) >= page_size;
                    if (next.partition >= KeySchema::kPartitionCount) {
                      std::move(done)(std::move(*page));
                      return;
                    }
                    if (full) {
                      page->next = std::move(next);
                      std::move(done)(std::move(*page));
                      return;
                    }
                    ListScopeRulesFrom(std::move(next), page_size, options, std::move(page),
                                       std::move(done));
                  });
}

}  // namespace orderhold::store
