// HoldStore: where holds live, how they ended, and who reaps them. The interface the domain talks
// to; three implementations: RedisHoldStore (production, server/store/redis_hold_store.h),
// NoopHoldStore (--store=noop, the benchmarks' ceiling: server/store/noop_hold_store.h) and
// FakeHoldStore (tests, in tests/testing/). One contract suite (tests/contract/) runs the same
// cases against the fake and the Redis store (plain, TLS, Cluster).
//
// Every operation is asynchronous: it returns at once and calls `done` exactly once, possibly on
// another thread (a Redis I/O thread) or inline (the fake, or an immediate failure). This is what
// keeps Redis I/O off the gRPC callback threads. Callbacks must not block.
//
// Time. Each operation takes `CallOptions::now`: unset in production, the store then uses its own
// authoritative clock (Redis server TIME); tests may set it to decide expiry deterministically.
// Results carry the `now` that was used, so callers compute remaining time on the same clock.
// Precision is one millisecond. "Live" means expire_time > now.
//
// Errors (absl codes, mapped 1:1 to gRPC codes by the caller):
//   UNAVAILABLE        the backend is unreachable, failed, or is overloaded. Fail closed: an
//                      operation that reports an error did not grant anything the caller may rely
//                      on (a PlaceHold whose reply was lost may still have been recorded; a retry
//                      with the same order_id returns it, created = false).
//   DEADLINE_EXCEEDED  `CallOptions::deadline` passed before the request could be sent (a reply
//                      that arrives late is still delivered: it is the truth about what happened).
//
// Thread-safety: implementations are thread-safe.
#ifndef ORDERHOLD_SERVER_STORE_HOLD_STORE_H_
#define ORDERHOLD_SERVER_STORE_HOLD_STORE_H_

#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/common/fan_in.h"

