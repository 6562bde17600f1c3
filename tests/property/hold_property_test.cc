// Model-based property test: random histories of PlaceHold (scopes, quantities, labels, scope
// limits, retries with a changed fingerprint, malformed calls) / Pay / CancelHold / ExtendHold
// (request ids, caps, counts) / GetHold / ReleaseHolds / ListHolds / a reaper pass / a clock
// advance / SCRIPT or FUNCTION FLUSH, over three users and five order ids per user (so ids
// collide), run against HoldModel (tests/property/hold_model.h) and HoldService over a store,
// comparing every answer and, at the end, every user's holds and every order's GetHold. Two stores:
// the fake and the Redis store on a real redis-server (one per binary, started on a free port; each
// history under a key prefix of its own), both on the model's virtual clock (CallOptions::now).
//
// RapidCheck generates the policy and the history and shrinks a failing one to a minimal
// sequence (its output names the commands and prints a `reproduce` string). The number of
// histories and the seed come from RC_PARAMS (tests/CMakeLists.txt sets a fixed seed for the
// suite; tests/property/run.sh --long runs many more with a fresh seed).
#include <algorithm>
#include <cstdint>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "google/rpc/error_details.pb.h"
#include "gtest/gtest.h"
#include "prometheus/registry.h"
#include "rapidcheck.h"
#include "rapidcheck/gtest.h"
#include "rapidcheck/state.h"
#include "server/domain/hold_service.h"
#include "server/domain/return_service.h"
#include "server/domain/scope_limits.h"
#include "server/domain/scope_rule_service.h"
#include "server/domain/scope_service.h"
#include "server/redis/redis_topology.h"
#include "server/redis_store.h"
#include "server/store/hold_store.h"
#include "server/store/partition_store.h"
#include "tests/property/hold_model.h"
#include "tests/testing/fake_clock.h"
#include "tests/testing/fake_hold_store.h"
#include "tests/testing/redis_server.h"

