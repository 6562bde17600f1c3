// orderhold-redis-cost: runs one kind of store operation many times through the production store
// (RedisHoldStore: the real scripts, pipelined by RedisClient as the server sends them), so that
// tests/bench/redis_cost.sh can read what each operation costs Redis from INFO commandstats and
// INFO cpu deltas around the run. Not a test and not for production use.
//
// Users are `<user_prefix><perm(i)>` for i in [first, first + calls), where perm is a bijection of
// [0, users) (i * 1000003 mod users): a run of `users` calls touches each user once, in an order
// spread over every partition and bucket, and a second run with the same flags touches the same
// users in the same order (its retries find what the first run left).
//
// --op (each a closed loop with --in_flight calls outstanding):
//   place          PlaceHold order "o1", plain (no scope, quantity 1), max_holds 3, --ttl
//   place_random   the same for users drawn uniformly at random (with repeats) from [0, users),
//                  as redis-benchmark -r draws the minimal design's keys: on an empty store,
//                  users x (1 - 1/e) creations and the rest retries when calls = users
//   place_refused  PlaceHold order "o2" with max_holds 1: refused when the user holds o1
//   place_scoped   PlaceHold order "o1" in scope "event-1", quantity 2, scope limits 2 holds and
//                  8 units, max_units 12 (every level checked)
//   place_ruled    the same in scope "event-2", whose runtime rule (PutScopeRule, once before the
//                  loop) sets those scope limits and a capacity of --rule_capacity units (which
//                  never binds at its default), and with --rule_purchased_units a purchase cap
//                  (0: none); built only where the store has runtime rules (ORDERHOLD_COST_RULES:
//                  a release before them builds this driver without it)
//   get            GetHold o1;  list: ListHolds;  extend: ExtendHold o1 to 2 x --ttl from now
//   pay, cancel    EndHold o1 as PAID / CANCELLED
//   expired_setup  PlaceHold "o1" with "now" in the past, so that each hold is due at once
//   reap           store Reap calls (4 users per call, no lease) over every partition until none
//                  has anything due: ends the expired_setup holds
//
// Prints one line: "<op> calls=<n> <outcome>=<count> ... seconds=<s>" (reap: calls are script
// calls, reaped= the holds ended). Exit 1 on any store error; 2 on bad flags.
#include <atomic>
#include <cstdio>
#include <map>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "server/redis/redis_topology.h"
#include "server/redis/redis_url.h"
#include "server/redis_store.h"
#include "server/store/redis_hold_store.h"

ABSL_FLAG(std::string, redis_url, "redis://127.0.0.1:6379", "Redis (standalone).");
ABSL_FLAG(std::string, key_prefix, "orderhold", "Key prefix (as the server's --key_prefix).");
ABSL_FLAG(std::string, op, "place", "Operation (see the file comment).");
ABSL_FLAG(int64_t, users, 100000, "Users the permutation covers.");
ABSL_FLAG(int64_t, first, 0, "First index in the permutation.");
ABSL_FLAG(int64_t, calls, 100000, "Calls to make (reap: ignored).");
ABSL_FLAG(std::string, user_prefix, "u", "User id prefix.");
ABSL_FLAG(absl::Duration, ttl, absl::Hours(1), "Hold ttl.");
ABSL_FLAG(int, in_flight, 32, "Calls outstanding at once.");
ABSL_FLAG(int, connections, 4, "Redis connections.");
#ifdef ORDERHOLD_COST_RULES
ABSL_FLAG(int64_t, rule_capacity, 1000000000, "place_ruled: the runtime rule's capacity_units.");
ABSL_FLAG(int64_t, rule_purchased_units, 0,
          "place_ruled: the runtime rule's max_purchased_units (0: none).");
#endif
ABSL_FLAG(bool, layout_migration_done, false,
          "The store as a server with --layout_migration_done runs it (no look for older shapes).");
ABSL_FLAG(
    absl::Duration, inline_wait, absl::ZeroDuration(),
    "The store client's inline_wait (the server's --redis_inline_wait; 0: every round trip on "
    "the client's I/O threads, so calls pipeline and Redis stays busy as under "
    "redis-benchmark).");

namespace orderhold::store {
namespace {

// Counts outcomes by name and bounds the calls outstanding.
class Loop {
 public:
  explicit Loop(int window) : window_(window) {}
  void Acquire() {
    absl::MutexLock lock(&mu_);
    auto room = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return outstanding_ < window_; };
    mu_.Await(absl::Condition(&room));
    ++outstanding_;
  }
  void Release(const std::string& outcome, const absl::Status& status = absl::OkStatus()) {
    absl::MutexLock lock(&mu_);
    --outstanding_;
    ++outcomes_[status.ok() ? outcome : "error"];
    if (!status.ok() && errors_logged_++ < 5) {
      std::fprintf(stderr, "%s\n", status.ToString().c_str());
    }
  }
  std::map<std::string, int64_t> Drain() {
    absl::MutexLock lock(&mu_);
    auto drained = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return outstanding_ == 0; };
    mu_.Await(absl::Condition(&drained));
    return outcomes_;
  }

