#include "server/store/noop_hold_store.h"

#include <algorithm>
#include <utility>

#include "absl/time/clock.h"
#include "server/store/hold_details_codec.h"

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
  result.user_units = std::max<int64_t>(1, args.details.quantity);
  if (!args.details.scope.empty()) {
    result.scope_holds = 1;
    result.scope_units = result.user_units;
  }
  result.details = std::move(args.details);
  result.details.quantity = result.user_units;
  result.details.place_time = result.now;
  result.details.max_expire_time = std::max(result.expire_time, result.now + args.max_lifetime);
  std::move(done)(std::move(result));
}

void NoopHoldStore::ExtendHold(ExtendHoldArgs args, CallOptions options,
                               Callback<ExtendHoldResult> done) {
  ExtendHoldResult result;
  result.result = ExtendHoldResult::Result::kLive;
  result.now = Now(options);
  result.hold.order_id = std::move(args.order_id);
  // As if placed now with the default lifetime cap (PlaceHoldArgs::max_lifetime's default).
  const absl::Duration lifetime = PlaceHoldArgs{}.max_lifetime;
  result.hold.expire_time = result.now + std::min(args.ttl, lifetime);
  result.hold.details.place_time = result.now;
  result.hold.details.max_expire_time = result.now + lifetime;
  result.hold.details.extensions = 1;
  result.extended = true;
  result.capped = args.ttl > lifetime;
  std::move(done)(std::move(result));
}

void NoopHoldStore::GetHold(std::string /*user_id*/, std::string /*order_id*/, CallOptions options,
                            Callback<GetHoldResult> done) {
  GetHoldResult result;
  result.now = Now(options);
  std::move(done)(std::move(result));
}

void NoopHoldStore::ReleaseHolds(std::string /*user_id*/, std::string /*scope*/,
                                 CallOptions options, Callback<ReleaseHoldsResult> done) {
  ReleaseHoldsResult result;
  result.now = Now(options);
  std::move(done)(std::move(result));
}

void NoopHoldStore::ListScopeHolds(ListScopeHoldsArgs /*args*/, CallOptions options,
                                   Callback<ListScopeHoldsResult> done) {
  ListScopeHoldsResult result;
  result.now = Now(options);
  std::move(done)(std::move(result));
}

void NoopHoldStore::EndHold(std::string /*user_id*/, std::string /*order_id*/, HoldOutcome outcome,
                            std::string payment_reference, CallOptions options,
                            Callback<EndHoldResult> done) {
  EndHoldResult result;
  result.result = EndHoldResult::Result::kEnded;
  result.now = Now(options);
  result.end = HoldEnd{outcome, result.now, result.now, std::move(payment_reference)};
  std::move(done)(std::move(result));
}

void NoopHoldStore::ListHolds(ListHoldsArgs /*args*/, CallOptions options,
                              Callback<ListHoldsResult> done) {
  ListHoldsResult result;
  result.now = Now(options);
  std::move(done)(std::move(result));
}

void NoopHoldStore::Reap(int /*partition*/, ReapArgs /*args*/, CallOptions options,
                         Callback<ReapResult> done) {
  ReapResult result;
  result.now = Now(options);
  std::move(done)(std::move(result));
}

void NoopHoldStore::MigrateStep(int /*partition*/, MigrateArgs /*args*/, CallOptions /*options*/,
                                Callback<MigrateResult> done) {
  std::move(done)(MigrateResult{});
}

void NoopHoldStore::Heartbeat(std::string replica_id, absl::Duration /*ttl*/,
                              CallOptions /*options*/, Callback<std::vector<std::string>> done) {
  std::move(done)(std::vector<std::string>{std::move(replica_id)});
}

void NoopHoldStore::ReleaseLease(int /*partition*/, std::string /*replica_id*/,
                                 CallOptions /*options*/, Callback<bool> done) {
  std::move(done)(true);
}

void NoopHoldStore::Unregister(std::string /*replica_id*/, CallOptions /*options*/,
                               Callback<bool> done) {
  std::move(done)(true);
}

void NoopHoldStore::Ping(CallOptions options, Callback<absl::Time> done) {
  std::move(done)(Now(options));
}

}  // namespace orderhold::store