namespace orderhold::property {
namespace {

// The model's clock 0 on the stores' clock. Durations are virtual: Redis expires the outcome
// keys after retention_ms of *real* time (>= 120 s here), far longer than a history runs.
const absl::Time kBase = absl::FromUnixMillis(1800000000000);

enum class Backend { kFake, kRedis };

// The shared redis-server of this binary, started on first use.
testing::RedisServer* SharedRedis() {
  static std::unique_ptr<testing::RedisServer> redis = [] {
    auto started = testing::RedisServer::Start();
    if (!started.ok()) {
      ADD_FAILURE() << started.status();
      return std::unique_ptr<testing::RedisServer>();
    }
    return *std::move(started);
  }();
  return redis.get();
}

domain::HoldPolicy DomainPolicy(const ModelPolicy& p) {
  domain::HoldPolicy policy;
  policy.max_holds = p.max_holds;
  policy.max_units = p.max_units;
  policy.default_ttl = absl::Milliseconds(p.default_ttl_ms);
  policy.max_ttl = absl::Milliseconds(p.max_ttl_ms);
  policy.max_hold_lifetime = absl::Milliseconds(p.lifetime_ms);
  policy.max_extensions = p.max_extensions;
  return policy;
}

int64_t Ms(absl::Time t) { return absl::ToUnixMillis(t) - absl::ToUnixMillis(kBase); }

ModelHold FromDomain(const domain::Hold& hold) {
  ModelHold h;
  h.order_id = hold.order_id;
  h.expire = Ms(hold.expire_time);
  const store::HoldDetails& d = hold.details;
  h.scope = d.scope;
  h.quantity = d.quantity;
  h.labels = ModelLabels(d.labels.begin(), d.labels.end());
  h.scope_limits = ModelLimits{d.scope_limits.max_holds, d.scope_limits.max_units};
  h.place = d.place_time.has_value() ? Ms(*d.place_time) : -1;
  h.cap = d.max_expire_time.has_value() ? Ms(*d.max_expire_time) : -1;
  h.extensions = d.extensions;
  return h;
}

std::vector<ModelHold> FromDomain(const std::vector<domain::Hold>& holds) {
  std::vector<ModelHold> out;
  for (const domain::Hold& hold : holds) out.push_back(FromDomain(hold));
  return out;
}

template <typename Message>
std::optional<Message> Detail(const absl::Status& status) {
  auto payload = status.GetPayload(
      absl::StrCat(domain::kDetailTypeUrlPrefix, Message::descriptor()->full_name()));
  Message message;
  if (!payload.has_value() || !message.ParseFromString(std::string(*payload))) return std::nullopt;
  return message;
}

// An error status as the model renders it.
std::string RenderStatus(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kAlreadyExists:
    case absl::StatusCode::kPermissionDenied:  // a limit class the caller may not use
      return RenderCode(std::string(absl::StatusCodeToString(status.code())));
    case absl::StatusCode::kFailedPrecondition: {
      // ReturnUnits' own refusals.
      if (auto info = Detail<google::rpc::ErrorInfo>(status);
          info.has_value() && info->reason() == "RETURN_EXCEEDS_QUANTITY") {
        return RenderNotReturnable(absl::StrCat("exceeds ", info->metadata().at("quantity"), " ",
                                                info->metadata().at("returned_units")));
      } else if (info.has_value() && info->reason() == "TOO_MANY_RETURNS") {
        return RenderNotReturnable("too_many");
      }
      if (status.message().find("is live (not paid)") != absl::string_view::npos) {
        return RenderNotReturnable("live");
      }
      // A scope's runtime rule refused it: its ErrorInfo, and the RetryInfo until it opens.
      if (auto info = Detail<google::rpc::ErrorInfo>(status);
          info.has_value() && info->reason().starts_with("SCOPE_")) {
        auto retry = Detail<google::rpc::RetryInfo>(status);
        return RenderScopeState(info->reason() == "SCOPE_CLOSED",
                                retry.has_value() ? retry->retry_delay().seconds() * 1000 +
                                                        retry->retry_delay().nanos() / 1000000
                                                  : -1);
      }
      // `order_id "o1" already ended: EXPIRED at 2027-01-15T08:00:00.000Z; ...`
      const std::string message(status.message());
      const size_t at = message.find("already ended: ");
      if (at == std::string::npos) break;
      const std::string rest = message.substr(at + 15);
      const size_t space = rest.find(" at ");
      if (space == std::string::npos) break;
      const std::string outcome = rest.substr(0, space);
      const std::string when = rest.substr(space + 4, rest.find(';') - space - 4);
      absl::Time end;
      std::string error;
      if (!absl::ParseTime(absl::RFC3339_full, when, &end, &error)) break;
      for (ModelOutcome o :
           {ModelOutcome::kPaid, ModelOutcome::kCancelled, ModelOutcome::kExpired}) {
        if (outcome == OutcomeName(o)) return RenderEnded(o, Ms(end));
      }
      break;
    }
    case absl::StatusCode::kResourceExhausted: {
      auto info = Detail<google::rpc::ErrorInfo>(status);
      if (info.has_value() && info->reason() == "HOLD_EXTENSION_LIMIT") {
        return RenderExtensionLimit();
      }
      auto quota = Detail<google::rpc::QuotaFailure>(status);
      auto retry = Detail<google::rpc::RetryInfo>(status);
      if (!quota.has_value()) break;
      int violations = 0;
      for (const auto& v : quota->violations()) {
        const bool units = v.description().find(" units") != std::string::npos;
        if (v.description().find(" is sold out") != std::string::npos) {
          violations |= 64;
        } else if (v.description().find(" and bought ") != std::string::npos) {
          violations |= units ? 256 : 128;  // a purchase cap
        } else if (v.subject() == "user") {
          violations |= units ? 2 : 1;
        } else if (v.subject().starts_with("scope/")) {
          violations |= units ? 32 : 16;
        } else {
          violations |= units ? 8 : 4;
        }
      }
      // No RetryInfo: sold out beyond what expiries can free (rendered -1, as the model does).
      const int64_t retry_ms = retry.has_value() ? retry->retry_delay().seconds() * 1000 +
                                                       retry->retry_delay().nanos() / 1000000
                                                 : -1;
      return RenderLimit(violations, retry_ms);
    }
    default:
      break;
  }
  return absl::StrCat("UNEXPECTED ", status.ToString());
}

// The system under test: HoldService over one store, called at the model's instant.
class Sut {
 public:
  Sut(Backend backend, const ModelPolicy& p)
      : service_(MakeStore(backend, p), DomainPolicy(p), metrics_) {
    domain::ScopeLimits rule{p.rule.max_holds, p.rule.max_units};
    domain::ScopeLimits fallback{p.default_scope.max_holds, p.default_scope.max_units};
    domain::ScopeTotals rule_total{p.rule_total.max_holds, p.rule_total.max_units};
    domain::ScopeTotals default_total{p.default_total.max_holds, p.default_total.max_units};
    auto rules = domain::ScopeRules::Create(
        fallback, {domain::ScopeRule{ModelPolicy::kRulePrefix, rule, rule_total, p.rule_capacity}},
        default_total, p.default_capacity);
    RC_ASSERT(rules.ok());
    service_.SetScopeRules(*std::move(rules));
  }