 private:
  const int window_;
  absl::Mutex mu_;
  int outstanding_ ABSL_GUARDED_BY(mu_) = 0;
  int errors_logged_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, int64_t> outcomes_ ABSL_GUARDED_BY(mu_);
};

const char* PlaceOutcomeName(PlaceHoldResult::Outcome outcome) {
  switch (outcome) {
    case PlaceHoldResult::Outcome::kCreated:
      return "created";
    case PlaceHoldResult::Outcome::kAlreadyHeld:
      return "held";
    case PlaceHoldResult::Outcome::kLimitReached:
      return "refused";
    default:
      return "ended";
  }
}

CallOptions Deadline() {
  CallOptions call;
  call.deadline = absl::Now() + absl::Seconds(30);
  return call;
}

// Reaps every partition until no call ends anything more. Returns calls made and holds reaped.
std::map<std::string, int64_t> ReapAll(PartitionStore& store) {
  std::map<std::string, int64_t> totals;
  bool any = true;
  while (any) {
    any = false;
    absl::Mutex mu;
    int outstanding = store.partition_count();
    for (int partition = 0; partition < store.partition_count(); ++partition) {
      store.Reap(partition, ReapArgs{.max_users = 4, .owner = "", .standby_after = std::nullopt},
                 Deadline(), [&](absl::StatusOr<ReapResult> result) {
                   absl::MutexLock lock(&mu);
                   --outstanding;
                   ++totals["calls"];
                   if (!result.ok()) {
                     ++totals["error"];
                     return;
                   }
                   totals["reaped"] += static_cast<int64_t>(result->reaped_expire_times.size());
                   if (result->more || !result->reaped_expire_times.empty()) any = true;
                 });
    }
    absl::MutexLock lock(&mu);
    auto done = [&] { return outstanding == 0; };
    mu.Await(absl::Condition(&done, &decltype(done)::operator()));
  }
  return totals;
}

// The production store on --redis_url, as the flags say (--connections, --inline_wait,
// --key_prefix, --layout_migration_done); the URL's or the connection's error.
absl::StatusOr<std::unique_ptr<RedisHoldStore>> ConnectFromFlags() {
  auto endpoint = redis::ParseRedisUrl(absl::GetFlag(FLAGS_redis_url));
  if (!endpoint.ok()) return endpoint.status();
  RedisStoreOptions options;
  options.client.node.user = endpoint->user;
  options.client.node.password = endpoint->password;
  options.client.db = endpoint->db;
  options.client.topology = std::make_shared<redis::StandaloneTopology>(endpoint->hosts.front());
  options.client.connections = absl::GetFlag(FLAGS_connections);
  options.client.inline_wait = absl::GetFlag(FLAGS_inline_wait);
  options.client.command_timeout = absl::Seconds(10);
  options.client.node.connect_timeout = absl::Seconds(2);
  options.key_prefix = absl::GetFlag(FLAGS_key_prefix);
  options.outcomes.layout_migration_done = absl::GetFlag(FLAGS_layout_migration_done);
  return ConnectRedisStore(std::move(options));
}

// place_ruled's runtime rule for "event-2" (see the file comment); false after printing why not.
bool PutCostRule(HoldStore& store) {
#ifdef ORDERHOLD_COST_RULES
  ScopeRuleRecord rule;
  rule.scope = "event-2";
  rule.limits = LevelLimits{2, 8};
  rule.capacity_units = absl::GetFlag(FLAGS_rule_capacity);
  rule.purchases = LevelLimits{0, absl::GetFlag(FLAGS_rule_purchased_units)};
  auto put = Await<ScopeRuleResult>(
      [&](auto done) { store.PutScopeRule(rule, Deadline(), std::move(done)); });
  if (put.ok()) return true;
  std::fprintf(stderr, "PutScopeRule: %s\n", put.status().ToString().c_str());
#else
  (void)store;
  std::fprintf(stderr, "place_ruled: this driver was built without runtime rules\n");
#endif
  return false;
}

// Whether the counts are usable; prints what they need when not.
bool FlagsValid(int64_t users, int64_t calls, int64_t first, absl::Duration ttl) {
  if (users >= 1 && calls >= 0 && first >= 0 && ttl > absl::ZeroDuration() &&
      absl::GetFlag(FLAGS_in_flight) >= 1) {
    return true;
  }
  std::fprintf(stderr, "need users >= 1, calls >= 0, first >= 0, ttl > 0, in_flight >= 1\n");
  return false;
}

