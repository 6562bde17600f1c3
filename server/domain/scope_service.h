// ScopeService: a scope across every user, for the operators of an event: GetScopeUsage,
// ListScopeHolds and ReleaseScopeHolds, over the store's scope index (store::HoldStore::
// ListScopeHolds; kept on standalone and Sentinel, not on Redis Cluster: FAILED_PRECONDITION
// there). The totals it reports are the scope rules' (HoldService::ResolvedFor), so it answers
// with the rules a PlaceHold of the scope is checked against now.
//
// Errors: INVALID_ARGUMENT naming scope (required), page_size or page_token (page_token.h);
// FAILED_PRECONDITION without a scope index; UNAVAILABLE, DEADLINE_EXCEEDED, INTERNAL from the
// store. Thread-safe (no mutable state of its own). Callbacks run on the store's threads or
// inline.
#ifndef ORDERHOLD_SERVER_DOMAIN_SCOPE_SERVICE_H_
#define ORDERHOLD_SERVER_DOMAIN_SCOPE_SERVICE_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "server/domain/hold.h"
#include "server/domain/hold_service.h"
#include "server/metrics/metrics.h"
#include "server/store/hold_store.h"

namespace orderhold::domain {

// A scope across every user (GetScopeUsage, ListScopeHolds).
struct ScopeUsageReply {
  absl::Time now;  // store clock at the call
  // The scope's live holds and units, and its totals (limits; 0 = none in that unit).
  LevelUsage usage;
  std::optional<absl::Time> first_expire_time;  // its earliest live hold's expiry; unset: none
  int64_t sold_units = 0;      // units of its paid holds (a store counting sales; else 0)
  int64_t capacity_units = 0;  // the rule's capacity_units; 0 = none
  // capacity_units - (usage.units + sold_units), at least 0, when it has a capacity; else 0.
  int64_t available_units = 0;
};

struct ListScopeHoldsReply {
  ScopeUsageReply usage;
  // The page: live holds of the scope across users, earliest expire_time first; each with its
  // user_id, order_id, expire_time, scope and quantity (the index keeps no labels: GetHold has
  // them).
  std::vector<Hold> holds;
  std::string next_page_token;  // empty on the last page
};

struct ReleaseScopeHoldsReply {
  // Ended CANCELLED by this call, earliest expire_time first: the first kDefaultPageSize of them.
  std::vector<Hold> holds;
  absl::Time now;        // store clock at the call's last step
  int64_t released = 0;  // how many this call ended CANCELLED (all of them)
};

// ReleaseScopeHolds ends holds a page at a time (kDefaultPageSize EndHold calls at once), and at
// most this many pages: a scope that keeps filling as fast as it is released still gets an answer.
inline constexpr int kMaxReleasePages = 10000;

class ScopeService {
 public:
  // `store`, `holds` (the scope rules) and `metrics` must outlive this object.
  ScopeService(store::HoldStore& store, const HoldService& holds, metrics::Metrics& metrics);

  // The store it reads (for the scope rules beside it: scope_rule_service.h).
  store::HoldStore& store() const { return store_; }

  // See the OrderHold.GetScopeUsage rpc: the scope's live holds and units across every user, with
  // the totals in force. INVALID_ARGUMENT naming scope (required); FAILED_PRECONDITION when the
  // store keeps no scope index (Redis Cluster).
  void GetScopeUsage(std::string scope, store::CallOptions options,
                     store::Callback<ScopeUsageReply> done);

  // See the OrderHold.ListScopeHolds rpc: one page of the scope's live holds across users, with its
  // usage. Errors as GetScopeUsage, and INVALID_ARGUMENT naming page_size or page_token.
  void ListScopeHolds(std::string scope, ListPage page, store::CallOptions options,
                      store::Callback<ListScopeHoldsReply> done);

  // See the OrderHold.ReleaseScopeHolds rpc: ends every live hold of the scope as CANCELLED, one
  // EndHold (one script, one event) each, a page of kDefaultPageSize at a time, until a page comes
  // back empty or kMaxReleasePages pages were ended. Holds placed while it runs may be ended too
  // or stay. Counts orderhold_holds_cancelled_total. Errors as GetScopeUsage; a store error
  // part-way answers that error (what was ended stays ended: call it again).
  void ReleaseScopeHolds(std::string scope, store::CallOptions options,
                         store::Callback<ReleaseScopeHoldsReply> done);

 private:
  // ListScopeHolds, or with `usage_only` GetScopeUsage's one store call (page size 0).
  void ListScope(std::string scope, ListPage page, bool usage_only, store::CallOptions options,
                 store::Callback<ListScopeHoldsReply> done);
  // A ListScope answer from the store's page and the rule in force (a runtime one, else the
  // file's).
  static ListScopeHoldsReply ReplyOf(const std::string& scope, store::ListScopeHoldsResult result,
                                     const ScopeRules::Resolved& rule);
  // One page of a ReleaseScopeHolds: lists the scope's first live holds, ends them, and goes on
  // with the next page, or answers.
  struct ScopeRelease;
  void ReleaseScopePage(std::shared_ptr<ScopeRelease> release);

  store::HoldStore& store_;
  const HoldService& holds_;
  metrics::Metrics& metrics_;
};

}  // namespace orderhold::domain

#endif  // ORDERHOLD_SERVER_DOMAIN_SCOPE_SERVICE_H_