  bool ok() const { return store_ != nullptr; }
  domain::HoldService& service() { return service_; }
  domain::ScopeRuleService& rules() { return rules_; }
  domain::ReturnService& returns() { return returns_; }
  store::HoldStore& store() { return *store_; }
  // The store's reaper side (the fake and the Redis store are both PartitionStores).
  store::PartitionStore& partitions() {
    return *dynamic_cast<store::PartitionStore*>(store_.get());
  }
  testing::RedisServer* redis() { return redis_; }

  static store::CallOptions At(int64_t now) {
    store::CallOptions options;
    options.now = kBase + absl::Milliseconds(now);
    return options;
  }

 private:
  store::HoldStore& MakeStore(Backend backend, const ModelPolicy& p) {
    const store::OutcomePolicy outcomes{absl::Milliseconds(p.retention_ms), p.max_records};
    if (backend == Backend::kFake) {
      store_ = std::make_unique<testing::FakeHoldStore>(clock_, outcomes);
      return *store_;
    }
    static int histories = 0;
    redis_ = SharedRedis();
    if (redis_ != nullptr) {
      RedisStoreOptions options;
      options.client.topology =
          std::make_shared<redis::StandaloneTopology>(redis::HostPort{"127.0.0.1", redis_->port()});
      options.key_prefix = absl::StrCat("prop", ++histories);
      options.outcomes = outcomes;
      auto store = ConnectRedisStore(std::move(options));
      if (store.ok()) {
        store_ = *std::move(store);
      } else {
        ADD_FAILURE() << store.status();
      }
    }
    if (store_ == nullptr) store_ = std::make_unique<testing::FakeHoldStore>(clock_, outcomes);
    return *store_;
  }

  testing::FakeClock clock_;
  prometheus::Registry registry_;
  metrics::Metrics metrics_{registry_};
  std::unique_ptr<store::HoldStore> store_;
  testing::RedisServer* redis_ = nullptr;
  domain::HoldService service_;
  domain::ScopeService scopes_{*store_, service_, metrics_};
  domain::ScopeRuleService rules_{*store_, scopes_};
  domain::ReturnService returns_{*store_, metrics_};
};

// How often each kind of answer was checked (the call and the answer's first two words, e.g.
// "PlaceHold: RESOURCE_EXHAUSTED violations=5"), printed when the binary ends: the evidence that
// the histories reach every branch, not only the easy ones.
class AnswerKinds : public ::testing::Environment {
 public:
  static void Count(const std::string& call, const std::string& answer) {
    if (answer.empty()) return;  // a clock step
    std::string kind;
    if (answer.starts_with("OK [") || answer.starts_with("reaped")) {  // lists: their length
      const auto holds = std::count(answer.begin(), answer.end(), '{');
      const auto times = std::count(answer.begin(), answer.end(), ' ');  // "reaped 1000 2000"
      kind = answer.starts_with("OK") ? absl::StrCat("OK ", holds, " holds")
                                      : absl::StrCat("reaped ", times);
    } else {
      const size_t first = answer.find(' ');
      const size_t second = first == std::string::npos ? first : answer.find(' ', first + 1);
      kind = answer.substr(0, second);
      if (const size_t brace = kind.find('{'); brace != std::string::npos) kind.resize(brace);
    }
    absl::MutexLock lock(&mu_);
    ++counts_[absl::StrCat(call, ": ", kind)];
  }
  void TearDown() override {
    absl::MutexLock lock(&mu_);
    std::cout << "Answers checked, by kind:\n";
    for (const auto& [kind, count] : counts_) std::cout << "  " << count << "\t" << kind << "\n";
  }

