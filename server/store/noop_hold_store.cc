#include "server/store/noop_hold_store.h"

#include <utility>

#include "absl/time/clock.h"

namespace orderhold::store {
namespace {

absl::Time Now(const CallOptions& options) {
  if (options.now.has_value()) return *options.now;
  return absl::FromUnixMillis(absl::ToUnixMillis(absl::Now()));
}

}  // namespace

void NoopHoldStore::PlaceHold(PlaceHoldArgs args, CallOptions options,
                              Callback<PlaceHoldResult> done) {
  PlaceHoldResult result;
  result.outcome = PlaceHoldResult::Outcome::kCreated;
  result.now = Now(options);
  result.expire_time = result.now + args.ttl;
  result.active_holds = 1;
  std::move(done)(std::move(result));
}

void NoopHoldStore::Pay(std::string /*user_id*/, std::string /*order_id*/, CallOptions options,
                        Callback<PayResult> done) {
  PayResult result;
  result.paid = true;
  result.now = Now(options);
  result.expire_time = result.now;
  std::move(done)(std::move(result));
}

void NoopHoldStore::ListHolds(std::string /*user_id*/, CallOptions options,
                              Callback<ListHoldsResult> done) {
  ListHoldsResult result;
  result.now = Now(options);
  std::move(done)(std::move(result));
}

void NoopHoldStore::Reap(int /*shard*/, int /*max_users*/, CallOptions options,
                         Callback<ReapResult> done) {
  ReapResult result;
  result.now = Now(options);
  std::move(done)(std::move(result));
}

void NoopHoldStore::Ping(CallOptions options, Callback<absl::Time> done) {
  std::move(done)(Now(options));
}

}  // namespace orderhold::store