namespace orderhold::store {

// Store operations answer through orderhold::Callback<T> (called exactly once), and blocking
// callers wait with orderhold::Await (server/common/fan_in.h):
//   auto r = Await<ListHoldsResult>([&](auto cb) { store.ListHolds("u", {}, std::move(cb)); });
// Await blocks: for background threads and tests only, never on a gRPC callback thread.
using ::orderhold::Await;
using ::orderhold::Callback;

struct CallOptions {
  // Give up (DEADLINE_EXCEEDED) after this instant, host clock.
  absl::Time deadline = absl::InfiniteFuture();
  // Tests only: the instant to decide expiry against. Unset: the store's own clock.
  std::optional<absl::Time> now;
};

// How a hold ended; the numbers are those of orderhold.v1.HoldOutcome and of the Lua scripts.
// kReturned is not an end: the outcome of an event about a PAID hold some of whose units were
// given back (HoldStore::ReturnUnits); outcome records never hold it.
enum class HoldOutcome { kPaid = 1, kCancelled = 2, kExpired = 3, kReturned = 4 };

// "PAID", "CANCELLED", "EXPIRED" or "RETURNED" (the proto enum names).
const char* HoldOutcomeName(HoldOutcome outcome);

// How long and how many outcome records are kept per user (--outcome_retention,
// --max_outcomes_per_user). Beyond either, an order is forgotten (unknown again).
// What is kept of the end of a hold: its outcome record, and its event.
struct OutcomePolicy {
  absl::Duration retention = absl::Hours(72);  // >= 1 ms
  int max_per_user = 1000;                     // >= 1; the oldest records are dropped first
  // --event_stream_max_len: each partition's event stream is trimmed to about this many entries
  // as events are appended (XADD MAXLEN ~: whole nodes of up to 100 entries, so a stream may hold
  // up to ~100 more); 0 = no length bound (the age bound alone: --event_retention).
  int64_t event_stream_max_len = 0;
  // --event_stream_max_bytes: each partition's event stream is trimmed, as events are appended, to
  // as many events as this many bytes hold at the appended event's size (an upper estimate of what
  // it costs Redis), so a stream of like events stays within it and any mix within twice it
  // (lua/prelude/48_events.lua); 0 = no byte bound. The lower of the two bounds applies.
  int64_t event_stream_max_bytes = 0;
  // --max_hold_lifetime and --default_ttl (> 0, whole milliseconds): the life record the layout
  // migration gives a hold of an older shape placed before life records existed, as it moves it
  // (its cap = its place time, from its details, else expire_time - default_ttl, + this lifetime).
  absl::Duration max_hold_lifetime = absl::Hours(2);
  absl::Duration default_ttl = absl::Minutes(30);
  // --layout_migration_done: the operator declares the layout migration over (server/README.md
  // "Upgrading": no user is left in an older shape and no replica of an earlier release runs), so
  // calls stop looking for a user's holds there (one EXISTS less on a user's first hold). Set too
  // early, holds still in an older shape are not counted until the sweep moves them.
  bool layout_migration_done = false;
};

// The remembered end of a hold.
struct HoldEnd {
  HoldOutcome outcome = HoldOutcome::kExpired;
  absl::Time end_time;     // payment/cancellation time; for kExpired the hold's expire_time
  absl::Time expire_time;  // the hold's expire_time
  // kPaid: the payment reference it was paid with (PayRequest.payment_reference, 1-128 bytes);
  // "" when paid without one, and for the other outcomes.
  std::string payment_reference = {};
  friend bool operator==(const HoldEnd&, const HoldEnd&) = default;
};

// The limits of one level (the user, or the user within one scope): 0 = no limit in that unit.
struct LevelLimits {
  int64_t max_holds = 0;  // live holds, >= 0
  int64_t max_units = 0;  // sum of the live holds' quantities, >= 0
  friend bool operator==(const LevelLimits&, const LevelLimits&) = default;
};

// A hold's labels, sorted by key (the caller validates them: see domain::ValidateLabels).
using Labels = std::map<std::string, std::string>;

// What a placement fixes about a hold besides its ids and expiry (immutable once placed), and
// what ExtendHold counts.
struct HoldDetails {
  std::string scope;     // "" = unscoped
  int64_t quantity = 1;  // units, >= 1
  Labels labels;
  LevelLimits scope_limits;  // the scope's limits the hold was placed under ({} when unscoped)
  // When it was placed, on the store's clock; set by the store on every live hold it returns
  // (unset in a request, and for an ended hold whose records are no longer kept).
  std::optional<absl::Time> place_time;
  // The latest expiry ExtendHold may give it: place_time + the lifetime cap in force when it was
  // placed (PlaceHoldArgs::max_lifetime). Set as place_time is.
  std::optional<absl::Time> max_expire_time;
  // ExtendHold calls that moved its expiry (a retried request_id counted once).
  int64_t extensions = 0;
  friend bool operator==(const HoldDetails&, const HoldDetails&) = default;
};

// One hold as stored: the user is implied by the call.
struct StoredHold {
  std::string order_id;
  absl::Time expire_time;  // millisecond precision
  HoldDetails details;
  friend bool operator==(const StoredHold&, const StoredHold&) = default;
};

struct PlaceHoldArgs {
  std::string user_id;
  std::string order_id;
  absl::Duration ttl;     // > 0, whole milliseconds
  int max_holds = 0;      // the user's live holds, at most; >= 1
  int64_t max_units = 0;  // the user's live units, at most; 0 = no limit
  HoldDetails details;    // scope, quantity, labels and, for a scope, its limits to check;
                          // place_time, max_expire_time and extensions are ignored (the store
                          // sets them)
  // The hold's lifetime cap (--max_hold_lifetime): max_expire_time = place time + this, fixed now.
  // > 0, whole milliseconds.
  absl::Duration max_lifetime = absl::Hours(2);
  // The scope's totals (the rule's total_max_holds and total_max_units): its live holds and units
  // across every user, at most; 0 = none. With details.scope only, and only on a store that keeps
  // a scope index (HoldStore::keeps_scope_index); ignored otherwise.
  LevelLimits totals = {};
  // The scope's capacity in units (the rule's capacity_units): its live holds' units plus the
  // units sold (every scoped hold paid adds its quantity, in the step that pays it), at most;
  // 0 = none. With details.scope only, on a store that counts sales (HoldStore::counts_sales);
  // ignored otherwise.
  int64_t capacity_units = 0;
  // The scope limits the request carried (PlaceHoldRequest.scope_limits), for a runtime rule of
  // the scope, which replaces the file's rule merged into details.scope_limits: with
  // `asked_replaces` they replace the rule's, else they are a ceiling on them (per field the
  // smaller non-zero). nullopt: the rule's as they are.
  std::optional<LevelLimits> asked_limits = std::nullopt;
  bool asked_replaces = false;
  // The limit class of the scope's runtime rule asked (PlaceHoldRequest.limit_class; "" = none):
  // the rule must have it and list one of `caller_identities` (typed: "uri:...", "dns:...",
  // "subject:...") among its principals, else kClassDenied and nothing written; its limits and
  // purchase caps then replace the rule's per-person ones. With details.scope only.
  std::string limit_class = {};
  std::vector<std::string> caller_identities = {};
};

// A scope's runtime rule (the OrderHold.PutScopeRule rpc): limits, totals, capacity and state
// of one exact scope, kept in the store and read by the step that places a hold, so every
// replica applies one version at once. It replaces the file's rule for that scope (the caller's
// precedence: domain/scope_limits.h).
enum class ScopeState { kOpen = 1, kPaused = 2, kClosed = 3 };  // the proto's numbers

// A named class of buyers of a runtime rule (ScopeRule.classes): its per-person limits and
// purchase caps replace the rule's for holds placed in the class by one of its principals.
struct LimitClassRecord {
  LevelLimits limits;                   // each user's live holds and units in the scope; 0 = none
  LevelLimits purchases;                // live plus bought holds (max_holds) and units; 0 = none
  std::vector<std::string> principals;  // typed identities that may use the class
  friend bool operator==(const LimitClassRecord&, const LimitClassRecord&) = default;
};

struct ScopeRuleRecord {
  std::string scope;           // the exact scope (stored form), 1-128 bytes (+ its tenant)
  LevelLimits limits;          // each user's live holds and units in the scope; 0 = none
  LevelLimits totals;          // the scope's live holds and units across users; 0 = none
  int64_t capacity_units = 0;  // live units + units sold, at most; 0 = none
  // Each user's live holds in the scope plus the holds it paid for there under this rule
  // (max_holds), and their units (max_units), at most; 0 = none. Purchases count from the rule's
  // creation (its edits keep them) until it is deleted or expires.
  LevelLimits purchases = {};
  ScopeState state = ScopeState::kOpen;
  std::optional<absl::Time> open_time;    // not open before (whole ms); unset: none
  std::optional<absl::Time> close_time;   // closed from (whole ms); unset: none
  std::optional<absl::Time> expire_time;  // the rule is deleted then (whole ms); unset: never
  std::map<std::string, LimitClassRecord> classes = {};  // by name; empty: none
  // The rule's version as the store gave it (AIP-154): never reused for the scope. In a write,
  // the version the rule must have ("" = any, also none).
  std::string etag = {};
  friend bool operator==(const ScopeRuleRecord&, const ScopeRuleRecord&) = default;
};

// A scope's state at `now` under `rule` (what place_hold.lua decides): kClosed when CLOSED or at
// or after close_time; kPaused before open_time (whatever the state), and when PAUSED without an
// open_time; else kOpen (a PAUSED rule opens at its open_time).
ScopeState EffectiveState(const ScopeRuleRecord& rule, absl::Time now);

struct ScopeRuleResult {
  absl::Time now;                       // the store's clock when the operation ran
  std::optional<ScopeRuleRecord> rule;  // the rule after the call; nullopt: none (Get, Delete)
};

// Where a page of ListScopeRules starts: after `scope` of `partition` (partitions in order, each's
// scopes in byte order).
struct ScopeRuleCursor {
  int partition = 0;
  std::string scope = {};  // "" = at the partition's first
};

struct ListScopeRulesResult {
  absl::Time now;
  std::vector<ScopeRuleRecord> rules;   // the page (expired rules left out)
  std::optional<ScopeRuleCursor> next;  // where the next page starts; nullopt: the last page
};

// What a runtime rule made of a PlaceHold (PlaceHoldResult::rule): its etag and the limits
// applied (the per-user ones after the request's own).
struct AppliedScopeRule {
  std::string etag;
  LevelLimits limits;
  LevelLimits totals;
  int64_t capacity_units = 0;
  LevelLimits purchases = {};
  friend bool operator==(const AppliedScopeRule&, const AppliedScopeRule&) = default;
};

// Levels a PlaceHold would exceed (PlaceHoldResult::violations), as bits.
enum LimitViolation : int {
  kUserHoldLimit = 1,
  kUserUnitLimit = 2,
  kScopeHoldLimit = 4,
  kScopeUnitLimit = 8,
  kScopeTotalHoldLimit = 16,  // the scope's live holds across users (PlaceHoldArgs::totals)
  kScopeTotalUnitLimit = 32,  // their units
  kScopeCapacity = 64,        // their units plus the units sold (PlaceHoldArgs::capacity_units)
  kUserPurchasedHolds = 128,  // the user's live holds in the scope plus the holds it bought there
                              // (a runtime rule's purchases.max_holds)
  kUserPurchasedUnits = 256,  // their units (purchases.max_units)
};

struct PlaceHoldResult {
  enum class Outcome {
    kCreated,       // the hold was recorded; expire_time = now + ttl
    kAlreadyHeld,   // order_id already had a live hold; expire_time is that hold's (not extended)
    kLimitReached,  // a level would be exceeded (`violations`); nothing recorded; expire_time
                    // is the earliest instant at which every exceeded level has had its earliest
                    // live hold expire (the earliest a retry can pass)
    kEnded,         // the order's hold already ended (see `ended`); nothing recorded
    // The scope's runtime rule (`rule`) refused it; nothing recorded:
    kScopeClosed,   // the rule is CLOSED, or at or after its close_time
    kScopeNotOpen,  // PAUSED, or before its open_time; expire_time = open_time (the epoch when
                    // none is set)
    kNeverFits,     // the quantity is above a unit limit of the rule (`violations`: those
                    // levels' bits): no retry can pass
    kClassDenied,   // the limit class asked (PlaceHoldArgs::limit_class) is not the caller's:
                    // the scope has no runtime rule, the rule no such class, or the class does
                    // not list the caller; nothing at all written
  };
  Outcome outcome = Outcome::kCreated;
  absl::Time now;           // the store's clock when the operation ran
  absl::Time expire_time;   // see Outcome
  int active_holds = 0;     // live holds after the operation
  int expired_removed = 0;  // holds found no longer live and ended as EXPIRED on the way
  HoldEnd ended;            // kEnded only: how and when the order's hold ended
  // Usage after the operation (before it, when nothing was recorded), summed over live holds:
  // the user's units, and the holds and units of args.details.scope (0 when unscoped).
  int64_t user_units = 0;
  int scope_holds = 0;
  int64_t scope_units = 0;
  // The scope's live holds and units across every user (after the operation, or before it when
  // nothing was recorded), when args.totals set a total and a new hold was decided (kCreated,
  // kLimitReached), or when its capacity refused it (kScopeCapacity among the violations). Under
  // a capacity alone a store may also count them otherwise (the Redis store counts the entries
  // only when its units counter says the hold may not fit); else 0.
  int64_t total_holds = 0;
  int64_t total_units = 0;
  // The scope's units sold, when args.capacity_units is set and a new hold was decided; else 0.
  int64_t sold_units = 0;
  // The units and holds the user bought in the scope under its runtime rule, when the rule caps
  // purchases and a new hold was decided; else 0.
  int64_t purchased_units = 0;
  int64_t purchased_holds = 0;
  int violations = 0;  // kLimitReached: the LimitViolation bits of every exceeded level
  // When the scope has a runtime rule (read in the step): what it applies, in place of the args'
  // scope limits, totals and capacity.
  std::optional<AppliedScopeRule> rule = std::nullopt;
  // kCreated: the details as placed (place_time = now); kAlreadyHeld: the existing hold's, to
  // compare with the request's (an idempotent retry must carry the same).
  HoldDetails details;
};

struct EndHoldResult {
  enum class Result {
    kEnded,         // this call ended the live hold with the requested outcome (`end`)
    kAlreadyEnded,  // the hold had already ended (`end` says how); nothing changed
    kUnknown,       // no such order (never placed, or forgotten after the outcome retention)
  };
  Result result = Result::kUnknown;
  absl::Time now;           // the store's clock when the operation ran
  HoldEnd end;              // kEnded, kAlreadyEnded
  HoldDetails details;      // kEnded, kAlreadyEnded: the hold's, while its outcome is remembered
  int expired_removed = 0;  // the user's holds found no longer live and ended as EXPIRED (lazy
                            // cleanup; may include this order, then result = kAlreadyEnded)
};

// A return of some units of a PAID hold (ReturnUnits: a refund).
struct ReturnUnitsArgs {
  std::string user_id;
  std::string order_id;
  int64_t units = 1;       // >= 1
  std::string request_id;  // 1-128 bytes, no control characters: a retry answers the same
};

// How many returns one paid hold may have at most (return_units.lua's MAX_RETURNS).
inline constexpr int kMaxReturnsPerHold = 100;

// A user's purchase-cap level in a scope with a runtime rule: live holds plus purchases.
struct PurchaseUsage {
  int64_t holds = 0;  // live holds in the scope plus holds bought there (under the rule)
  int64_t units = 0;  // their units
  LevelLimits caps;   // max_purchased_holds, max_purchased_units (0 = none)
};

struct ReturnUnitsResult {
  enum class Result {
    kReturned,         // this call gave `units` back (sold count, purchases) with one event
    kAlreadyReturned,  // a return with this request_id was made: `units` are its; nothing changed
    kLive,             // the hold is live: not paid; nothing changed
    kNotPaid,          // the hold ended otherwise (`end`); nothing changed
    kExceedsQuantity,  // more units than the hold has left (quantity - total_returned)
    kTooManyReturns,   // the hold has kMaxReturnsPerHold returns already
    kUnknown,          // no such order (never placed, or forgotten after the outcome retention)
  };
  Result result = Result::kUnknown;
  absl::Time now;              // the store's clock when the operation ran
  HoldEnd end;                 // all but kLive, kUnknown: how the hold ended (kPaid but kNotPaid)
  int64_t quantity = 0;        // the hold's units (all but kLive, kNotPaid, kUnknown)
  int64_t units = 0;           // kReturned, kAlreadyReturned: the units of this request_id
  int64_t total_returned = 0;  // the hold's units returned in all, this request included
  HoldDetails details;         // kReturned, kAlreadyReturned: the hold's, while remembered
  // kReturned, kAlreadyReturned, when the hold's scope has a runtime rule: the user's purchase-cap
  // level there after the call (live holds plus purchases; max_* = the rule's caps, 0 = none).
  std::optional<PurchaseUsage> purchase_usage;
};

// A position in a user's list of live holds (earliest expire_time first, ties by order_id): a
// page starts after it.
struct ListCursor {
  absl::Time expire_time;  // whole milliseconds
  std::string order_id;
};

struct ListHoldsArgs {
  std::string user_id;
  std::string scope;                // only the holds of this scope are listed; "" = all
  std::optional<ListCursor> after;  // the page starts after this hold; nullopt: at the first
  int page_size = std::numeric_limits<int>::max();  // holds listed at most, >= 1
};

struct ListHoldsResult {
  absl::Time now;                 // the store's clock when the operation ran
  std::vector<StoredHold> holds;  // the page: live holds of the scope with their details, earliest
                                  // expire_time first, ties by order_id
  int64_t user_holds = 0;         // every live hold of the user, whatever the scope or the page
  int64_t user_units = 0;         // their quantities
  int64_t scope_holds = 0;        // of them, those of args.scope (0 without one)
  int64_t scope_units = 0;
  bool plain = true;  // no live hold of the user has details (scope, quantity, labels)
  bool more = false;  // holds of the scope follow the page
  // args.scope's runtime rule, read in the same step, when it has one (stores that keep runtime
  // rules; nullopt otherwise): the limits a PlaceHold of the scope meets.
  std::optional<ScopeRuleRecord> rule = std::nullopt;
};

// One live hold of a scope, as the scope index knows it (ListScopeHolds).
struct ScopeHold {
  std::string user_id;
  std::string order_id;
  absl::Time expire_time;  // whole milliseconds
  int64_t quantity = 1;
  friend bool operator==(const ScopeHold&, const ScopeHold&) = default;
};

struct ListScopeHoldsArgs {
  std::string scope;  // required, non-empty
  // The page starts after this entry: its expire_time and its index key (order_id = the entry's
  // opaque key, ListScopeHoldsResult::last_key); nullopt: at the first.
  std::optional<ListCursor> after;
  int page_size = 0;  // entries listed at most, >= 0; 0 = the usage only
};

struct ListScopeHoldsResult {
  absl::Time now;                               // the store's clock when the operation ran
  std::vector<ScopeHold> holds;                 // the page: earliest expire_time first
  int64_t scope_holds = 0;                      // every live hold of the scope, across users
  int64_t scope_units = 0;                      // their quantities
  std::optional<absl::Time> first_expire_time;  // the earliest of them; nullopt when none
  int64_t sold_units = 0;  // the units of the scope's paid holds (a store counting sales)
  bool more = false;       // live holds follow the page
  std::string last_key;    // the last listed entry's key, for the next page's cursor
  // The scope's runtime rule read in the same step (a store that keeps rules); nullopt: none.
  std::optional<ScopeRuleRecord> rule = std::nullopt;
};

struct ExtendHoldArgs {
  std::string user_id;
  std::string order_id;
  absl::Duration ttl;      // > 0, whole milliseconds: the wanted time left from now
  int max_extensions = 0;  // calls that moved the expiry, at most; 0 = no count limit
  std::string request_id;  // "" = none; else counted at most once per hold
};

struct ExtendHoldResult {
  enum class Result {
    kLive,       // the hold is live: `hold` after the call (`extended`, `capped` say what happened)
    kExhausted,  // the move needed one more extension than max_extensions: nothing changed
    kEnded,      // the order's hold has ended (`end`; EXPIRED possibly by this call's cleanup)
    kUnknown,    // no such order (never placed, or forgotten after the outcome retention)
  };
  Result result = Result::kUnknown;
  absl::Time now;  // the store's clock when the operation ran
  // kLive, kExhausted: the hold (expire_time = max(old, min(now + ttl, max_expire_time)) for
  // kLive), with its details, max_expire_time and extensions.
  StoredHold hold;
  bool extended = false;    // kLive: this call moved the expiry, or the call it replays did
  bool replayed = false;    // kLive: a replay of a counted request_id; nothing changed now
  bool capped = false;      // kLive, kExhausted: now + ttl was past max_expire_time
  HoldEnd end;              // kEnded
  int expired_removed = 0;  // the user's holds found no longer live and ended as EXPIRED
};

struct GetHoldResult {
  enum class State {
    kLive,     // `hold` is live
    kEnded,    // `hold` ended as `end` says (a hold past its expiry: EXPIRED at it, reaped or not)
    kUnknown,  // no such order (never placed, or forgotten after the outcome retention)
  };
  State state = State::kUnknown;
  absl::Time now;   // the store's clock when the operation ran
  StoredHold hold;  // kLive, kEnded (its details while they are kept)
  HoldEnd end;      // kEnded
};

struct ReleaseHoldsResult {
  absl::Time now;                    // the store's clock when the operation ran
  std::vector<StoredHold> released;  // ended as CANCELLED at now, earliest expire_time first
  int expired_removed = 0;           // holds found no longer live and ended as EXPIRED instead
};

class HoldStore {
 public:
  virtual ~HoldStore() = default;