 private:
  static inline absl::Mutex mu_;
  static inline std::map<std::string, int64_t> counts_;
};
const auto* const kAnswerKinds = ::testing::AddGlobalTestEnvironment(new AnswerKinds);

// One step: what the model answers (and becomes) and what the service answers, compared.
struct Step : rc::state::Command<HoldModel, Sut> {
  virtual std::string OnModel(HoldModel& model) const = 0;
  virtual std::string OnSut(Sut& sut, int64_t now) const = 0;
  void apply(HoldModel& model) const override { OnModel(model); }
  void run(const HoldModel& model, Sut& sut) const override {
    HoldModel after = model;
    const std::string want = OnModel(after);
    const std::string got = OnSut(sut, model.now());
    RC_ASSERT(got == want);
    std::ostringstream call;
    show(call);
    AnswerKinds::Count(call.str().substr(0, call.str().find('(')), want);
  }
};

// --- Generators: small id spaces, so calls collide; a few malformed values.
rc::Gen<std::string> GenUser() {
  return rc::gen::weightedElement<std::string>({{16, "u1"}, {12, "u2"}, {8, "u3"}, {1, ""}});
}
rc::Gen<std::string> GenOrder() {
  return rc::gen::weightedElement<std::string>(
      {{12, "o1"}, {10, "o2"}, {8, "o3"}, {6, "o4"}, {4, "o5"}, {1, "o\x7f"}});
}
rc::Gen<std::optional<int64_t>> GenTtl() {
  return rc::gen::weightedElement<std::optional<int64_t>>({{6, std::nullopt},
                                                           {6, 1000},
                                                           {6, 2000},
                                                           {4, 3000},
                                                           {4, 5000},
                                                           {2, 6000},
                                                           {1, 0},
                                                           {1, 6001}});
}
rc::Gen<std::string> GenScope() {
  return rc::gen::weightedElement<std::string>(
      {{4, ""}, {4, "event:1"}, {4, "event:2"}, {2, "show:1"}});
}

// A (user, order): three times in four one the model holds or remembers, when there is one.
std::pair<std::string, std::string> GenTarget(const HoldModel& model) {
  const auto known = model.KnownOrders();
  if (!known.empty() && *rc::gen::weightedElement<bool>({{3, true}, {1, false}})) {
    return *rc::gen::elementOf(known);
  }
  return {*GenUser(), *GenOrder()};
}

struct Place : Step {
  PlaceCall call;
  explicit Place(const HoldModel& model) {
    std::tie(call.user_id, call.order_id) =
        *rc::gen::weightedElement<bool>({{1, true}, {2, false}})
            ? GenTarget(model)
            : std::pair<std::string, std::string>{*GenUser(), *GenOrder()};
    call.ttl_ms = *GenTtl();
    call.scope = *GenScope();
    call.quantity = *rc::gen::weightedElement<uint32_t>({{8, 0}, {6, 1}, {4, 2}, {2, 3}, {1, 7}});
    using Labels = std::vector<std::pair<std::string, std::string>>;
    call.labels = *rc::gen::weightedElement<Labels>(
        {{10, {}}, {4, {{"seat", "1"}}}, {4, {{"seat", "2"}}}, {1, {{"Bad", "x"}}}});
    call.scope_limits =
        *rc::gen::weightedElement<std::optional<ModelLimits>>({{12, std::nullopt},
                                                               {1, ModelLimits{1, 0}},
                                                               {1, ModelLimits{2, 3}},
                                                               {1, ModelLimits{0, 2}}});
    call.limit_class = *rc::gen::weightedElement<std::string>({{12, ""}, {4, "vip"}, {1, "gold"}});
    call.identity = *rc::gen::element<std::string>("uri:a", "uri:b");
  }
  std::string OnModel(HoldModel& model) const override { return model.PlaceHold(call); }
  std::string OnSut(Sut& sut, int64_t now) const override {
    domain::PlaceHoldCommand command;
    command.user_id = call.user_id;
    command.order_id = call.order_id;
    if (call.ttl_ms.has_value()) command.ttl = absl::Milliseconds(*call.ttl_ms);
    command.scope = call.scope;
    command.quantity = call.quantity;
    command.labels = call.labels;
    if (call.scope_limits.has_value()) {
      command.scope_limits =
          domain::ScopeLimits{call.scope_limits->max_holds, call.scope_limits->max_units};
    }
    command.limit_class = call.limit_class;
    command.caller_identities = {call.identity};
    auto reply = Await<domain::PlaceHoldReply>([&](auto done) {
      sut.service().PlaceHold(std::move(command), Sut::At(now), std::move(done));
    });
    if (!reply.ok()) return RenderStatus(reply.status());
    return RenderPlaced(reply->created, FromDomain(reply->hold), reply->active_holds);
  }
  void show(std::ostream& os) const override {
    os << "PlaceHold(" << call.user_id << ", " << call.order_id
       << ", ttl=" << (call.ttl_ms.has_value() ? std::to_string(*call.ttl_ms) : "default")
       << ", scope=" << call.scope << ", qty=" << call.quantity
       << ", labels=" << call.labels.size();
    if (call.scope_limits.has_value()) {
      os << ", limits=" << call.scope_limits->max_holds << "/" << call.scope_limits->max_units;
    }
    if (!call.limit_class.empty()) os << ", class=" << call.limit_class << " as " << call.identity;
    os << ")";
  }
};

struct End : Step {
  std::string user_id, order_id;
  bool pay = *rc::gen::arbitrary<bool>();
  explicit End(const HoldModel& model) { std::tie(user_id, order_id) = GenTarget(model); }
  std::string OnModel(HoldModel& model) const override { return model.End(user_id, order_id, pay); }
  std::string OnSut(Sut& sut, int64_t now) const override {
    if (pay) {
      auto reply = Await<domain::PayReply>(
          [&](auto done) { sut.service().Pay(user_id, order_id, Sut::At(now), std::move(done)); });
      if (!reply.ok()) return RenderStatus(reply.status());
      return RenderEndedNow(reply->already_paid, Ms(reply->now), FromDomain(reply->hold));
    }
    auto reply = Await<domain::CancelReply>(
        [&](auto done) { sut.service().Cancel(user_id, order_id, Sut::At(now), std::move(done)); });
    if (!reply.ok()) return RenderStatus(reply.status());
    return RenderEndedNow(reply->already_cancelled, Ms(reply->now), FromDomain(reply->hold));
  }
  void show(std::ostream& os) const override {
    os << (pay ? "Pay(" : "CancelHold(") << user_id << ", " << order_id << ")";
  }
};

// ReturnUnits of a paid order (mostly), 1-3 units, with one of three request ids (so retries,
// second returns and too many units all occur).
struct Return : Step {
  ReturnCall call;
  explicit Return(const HoldModel& model) {
    const auto paid = model.PaidOrders();
    std::tie(call.user_id, call.order_id) =
        !paid.empty() && *rc::gen::weightedElement<bool>({{3, true}, {1, false}})
            ? *rc::gen::elementOf(paid)
            : GenTarget(model);
    call.units = *rc::gen::weightedElement<int64_t>({{4, 1}, {2, 2}, {1, 3}, {1, 0}});
    call.request_id = *rc::gen::element<std::string>("r1", "r1", "r2", "r3");
  }
  std::string OnModel(HoldModel& model) const override { return model.ReturnUnits(call); }
  std::string OnSut(Sut& sut, int64_t now) const override {
    auto reply = Await<domain::ReturnUnitsReply>([&](auto done) {
      sut.returns().ReturnUnits(
          domain::ReturnUnitsCommand{call.user_id, call.order_id, call.units, call.request_id},
          Sut::At(now), std::move(done));
    });
    if (!reply.ok()) return RenderStatus(reply.status());
    std::optional<std::pair<ModelLimits, ModelLimits>> usage;
    if (reply->scope_usage.has_value()) {
      usage = std::pair{
          ModelLimits{reply->scope_usage->holds, reply->scope_usage->units},
          ModelLimits{reply->scope_usage->limits.max_holds, reply->scope_usage->limits.max_units}};
    }
    return RenderReturned(reply->already_returned, reply->returned_units,
                          reply->total_returned_units, usage);
  }
  void show(std::ostream& os) const override {
    os << "ReturnUnits(" << call.user_id << ", " << call.order_id << ", " << call.units << ", "
       << call.request_id << ")";
  }
};

struct Extend : Step {
  ExtendCall call;
  explicit Extend(const HoldModel& model) {
    // Mostly a live hold: the branches (capped, counted, replayed, exhausted) are there.
    const auto live = model.LiveOrders();
    std::tie(call.user_id, call.order_id) =
        !live.empty() && *rc::gen::weightedElement<bool>({{2, true}, {1, false}})
            ? *rc::gen::elementOf(live)
            : GenTarget(model);
    call.ttl_ms = *GenTtl();
    call.request_id = *rc::gen::weightedElement<std::string>(
        {{3, ""}, {2, "r1"}, {2, "r2"}, {1, "r3"}, {1, std::string(65, 'r')}});
  }
  std::string OnModel(HoldModel& model) const override { return model.ExtendHold(call); }
  std::string OnSut(Sut& sut, int64_t now) const override {
    domain::ExtendHoldCommand command;
    command.user_id = call.user_id;
    command.order_id = call.order_id;
    if (call.ttl_ms.has_value()) command.ttl = absl::Milliseconds(*call.ttl_ms);
    command.request_id = call.request_id;
    auto reply = Await<domain::ExtendHoldReply>([&](auto done) {
      sut.service().ExtendHold(std::move(command), Sut::At(now), std::move(done));
    });
    if (!reply.ok()) return RenderStatus(reply.status());
    return RenderExtended(reply->extended, reply->capped, reply->extensions_left,
                          FromDomain(reply->hold));
  }
  void show(std::ostream& os) const override {
    os << "ExtendHold(" << call.user_id << ", " << call.order_id
       << ", ttl=" << (call.ttl_ms.has_value() ? std::to_string(*call.ttl_ms) : "default")
       << ", request_id=" << call.request_id.substr(0, 8) << ")";
  }
};

std::string GetOnSut(Sut& sut, int64_t now, const std::string& user_id,
                     const std::string& order_id) {
  auto reply = Await<domain::GetHoldReply>(
      [&](auto done) { sut.service().GetHold(user_id, order_id, Sut::At(now), std::move(done)); });
  if (!reply.ok()) return RenderStatus(reply.status());
  if (!reply->end.has_value()) return RenderGotLive(FromDomain(reply->hold));
  return RenderGotEnded(static_cast<ModelOutcome>(reply->end->outcome), Ms(reply->end->end_time),
                        FromDomain(reply->hold));
}

std::string ListOnSut(Sut& sut, int64_t now, const std::string& user_id, const std::string& scope) {
  auto reply = Await<domain::ListHoldsReply>(
      [&](auto done) { sut.service().ListHolds(user_id, scope, Sut::At(now), std::move(done)); });
  if (!reply.ok()) return RenderStatus(reply.status());
  return RenderList(FromDomain(reply->holds));
}

struct Get : Step {
  std::string user_id, order_id;
  explicit Get(const HoldModel& model) { std::tie(user_id, order_id) = GenTarget(model); }
  std::string OnModel(HoldModel& model) const override { return model.GetHold(user_id, order_id); }
  std::string OnSut(Sut& sut, int64_t now) const override {
    return GetOnSut(sut, now, user_id, order_id);
  }
  void show(std::ostream& os) const override {
    os << "GetHold(" << user_id << ", " << order_id << ")";
  }
};

struct List : Step {
  std::string user_id = *GenUser();
  std::string scope = *GenScope();
  std::string OnModel(HoldModel& model) const override { return model.ListHolds(user_id, scope); }
  std::string OnSut(Sut& sut, int64_t now) const override {
    return ListOnSut(sut, now, user_id, scope);
  }
  void show(std::ostream& os) const override {
    os << "ListHolds(" << user_id << ", " << scope << ")";
  }
};

// A runtime rule for "event:2" (which the file's "event:" rule covers) or "show:1": limits,
// totals, capacity, purchase caps, state and times near the model's now.
struct PutRule : Step {
  std::string scope;
  ModelRule rule;
  explicit PutRule(const HoldModel& model) {
    scope = *rc::gen::element<std::string>("event:2", "show:1");
    rule.limits = *rc::gen::element(ModelLimits{0, 0}, ModelLimits{1, 0}, ModelLimits{0, 3});
    // A capacity alone (no total) half of the time: the Redis store checks it against the index's
    // units counter first, entries no longer live included, and counts them only when it must.
    rule.totals = *rc::gen::weightedElement<ModelLimits>(
        {{2, ModelLimits{0, 0}}, {1, ModelLimits{2, 0}}, {1, ModelLimits{0, 4}}});
    rule.capacity = *rc::gen::weightedElement<int64_t>({{1, 0}, {2, 3}, {1, 6}});
    rule.purchases = *rc::gen::weightedElement<ModelLimits>(
        {{1, ModelLimits{0, 0}}, {2, ModelLimits{0, 3}}, {2, ModelLimits{2, 0}}});
    rule.state = *rc::gen::weightedElement<int>({{6, 1}, {2, 2}, {1, 3}});
    rule.open = *rc::gen::element<int64_t>(0, model.now() + 1, model.now() + 1000);
    rule.close =
        *rc::gen::weightedElement<int64_t>({{3, 0}, {1, std::max(rule.open, model.now()) + 2000}});
    if (*rc::gen::element(false, true)) {  // a class "vip" for "uri:a"
      ModelClass& vip = rule.classes["vip"];
      vip.limits = *rc::gen::element(ModelLimits{0, 0}, ModelLimits{0, 5}, ModelLimits{2, 0});
      vip.purchases = *rc::gen::element(ModelLimits{0, 0}, ModelLimits{0, 5});
      vip.principals = {"uri:a"};
    }
  }
  std::string OnModel(HoldModel& model) const override { return model.PutRule(scope, rule); }
  std::string OnSut(Sut& sut, int64_t now) const override {
    store::ScopeRuleRecord record;
    record.scope = scope;
    record.limits = store::LevelLimits{rule.limits.max_holds, rule.limits.max_units};
    record.totals = store::LevelLimits{rule.totals.max_holds, rule.totals.max_units};
    record.capacity_units = rule.capacity;
    record.purchases = store::LevelLimits{rule.purchases.max_holds, rule.purchases.max_units};
    record.state = static_cast<store::ScopeState>(rule.state);
    if (rule.open > 0) record.open_time = kBase + absl::Milliseconds(rule.open);
    if (rule.close > 0) record.close_time = kBase + absl::Milliseconds(rule.close);
    for (const auto& [name, c] : rule.classes) {
      record.classes[name] = store::LimitClassRecord{
          store::LevelLimits{c.limits.max_holds, c.limits.max_units},
          store::LevelLimits{c.purchases.max_holds, c.purchases.max_units},
          std::vector<std::string>(c.principals.begin(), c.principals.end())};
    }
    auto put = Await<domain::ScopeRuleReply>([&](auto done) {
      sut.rules().PutScopeRule(std::move(record), Sut::At(now), std::move(done));
    });
    return put.ok() ? "OK" : RenderStatus(put.status());
  }
  void show(std::ostream& os) const override {
    os << "PutRule(" << scope << ", limits=" << rule.limits.max_holds << "/"
       << rule.limits.max_units << ", totals=" << rule.totals.max_holds << "/"
       << rule.totals.max_units << ", capacity=" << rule.capacity
       << ", purchases=" << rule.purchases.max_holds << "/" << rule.purchases.max_units
       << ", state=" << rule.state << ", open=" << rule.open << ", close=" << rule.close
       << ", classes=" << rule.classes.size() << ")";
  }
};

struct DeleteRule : Step {
  std::string scope;
  explicit DeleteRule(const HoldModel&) {
    scope = *rc::gen::element<std::string>("event:2", "show:1");
  }
  std::string OnModel(HoldModel& model) const override { return model.DeleteRule(scope); }
  std::string OnSut(Sut& sut, int64_t now) const override {
    auto deleted = Await<absl::Time>(
        [&](auto done) { sut.rules().DeleteScopeRule(scope, "", Sut::At(now), std::move(done)); });
    return deleted.ok() ? "OK" : RenderStatus(deleted.status());
  }
  void show(std::ostream& os) const override { os << "DeleteRule(" << scope << ")"; }
};

struct Release : Step {
  std::string user_id = *GenUser();
  std::string scope = *GenScope();
  std::string OnModel(HoldModel& model) const override {
    return model.ReleaseHolds(user_id, scope);
  }
  std::string OnSut(Sut& sut, int64_t now) const override {
    auto reply = Await<domain::ReleaseHoldsReply>([&](auto done) {
      sut.service().ReleaseHolds(user_id, scope, Sut::At(now), std::move(done));
    });
    if (!reply.ok()) return RenderStatus(reply.status());
    return RenderList(FromDomain(reply->holds));
  }
  void show(std::ostream& os) const override {
    os << "ReleaseHolds(" << user_id << ", " << scope << ")";
  }
};

// One reaper pass: every partition, all its due users.
struct Reap : Step {
  std::string OnModel(HoldModel& model) const override { return model.Reap(); }
  std::string OnSut(Sut& sut, int64_t now) const override {
    std::vector<int64_t> reaped;
    for (int partition = 0; partition < sut.partitions().partition_count(); ++partition) {
      store::ReapArgs args;
      args.max_users = 1000;
      auto result = Await<store::ReapResult>([&](auto done) {
        sut.partitions().Reap(partition, args, Sut::At(now), std::move(done));
      });
      if (!result.ok()) return RenderStatus(result.status());
      if (result->more) return "UNEXPECTED more";
      for (absl::Time t : result->reaped_expire_times) reaped.push_back(Ms(t));
    }
    return RenderReaped(std::move(reaped));
  }
  void show(std::ostream& os) const override { os << "Reap()"; }
};

struct Advance : Step {
  int64_t ms = *rc::gen::weightedElement<int64_t>(
      {{3, 1}, {3, 500}, {4, 1000}, {3, 2000}, {1, 5000}, {1, 130000}});
  std::string OnModel(HoldModel& model) const override {
    model.Advance(ms);
    return "";
  }
  std::string OnSut(Sut&, int64_t) const override { return ""; }
  void show(std::ostream& os) const override { os << "Advance(" << ms << " ms)"; }
};

// A clock step to the next expiry ahead, 1 ms before it or 1 ms after it: the boundary where a
// hold stops being live (expire_time is exclusive).
struct AdvanceToExpiry : Advance {
  explicit AdvanceToExpiry(const HoldModel& model) {
    const std::optional<int64_t> next = model.NextExpiry();
    RC_PRE(next.has_value());
    ms = std::max<int64_t>(0, *next - model.now() + *rc::gen::element<int64_t>(-1, 0, 0, 1));
  }
};

// SCRIPT FLUSH or FUNCTION FLUSH on the Redis store's server: the next calls must load the
// scripts again (NOSCRIPT, or "Function not found" while the store calls by FCALL).
struct ScriptFlush : Step {
  std::string what = *rc::gen::element<std::string>("SCRIPT", "FUNCTION");
  std::string OnModel(HoldModel&) const override { return "OK"; }
  std::string OnSut(Sut& sut, int64_t) const override {
    if (sut.redis() == nullptr) return "OK";
    auto reply = sut.redis()->Command({what, "FLUSH"});
    return reply.ok() ? "OK" : reply.status().ToString();
  }
  void show(std::ostream& os) const override { os << what << " FLUSH"; }
};

rc::Gen<ModelPolicy> GenPolicy() {
  return rc::gen::exec([] {
    ModelPolicy p;
    p.max_holds = *rc::gen::inRange(1, 4);
    p.max_units = *rc::gen::element<int64_t>(0, 0, 3, 5);
    p.lifetime_ms = *rc::gen::element<int64_t>(3000, 5000, 10000);
    p.max_extensions = *rc::gen::element(0, 1, 2);
    p.retention_ms = *rc::gen::element<int64_t>(120000, 300000);
    p.max_records = *rc::gen::element(1, 2, 3, 1000);
    p.rule = ModelLimits{*rc::gen::inRange<int64_t>(0, 3), *rc::gen::element<int64_t>(0, 3)};
    p.default_scope = ModelLimits{*rc::gen::element<int64_t>(0, 2), 0};
    p.rule_total =
        ModelLimits{*rc::gen::element<int64_t>(0, 1, 2, 4), *rc::gen::element<int64_t>(0, 2, 3, 6)};
    p.default_total = ModelLimits{*rc::gen::element<int64_t>(0, 0, 3), 0};
    p.rule_capacity = *rc::gen::element<int64_t>(0, 0, 3, 6);
    p.default_capacity = *rc::gen::element<int64_t>(0, 0, 4);
    return p;
  });
}

// One history on `backend`: every answer, then the final state, as the model says.
void CheckHistory(Backend backend) {
  const ModelPolicy policy = *GenPolicy();
  RC_TAG(policy.max_records == 1 ? "max_records=1" : "records>1");
  const HoldModel initial(policy);
  Sut sut(backend, policy);
  RC_ASSERT(sut.ok());
  const auto commands = *rc::state::gen::commands(
      initial,
      rc::state::gen::execOneOfWithArgs<Place, Place, Place, Place, End, End, Extend, Extend, Get,
                                        List, Release, Reap, Advance, AdvanceToExpiry, ScriptFlush,
                                        PutRule, DeleteRule, Return, Return>());
  rc::state::runAll(commands, initial, sut);
  HoldModel final_model = initial;
  rc::state::applyAll(commands, final_model);
  for (const std::string& user : final_model.Users()) {
    if (user.empty()) continue;
    RC_ASSERT(ListOnSut(sut, final_model.now(), user, "") == final_model.ListHolds(user, ""));
    for (const char* order : {"o1", "o2", "o3", "o4", "o5"}) {
      RC_ASSERT(GetOnSut(sut, final_model.now(), user, order) == final_model.GetHold(user, order));
    }
  }
}

RC_GTEST_PROP(HoldModelProperty, FakeStoreAnswersAsTheModel, ()) { CheckHistory(Backend::kFake); }

RC_GTEST_PROP(HoldModelProperty, RedisStoreAnswersAsTheModel, ()) { CheckHistory(Backend::kRedis); }

}  // namespace
}  // namespace orderhold::property
