// HoldService: the quota semantics of OrderHold on top of a HoldStore, independent of gRPC.
//
// It validates what callers send (INVALID_ARGUMENT naming the field, nothing touched), turns the
// store's outcomes into statuses and records the hold metrics. All decisions about time are taken
// by the store, on its clock (Redis TIME in production), so replicas agree.
//
// Limits. PlaceHold checks, in one store call, the user's holds (policy.max_holds) and units
// (policy.max_units) and, for a scoped hold, the scope's: the request's scope_limits when it
// carries them, else the server's ScopeRules (SetScopeRules; none: no scope limit); and the
// scope's totals across every user (the rules' total_max_holds, total_max_units), which no request
// can change, on a store that keeps a scope index (FAILED_PRECONDITION otherwise).
//
// Errors (absl codes, = gRPC codes):
//   INVALID_ARGUMENT    user_id / order_id / ttl / scope / quantity / labels / scope_limits
//                       malformed (see hold.h), or a quantity above an applicable max_units.
//   RESOURCE_EXHAUSTED  PlaceHold: a limit would be exceeded; the message names the limits and
//                       when the earliest hold expires (absl: "perhaps a per-user quota"). The
//                       status carries payloads (absl::Status::SetPayload) keyed by the type URLs
//                       of google.rpc.QuotaFailure (one violation per exceeded level), ErrorInfo
//                       (reason USER_HOLD_LIMIT, USER_UNIT_LIMIT, SCOPE_HOLD_LIMIT,
//                       SCOPE_UNIT_LIMIT or SCOPE_TOTAL_LIMIT, domain "orderhold.v1") and
//                       RetryInfo, with the
//                       serialized messages as values: the gRPC layer sends them as the status
//                       details (https://cloud.google.com/apis/design/errors#error_details).
//   ALREADY_EXISTS      PlaceHold: a live hold for the order_id has another scope, quantity or
//                       labels than the request (named in the message).
//   FAILED_PRECONDITION the order's hold already ended in a way that forbids the call: PlaceHold
//                       of any ended order, Pay of a CANCELLED or EXPIRED one, Cancel of a PAID
//                       or EXPIRED one. The message names the outcome and its time (AIP-193: the
//                       system is not in the state the call needs; retrying will not help).
//   NOT_FOUND           Pay / Cancel: unknown order (never placed, or forgotten after
//                       --outcome_retention).
//   UNAVAILABLE, DEADLINE_EXCEEDED, INTERNAL   from the store.
//
// Thread-safe (no mutable state of its own). Callbacks run on the store's threads or inline.
#ifndef ORDERHOLD_SERVER_DOMAIN_HOLD_SERVICE_H_
#define ORDERHOLD_SERVER_DOMAIN_HOLD_SERVICE_H_

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "server/domain/hold.h"
#include "server/domain/hold_errors.h"
#include "server/domain/page_token.h"
#include "server/domain/scope_limits.h"
#include "server/domain/tenant.h"
#include "server/metrics/metrics.h"
#include "server/store/hold_store.h"