  // Atomically: end the user's holds that are no longer live (EXPIRED), then create, return the
  // existing live hold for args.order_id, report that it already ended, or refuse (see
  // PlaceHoldResult::Outcome). Every level is checked against the user's live holds before
  // anything is written, all or nothing: the user's holds (+1 <= max_holds) and units
  // (+quantity <= max_units when > 0), and, for a scope, the scope's holds and units against
  // args.details.scope_limits (each when > 0), and the scope's live holds and units across every
  // user against args.totals (each when > 0; on a store that keeps a scope index).
  virtual void PlaceHold(PlaceHoldArgs args, CallOptions options,
                         Callback<PlaceHoldResult> done) = 0;

  // Atomically ends the live hold (user_id, order_id) with `outcome` (kPaid or kCancelled): it is
  // removed, its outcome remembered and its event appended. Holds of the user that are no longer
  // live are ended as EXPIRED first, so an expired hold is never paid nor cancelled, and the
  // answer does not depend on whether the reaper has run. `payment_reference` (kPaid only; "" =
  // none; the caller validates it) is kept with the outcome and put in the event; an order
  // already paid answers kAlreadyEnded with the reference it was paid with
  // (EndHoldResult::end.payment_reference), which the caller compares.
  virtual void EndHold(std::string user_id, std::string order_id, HoldOutcome outcome,
                       std::string payment_reference, CallOptions options,
                       Callback<EndHoldResult> done) = 0;
  // Without a payment reference (CancelHold; a Pay that sends none).
  void EndHold(std::string user_id, std::string order_id, HoldOutcome outcome, CallOptions options,
               Callback<EndHoldResult> done) {
    EndHold(std::move(user_id), std::move(order_id), outcome, std::string(), options,
            std::move(done));
  }

