// What orderhold-bench sends: the method mix (--mix), the user population and how users are drawn
// from it (--users, --distribution), the user and order ids it makes up, what a PlaceHold carries
// besides them (--scopes, --quantity, --scope_max_holds, --scope_max_units: the scoped mix), and
// the pool of holds this run placed, from which Pay and CancelHold pick the holds they end and
// ExtendHold and GetHold the holds they extend and read.
//
// Everything here is pure or thread-safe, so the generator's gRPC callbacks, running on gRPC's
// threads, can draw from it concurrently. Randomness comes from one absl::InsecureBitGen per
// thread (ThreadBitGen): a benchmark needs cheap draws, not unpredictable ones.
#ifndef ORDERHOLD_CLIENT_BENCH_WORKLOAD_H_
#define ORDERHOLD_CLIENT_BENCH_WORKLOAD_H_

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/random/random.h"
#include "absl/random/zipf_distribution.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "client/bench/method.h"
#include "orderhold/v1/orderhold.pb.h"

namespace orderhold::client::bench {

// The calling thread's random generator, shared by every draw of the workload (method, user, run
// seed). Thread-safe: each thread has its own (thread_local), so no draw takes a lock.
absl::InsecureBitGen& ThreadBitGen();

// The largest weight of one method in a mix, so that the sum of the weights can never overflow.
inline constexpr int64_t kMaxMixWeight = 1'000'000'000;

// Relative weights of the methods in the workload, indexed by Method; zero means never sent.
struct Mix {
  std::array<int64_t, kNumMethods> weights{};

  // Sum of the weights.
  int64_t Total() const;
};

// Parses a --mix value: comma-separated `key=weight` pairs, keys from MethodMixKey (place, pay,
// list, cancel, extend, get, release), weights integers from 0 to kMaxMixWeight (ratios, need not
// sum to 100), any subset in any order, whitespace around keys and weights ignored.
// "place=70,pay=20,list=10". Missing keys get weight 0.
// Errors (INVALID_ARGUMENT, message suitable for the user, starting with "--mix"): empty spec,
// malformed pair, unknown or repeated key, weight not an integer or out of range, all weights
// zero. Pure.
absl::StatusOr<Mix> ParseMix(absl::string_view spec);

// The canonical text of a mix: non-zero weights in Method order, "place=70,pay=20,list=10". Pure.
std::string FormatMix(const Mix& mix);

// Which method a draw selects: `draw` must be in [0, mix.Total()); method m owns the draws
// [sum of weights before m, that sum + weight of m). Pure.
Method PickMethod(const Mix& mix, int64_t draw);

// How user ids are drawn from the population.
enum class Distribution { kUniform, kZipf };

// Parses "uniform" or "zipf" (exact, lower case); INVALID_ARGUMENT otherwise. Pure.
absl::StatusOr<Distribution> ParseDistribution(absl::string_view name);

// "uniform" or "zipf". Pure.
absl::string_view DistributionName(Distribution distribution);

// The user id for population index `index`: `prefix` followed by the decimal index ("u42"). Pure.
std::string UserId(absl::string_view prefix, int64_t index);

// The order id of the `sequence`-th PlaceHold of run `run_seed`: "b<run_seed hex>-<sequence>",
// e.g. "b0000beef-17". Unique within a run; distinct runs differ in the seed. Pure.
std::string OrderId(uint32_t run_seed, int64_t sequence);

// The `sequence`-th order id of run `run_seed` that no PlaceHold ever used:
// "b<run_seed hex>-missing-<sequence>", e.g. "b0000beef-missing-3". A Pay, CancelHold, ExtendHold
// or GetHold that finds no hold of this run in the pool targets one (the server answers
// NOT_FOUND). Pure.
std::string MissingOrderId(uint32_t run_seed, int64_t sequence);

// Draws user indexes in [0, users) from the configured distribution. Uniform: every index equally
// likely. Zipf: absl::zipf_distribution over [0, users - 1] with exponent q (P(i) proportional to
// (1 + i)^-q), so index 0 is the most popular user. Thread-safe: Draw is const and uses
// ThreadBitGen.
class UserPicker {
 public:
  // Preconditions (checked by ValidateOptions): users >= 1; for zipf users >= 2 and
  // zipf_exponent > 1 (absl::zipf_distribution's own preconditions k > 0, q > 1).
  UserPicker(int64_t users, Distribution distribution, double zipf_exponent);

  // One index in [0, users).
  int64_t Draw() const;