namespace orderhold::domain {

struct PlaceHoldCommand {
  std::string user_id;
  std::string order_id;
  std::optional<absl::Duration> ttl;  // unset: policy.default_ttl
  std::string scope;                  // "" = unscoped
  uint32_t quantity = 0;              // units; 0 means 1
  // As sent, in order (a key sent twice: the last wins); validated by ValidateLabels.
  std::vector<std::pair<std::string, std::string>> labels;
  // The scope's limits carried by the request (with a scope only); unset: the server's rules.
  std::optional<ScopeLimits> scope_limits;
  // The limit class of the scope's runtime rule asked ("" = none; with a scope only: 1-64 bytes of
  // [A-Za-z0-9_.-], ValidateLimitClassName), and the caller's typed identities ("uri:...",
  // "dns:...", "subject:...": its client certificate's) it is checked against in the placing
  // step: PERMISSION_DENIED unless the class lists one of them.
  std::string limit_class = {};
  std::vector<std::string> caller_identities = {};
};

// One level's usage and limits (orderhold.v1.LimitUsage): live holds and units counted there.
struct LevelUsage {
  int64_t holds = 0;
  int64_t units = 0;
  ScopeLimits limits;  // 0 = no limit in that unit
  friend bool operator==(const LevelUsage&, const LevelUsage&) = default;
};

struct PlaceHoldReply {
  Hold hold;
  absl::Time now;        // store clock at the call; remaining = hold.expire_time - now
  bool created = false;  // false: the live hold already existed (idempotent retry)
  int active_holds = 0;  // live holds after the call
  int max_holds = 0;
  // After the call. The user level is reported when the call involves more than holds (see
  // HoldService::ReportsUsage); the scope level when the hold has a scope.
  std::optional<LevelUsage> user_usage;
  std::optional<LevelUsage> scope_usage;
  // The scope across every user, when its rule sets a total: its live holds and units after the
  // call, and the totals (limits = the totals in force).
  std::optional<LevelUsage> scope_total_usage = std::nullopt;
};

struct PayReply {
  Hold hold;                  // the paid (now removed) hold
  absl::Time now;             // store clock at payment (the first payment when already_paid)
  bool already_paid = false;  // an earlier call paid it; nothing changed
  // The reference the hold was paid with (this call's, or the first payment's when already_paid);
  // "" = none.
  std::string payment_reference = {};
};

struct CancelReply {
  Hold hold;                       // the cancelled (now removed) hold
  absl::Time now;                  // store clock at cancellation (the first one when repeated)
  bool already_cancelled = false;  // an earlier call cancelled it; nothing changed
};

struct ListHoldsReply {
  std::vector<Hold> holds;  // live holds (of the scope, when one was given), earliest first
  absl::Time now;           // store clock at the call
  int max_holds = 0;
  // All the user's live holds; reported as PlaceHoldReply's, or when a listed hold is not plain.
  std::optional<LevelUsage> user_usage;
  std::optional<LevelUsage> scope_usage;  // with a scope: its holds, and the limits a PlaceHold
                                          // meets there (its runtime rule's, else the file's)
  // Where the next page starts (page_token.h); empty on the last page.
  std::string next_page_token;
};

// Which page of ListHolds (AIP-158).
struct ListPage {
  int64_t page_size = 0;   // 0: kDefaultPageSize; above kMaxPageSize: kMaxPageSize; < 0: invalid
  std::string page_token;  // "" = the first page; else a next_page_token of the same request
};

struct ExtendHoldCommand {
  std::string user_id;
  std::string order_id;
  std::optional<absl::Duration> ttl;  // unset: policy.default_ttl
  std::string request_id;             // "" = none
};

struct ExtendHoldReply {
  Hold hold;              // after the call
  absl::Time now;         // store clock at the call; remaining = hold.expire_time - now
  bool extended = false;  // this call moved the expiry
  bool capped = false;    // now + ttl was past hold.details.max_expire_time
  // policy.max_extensions - hold.details.extensions (>= 0); unset when max_extensions is 0.
  std::optional<int64_t> extensions_left;
};

struct GetHoldReply {
  Hold hold;                          // live, or as it ended
  absl::Time now;                     // store clock at the call
  std::optional<store::HoldEnd> end;  // set when the hold has ended
};

struct ReleaseHoldsReply {
  // Ended CANCELLED by this call, earliest expire_time first: the first kDefaultPageSize of them.
  std::vector<Hold> holds;
  absl::Time now;        // store clock at the call (their end time)
  int64_t released = 0;  // how many this call ended CANCELLED (all of them)
};

class HoldService {
 public:
  // `store` and `metrics` must outlive this object. `policy` must pass ValidatePolicy. Scope rules:
  // none (scopes unlimited) until SetScopeRules.
  HoldService(store::HoldStore& store, HoldPolicy policy, metrics::Metrics& metrics);