// Prints the run's line: "<op> calls=<n> <outcome>=<count> ... seconds=<s>".
void PrintOutcomes(const std::string& op, int64_t calls, std::map<std::string, int64_t> outcomes,
                   absl::Time start) {
  std::string line = absl::StrCat(op, " calls=", op == "reap" ? outcomes["calls"] : calls);
  for (const auto& [name, count] : outcomes) {
    if (name != "calls") absl::StrAppend(&line, " ", name, "=", count);
  }
  std::printf("%s seconds=%.2f\n", line.c_str(), absl::ToDoubleSeconds(absl::Now() - start));
}

int Run() {
  const std::string op = absl::GetFlag(FLAGS_op);
  const int64_t users = absl::GetFlag(FLAGS_users);
  const int64_t first = absl::GetFlag(FLAGS_first);
  const int64_t calls = absl::GetFlag(FLAGS_calls);
  const absl::Duration ttl = absl::GetFlag(FLAGS_ttl);
  if (!FlagsValid(users, calls, first, ttl)) return 2;
  auto connected = ConnectFromFlags();
  if (!connected.ok()) {
    std::fprintf(stderr, "%s\n", connected.status().ToString().c_str());
    return 2;
  }
  HoldStore& store = **connected;

  if (op == "place_ruled" && !PutCostRule(store)) return 1;
  const absl::Time start = absl::Now();
  std::map<std::string, int64_t> outcomes;
  if (op == "reap") {
    outcomes = ReapAll(**connected);
  } else {
    Loop loop(absl::GetFlag(FLAGS_in_flight));
    absl::BitGen random;
    for (int64_t i = first; i < first + calls; ++i) {
      const int64_t index = op == "place_random" ? absl::Uniform<int64_t>(random, 0, users)
                                                 : (i % users) * 1000003 % users;
      const std::string user = absl::StrCat(absl::GetFlag(FLAGS_user_prefix), index);
      loop.Acquire();
      auto placed = [&loop](absl::StatusOr<PlaceHoldResult> result) {
        loop.Release(result.ok() ? PlaceOutcomeName(result->outcome) : "", result.status());
      };
      auto ended = [&loop](absl::StatusOr<EndHoldResult> result) {
        loop.Release(result.ok() ? "ended" : "", result.status());
      };
      if (op == "place" || op == "place_random" || op == "place_refused" || op == "expired_setup") {
        PlaceHoldArgs args{
            user, op == "place_refused" ? "o2" : "o1", ttl, op == "place_refused" ? 1 : 3, 0, {}};
        CallOptions call = Deadline();
        if (op == "expired_setup") call.now = absl::Now() - ttl - absl::Seconds(1);
        store.PlaceHold(std::move(args), call, placed);
      } else if (op == "place_scoped") {
        PlaceHoldArgs args{user, "o1", ttl, 3, 12, {}};
        args.details.scope = "event-1";
        args.details.quantity = 2;
        args.details.scope_limits = LevelLimits{2, 8};
        store.PlaceHold(std::move(args), Deadline(), placed);
#ifdef ORDERHOLD_COST_RULES
      } else if (op == "place_ruled") {
        PlaceHoldArgs args{user, "o1", ttl, 3, 12, {}};
        args.details.scope = "event-2";
        args.details.quantity = 2;
        store.PlaceHold(std::move(args), Deadline(), placed);
#endif
      } else if (op == "get") {
        store.GetHold(user, "o1", Deadline(), [&loop](absl::StatusOr<GetHoldResult> result) {
          loop.Release("read", result.status());
        });
      } else if (op == "list") {
        store.ListHolds(user, Deadline(), [&loop](absl::StatusOr<ListHoldsResult> result) {
          loop.Release(result.ok() ? absl::StrCat("holds_", result->holds.size()) : "",
                       result.status());
        });
      } else if (op == "extend") {
        ExtendHoldArgs args{user, "o1", 2 * ttl, 0, ""};
        store.ExtendHold(std::move(args), Deadline(),
                         [&loop](absl::StatusOr<ExtendHoldResult> result) {
                           loop.Release("extended", result.status());
                         });
      } else if (op == "pay" || op == "cancel") {
        store.EndHold(user, "o1", op == "pay" ? HoldOutcome::kPaid : HoldOutcome::kCancelled,
                      Deadline(), ended);
      } else {
        loop.Release("", absl::InvalidArgumentError(absl::StrCat("unknown --op ", op)));
        return 2;
      }
    }
    outcomes = loop.Drain();
  }
  PrintOutcomes(op, calls, outcomes, start);
  return outcomes.contains("error") ? 1 : 0;
}

}  // namespace
}  // namespace orderhold::store

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return orderhold::store::Run();
}