  // Atomically gives back args.units of the PAID hold (args.user_id, args.order_id): to its
  // scope's sold count and to the user's purchases under the scope's runtime rule (the one it was
  // paid under only), recorded with the outcome under args.request_id, with one RETURNED event;
  // never more than the hold's quantity in all. A store without a scope index (Redis Cluster)
  // keeps no sold counts nor purchases: it records the return and appends its event. See
  // ReturnUnitsResult for what else it answers; nothing changes then.
  virtual void ReturnUnits(ReturnUnitsArgs args, CallOptions options,
                           Callback<ReturnUnitsResult> done);

  // One page of the user's live holds (of args.scope only, when set), after args.after, with the
  // usage of the user's and the scope's levels over all of them. Read-only.
  virtual void ListHolds(ListHoldsArgs args, CallOptions options,
                         Callback<ListHoldsResult> done) = 0;
  // Every live hold of the user, in one page.
  void ListHolds(std::string user_id, CallOptions options, Callback<ListHoldsResult> done) {
    ListHoldsArgs args;
    args.user_id = std::move(user_id);
    ListHolds(std::move(args), options, std::move(done));
  }

  // Atomically moves the live hold (args.user_id, args.order_id) to expire at
  // max(expire_time, min(now + ttl, max_expire_time)), counting the call in its extensions when it
  // moved it (once per request_id), or refuses when that would pass args.max_extensions. A hold
  // no longer live is ended as EXPIRED first (as EndHold does), never extended. Limits are not
  // checked and no event is appended for an extension. See ExtendHoldResult.
  virtual void ExtendHold(ExtendHoldArgs args, CallOptions options,
                          Callback<ExtendHoldResult> done) = 0;