  // See the OrderHold.PlaceHold rpc. Counts orderhold_holds_placed_total /
  // orderhold_holds_rejected_total{reason} (a refusal: the first exceeded level) /
  // orderhold_holds_expired_total (lazy cleanup).
  void PlaceHold(PlaceHoldCommand command, store::CallOptions options,
                 store::Callback<PlaceHoldReply> done);

  // See the OrderHold.Pay rpc. Counts orderhold_holds_paid_total (and expired ones found on the
  // way); a repeated Pay of a PAID hold is OK with already_paid. `payment_reference` ("" = none;
  // INVALID_ARGUMENT naming it unless ValidatePaymentReference passes) is kept with the outcome
  // and put in the PAID event. A Pay carrying one of an order already paid is compared with the
  // reference it was paid with: the same, already_paid; another, FAILED_PRECONDITION
  // (PaidWithOtherReferenceError). An order paid without one, and a Pay without one, compare
  // nothing: already_paid, the reply carrying the reference recorded ("" = none) for the caller
  // to see.
  void Pay(std::string user_id, std::string order_id, std::string payment_reference,
           store::CallOptions options, store::Callback<PayReply> done);
  // Without a payment reference.
  void Pay(std::string user_id, std::string order_id, store::CallOptions options,
           store::Callback<PayReply> done) {
    Pay(std::move(user_id), std::move(order_id), std::string(), options, std::move(done));
  }

  // See the OrderHold.CancelHold rpc. Counts orderhold_holds_cancelled_total; a repeated Cancel of
  // a CANCELLED hold is OK with already_cancelled.
  void Cancel(std::string user_id, std::string order_id, store::CallOptions options,
              store::Callback<CancelReply> done);

  // See the OrderHold.ListHolds rpc: one page of the user's live holds, or of those of `scope`
  // ("" = all), with the usage of every level over all of them. INVALID_ARGUMENT naming user_id,
  // scope, page_size or page_token (page_token.h).
  void ListHolds(std::string user_id, std::string scope, ListPage page, store::CallOptions options,
                 store::Callback<ListHoldsReply> done);
  // The first page of kDefaultPageSize.
  void ListHolds(std::string user_id, std::string scope, store::CallOptions options,
                 store::Callback<ListHoldsReply> done) {
    ListHolds(std::move(user_id), std::move(scope), ListPage{}, options, std::move(done));
  }
  void ListHolds(std::string user_id, store::CallOptions options,
                 store::Callback<ListHoldsReply> done) {
    ListHolds(std::move(user_id), "", ListPage{}, options, std::move(done));
  }

  // See the OrderHold.ExtendHold rpc. INVALID_ARGUMENT naming user_id, order_id, ttl or
  // request_id; NOT_FOUND for an unknown order; FAILED_PRECONDITION (EndedError) when the hold has
  // ended, also when this call found it past its expiry and ended it; RESOURCE_EXHAUSTED
  // (ExtensionLimitError) when policy.max_extensions is used up. Counts
  // orderhold_hold_extensions_total{result} and the holds the call ended as EXPIRED.
  void ExtendHold(ExtendHoldCommand command, store::CallOptions options,
                  store::Callback<ExtendHoldReply> done);

  // See the OrderHold.GetHold rpc. INVALID_ARGUMENT naming user_id or order_id; NOT_FOUND for an
  // unknown or forgotten order.
  void GetHold(std::string user_id, std::string order_id, store::CallOptions options,
               store::Callback<GetHoldReply> done);

  // See the OrderHold.ReleaseHolds rpc. INVALID_ARGUMENT naming user_id or scope. Counts the
  // released holds in orderhold_holds_cancelled_total, and those found expired.
  void ReleaseHolds(std::string user_id, std::string scope, store::CallOptions options,
                    store::Callback<ReleaseHoldsReply> done);