 private:
  const int64_t users_;
  const Distribution distribution_;
  // Only meaningful for kZipf; precomputed once (it holds the normalisation constants).
  std::optional<absl::zipf_distribution<int64_t>::param_type> zipf_;
};

// The most scopes a run can draw from (--scopes); their names are made once, before the run.
inline constexpr int64_t kMaxScopes = 1'000'000;

// What each PlaceHold carries besides its ids and ttl. The default (all zero) is the unscoped
// PlaceHold of before scopes: no scope, no quantity, no scope limits.
struct PlaceShape {
  // --scopes: 0 = unscoped; N > 0: each PlaceHold draws one of N scopes, ScopeName(0..N-1),
  // uniformly, so each user's holds spread over them.
  int64_t scopes = 0;
  // --quantity: units per hold; 0 leaves PlaceHoldRequest.quantity unset (the server counts 1).
  int64_t quantity = 0;
  // --scope_max_holds, --scope_max_units: sent as PlaceHoldRequest.scope_limits when either is
  // non-zero (the other then 0 = no limit at that level); both 0: not sent (the server's rules).
  int64_t scope_max_holds = 0;
  int64_t scope_max_units = 0;

  // True when any field is set: the PlaceHolds are not today's plain ones.
  bool IsSet() const;
};

// Checks a PlaceShape against what the server can ever grant (proto/orderhold/v1/orderhold.proto):
// scopes 0 to kMaxScopes, quantity 0 to 1,000,000,000, scope_max_holds 0 to 10,000,
// scope_max_units 0 to 1,000,000,000; scope limits only with scopes; a quantity above
// scope_max_units (every call would be INVALID_ARGUMENT). INVALID_ARGUMENT whose message starts
// with the offending flag. Pure.
absl::Status ValidatePlaceShape(const PlaceShape& shape);

// The canonical text of a shape, for reports: "unscoped" for the default, else e.g.
// "scopes=4,quantity=2,scope_max_holds=2,scope_max_units=8" (zero fields left out). Pure.
std::string FormatPlaceShape(const PlaceShape& shape);

// The name of scope `index`: "event:<index>", e.g. "event:3". Pure.
std::string ScopeName(int64_t index);

// Shapes PlaceHold requests as a (valid) PlaceShape says. The scope names are made once, here, so
// the hot path copies a string instead of formatting one. Thread-safe: const after construction.
class PlaceShaper {
 public:
  explicit PlaceShaper(const PlaceShape& shape);

  // A scope index drawn uniformly from [0, scopes); 0 when unscoped. Uses ThreadBitGen.
  int64_t DrawScope() const;

  // Sets `request`'s scope (ScopeName(scope_index), scope_index in [0, scopes)), quantity and
  // scope_limits as the shape says; leaves them untouched for the default shape. Pure.
  void Apply(int64_t scope_index, orderhold::v1::PlaceHoldRequest* request) const;

 private:
  const PlaceShape shape_;
  const std::vector<std::string> scope_names_;
};

// A (user, order) pair whose hold was created by a PlaceHold and can be paid, cancelled, extended
// or read.
struct PoolEntry {
  int64_t user_index = 0;
  int64_t order_sequence = 0;

  friend bool operator==(const PoolEntry&, const PoolEntry&) = default;
};

// How many of the newest entries of a HoldPool Sample draws from: recent holds, the least likely
// to have expired, yet so many that concurrent ExtendHold calls seldom meet on one hold.
inline constexpr int64_t kSampleWindow = 1024;

// A bounded pool of recently created holds for Pay and CancelHold to consume, and ExtendHold and
// GetHold to visit. Pop returns the most recently pushed entry (the hold least likely to have
// expired); Sample returns one of the newest and leaves it in the pool (extending or reading a hold
// does not end it, so it can still be paid or cancelled later); when full, Push overwrites the
// oldest entry. Memory grows with use up to `capacity` entries (16 bytes each). Thread-safe (one
// mutex).
class HoldPool {
 public:
  // capacity >= 1.
  explicit HoldPool(int64_t capacity);

  // Adds `entry` as the newest; when the pool is full, the oldest entry is dropped.
  void Push(PoolEntry entry);
  // The most recent entry, removed; nullopt when empty.
  std::optional<PoolEntry> Pop();
  // One of the min(size(), kSampleWindow) newest entries, not removed: the one `draw` modulo that
  // count places back from the newest (0: the newest itself); nullopt when empty. The caller
  // draws (ThreadBitGen in the generator), so tests can choose.
  std::optional<PoolEntry> Sample(uint64_t draw) const;
  // Entries in the pool, at most the capacity.
  int64_t size() const;

 private:
  const int64_t capacity_;
  mutable absl::Mutex mu_;
  // A ring: the live entries are ring_[(start_ + k) % capacity_] for k in [0, size_). ring_ grows
  // by push_back until it holds capacity_ entries; start_ stays 0 until then.
  std::vector<PoolEntry> ring_ ABSL_GUARDED_BY(mu_);
  int64_t start_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t size_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace orderhold::client::bench

#endif  // ORDERHOLD_CLIENT_BENCH_WORKLOAD_H_