  // The hold of (user_id, order_id), live or ended, as of now. Read-only: a hold past its expiry
  // that nothing has ended yet reads as EXPIRED at its expire_time.
  virtual void GetHold(std::string user_id, std::string order_id, CallOptions options,
                       Callback<GetHoldResult> done) = 0;

  // Atomically ends every live hold of the user (of `scope` only, when not "") as CANCELLED, with
  // one event each; holds found no longer live are ended as EXPIRED, not listed.
  virtual void ReleaseHolds(std::string user_id, std::string scope, CallOptions options,
                            Callback<ReleaseHoldsResult> done) = 0;

  // Whether the store keeps a scope index: every live hold with a scope, across users, so that
  // PlaceHoldArgs::totals are checked in the same atomic step as the user's levels and
  // ListScopeHolds answers. False for a Redis Cluster (a scope's slot is not its users').
  virtual bool keeps_scope_index() const = 0;
  // Whether the store counts a scope's units sold (every scoped hold paid, in the step that pays
  // it), so that PlaceHoldArgs::capacity_units is checked: a store with a scope index in the
  // users' own Redis (not a Redis Cluster, whose scope slot is not its users').
  virtual bool counts_sales() const { return keeps_scope_index(); }

  // The usage of args.scope across every user (its live holds and units) and one page of its live
  // holds, earliest expire_time first (ties in an order of the store's), after args.after.
  // Read-only. FAILED_PRECONDITION when the store keeps no scope index.
  virtual void ListScopeHolds(ListScopeHoldsArgs args, CallOptions options,
                              Callback<ListScopeHoldsResult> done) = 0;