  // Replaces the server's scope rules (the --scope_limits file, re-read on SIGHUP). Holds already
  // placed keep the limits they were placed under in their details; the new rules apply to the
  // next PlaceHold. Thread-safe: calls in flight use the old or the new rules, whole.
  void SetScopeRules(ScopeRules rules);
  // The scope limits a PlaceHold of `scope` without limits of its own is checked against now. A
  // tenant's scope (tenant.h) is looked up as its tenant spells it: rules apply in every tenant.
  ScopeLimits RulesFor(absl::string_view scope) const;
  // The rule's per-user limits and totals for `scope`.
  ScopeRules::Resolved ResolvedFor(absl::string_view scope) const;

  // Whether answers carry the usage per level (PlaceHoldReply/ListHoldsReply::user_usage): when
  // the server counts more than holds (--max_units > 0, or scope rules), or `asks_more` (the call
  // set a scope, a quantity, labels or scope limits, or lists a scope or a hold that is not
  // plain). Otherwise active_holds and max_holds say it all, as before scopes existed.
  bool ReportsUsage(bool asks_more) const;

  const HoldPolicy& policy() const { return policy_; }

  // The tenants' own limits (--tenants, tenant.h): a tenant's max_holds and max_units replace
  // policy's for its users (the tenant of a qualified user_id). `tenants` must outlive this
  // object; set it before the first call (not thread-safe against calls in flight).
  void set_tenants(const TenantTable* tenants) { tenants_ = tenants; }
  // The per-user limits of `user_id` (a stored id): its tenant's, else policy's max_holds and
  // max_units.
  ScopeLimits UserLimitsFor(absl::string_view user_id) const;

 private:
  // What a PlaceHold's answer needs besides the store's result (the args are moved into the
  // store).
  struct Asked {
    std::string user_id, order_id;
    store::HoldDetails details;
    store::LevelLimits user_limits;
    bool reports_usage = false;
    store::LevelLimits totals;
    int64_t capacity_units = 0;
    store::LevelLimits purchases = {};  // a runtime rule's purchase caps
    std::string limit_class = {};       // PlaceHoldCommand::limit_class
  };
  // The error a PlaceHold answers for a `result` that placed nothing (counted in the rejected
  // holds); nullopt for kCreated and kAlreadyHeld.
  std::optional<absl::Status> Refusal(const Asked& asked, const store::PlaceHoldResult& result);
  void Reject(metrics::RejectReason reason);
  // The store's arguments for `command` (its strings moved out), or INVALID_ARGUMENT naming the
  // field: ids, ttl, scope, quantity (also above an applicable max_units), labels, scope_limits.
  absl::StatusOr<store::PlaceHoldArgs> ValidatedArgs(PlaceHoldCommand& command) const;
  // Validates ids, ends the hold with `outcome` and calls `done` with (the hold, now, whether it
  // had already ended that way, its payment reference) or the error for any other end, or for a
  // `payment_reference` (kPaid only, "" = none) other than the one a paid hold was paid with.
  struct Ended {
    Hold hold;
    absl::Time now;
    bool repeated = false;
    std::string payment_reference = {};
  };
  void End(std::string user_id, std::string order_id, store::HoldOutcome outcome,
           std::string payment_reference, store::CallOptions options, store::Callback<Ended> done);

  store::HoldStore& store_;
  const HoldPolicy policy_;
  metrics::Metrics& metrics_;
  mutable absl::Mutex rules_mu_;
  ScopeRules rules_ ABSL_GUARDED_BY(rules_mu_);
  // Whether rules_ limits any scope: read on every PlaceHold (ReportsUsage) without the lock.
  std::atomic<bool> has_scope_rules_{false};
  const TenantTable* tenants_ = nullptr;
};

// Counts `expired` holds ended as EXPIRED by a script's lazy cleanup
// (orderhold_holds_expired_total, and their events in orderhold_events_appended_total). Nothing for
// expired <= 0.
void CountLazyExpiries(metrics::Metrics& metrics, int expired);

}  // namespace orderhold::domain

#endif  // ORDERHOLD_SERVER_DOMAIN_HOLD_SERVICE_H_