  // Runtime scope rules (ScopeRuleRecord). Whether the store keeps them: where a scope's rule can
  // be read in the step that places its holds (a store with a scope index in its users' own
  // Redis; not a Redis Cluster). Without them every call below is FAILED_PRECONDITION.
  virtual bool keeps_scope_rules() const { return false; }
  // Writes `rule` (validated by the caller) when rule.etag is "" or the rule's current etag;
  // yields it with its new etag. ABORTED when the etag is another (or the scope has no rule),
  // INVALID_ARGUMENT naming rule.expire_time when it is not after the store's now; nothing
  // changes then.
  virtual void PutScopeRule(ScopeRuleRecord rule, CallOptions options,
                            Callback<ScopeRuleResult> done);
  // The scope's rule; ScopeRuleResult::rule nullopt when it has none (or it expired).
  virtual void GetScopeRule(std::string scope, CallOptions options, Callback<ScopeRuleResult> done);
  // Removes the scope's rule when `etag` is "" or its etag; rule = nullopt. NOT_FOUND when it has
  // none, ABORTED for another etag.
  virtual void DeleteScopeRule(std::string scope, std::string etag, CallOptions options,
                               Callback<ScopeRuleResult> done);
  // Sets the scope's rule CLOSED (a new etag), creating one with no limits of its own when it has
  // none; yields it.
  virtual void CloseScopeRule(std::string scope, CallOptions options,
                              Callback<ScopeRuleResult> done);
  // Up to `page_size` (>= 1) rules from `from` on; fewer when some expired on the way.
  virtual void ListScopeRules(ScopeRuleCursor from, int page_size, CallOptions options,
                              Callback<ListScopeRulesResult> done);

  // Checks the backend answers; yields the store's clock (Redis TIME). UNAVAILABLE or
  // DEADLINE_EXCEEDED when it does not.
  virtual void Ping(CallOptions options, Callback<absl::Time> done) = 0;
};

}  // namespace orderhold::store

#endif  // ORDERHOLD_SERVER_STORE_HOLD_STORE_H_
