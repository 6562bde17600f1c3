#include "server/domain/scope_service.h"

#include <algorithm>
#include <utility>

#include "server/common/fan_in.h"
#include "server/common/status_macros.h"
#include "server/domain/page_token.h"

namespace orderhold::domain {

ScopeService::ScopeService(store::HoldStore& store, const HoldService& holds,
                           metrics::Metrics& metrics)
    : store_(store), holds_(holds), metrics_(metrics) {}

namespace {

// The usage part of a scope answer: the store's counts, the rule's totals and capacity.
ScopeUsageReply ScopeUsageOf(const store::ListScopeHoldsResult& result,
                             const ScopeRules::Resolved& rule) {
  ScopeUsageReply usage;
  usage.now = result.now;
  usage.usage = LevelUsage{result.scope_holds, result.scope_units, rule.totals};
  usage.first_expire_time = result.first_expire_time;
  usage.sold_units = result.sold_units;
  usage.capacity_units = rule.capacity_units;
  if (rule.capacity_units > 0) {
    usage.available_units =
        std::max<int64_t>(0, rule.capacity_units - result.scope_units - result.sold_units);
  }
  return usage;
}

// A scope index entry as a Hold: what the index knows of it.
Hold ScopeHoldOf(store::ScopeHold hold, const std::string& scope) {
  store::HoldDetails details;
  details.scope = scope;
  details.quantity = hold.quantity;
  return Hold{std::move(hold.user_id), std::move(hold.order_id), hold.expire_time,
              std::move(details)};
}

}  // namespace

void ScopeService::GetScopeUsage(std::string scope, store::CallOptions options,
                                 store::Callback<ScopeUsageReply> done) {
  ListScope(std::move(scope), ListPage{}, /*usage_only=*/true, options,
            [done = std::move(done)](absl::StatusOr<ListScopeHoldsReply> reply) mutable {
              if (!reply.ok()) return std::move(done)(reply.status());
              std::move(done)(std::move(reply->usage));
            });
}

void ScopeService::ListScopeHolds(std::string scope, ListPage page, store::CallOptions options,
                                  store::Callback<ListScopeHoldsReply> done) {
  ListScope(std::move(scope), std::move(page), /*usage_only=*/false, options, std::move(done));
}

void ScopeService::ListScope(std::string scope, ListPage page, bool usage_only,
                             store::CallOptions options,
                             store::Callback<ListScopeHoldsReply> done) {
  absl::StatusOr<store::ListScopeHoldsArgs> args =
      [&]() -> absl::StatusOr<store::ListScopeHoldsArgs> {
    if (scope.empty()) return absl::InvalidArgumentError("scope: required");
    ORDERHOLD_RETURN_IF_ERROR(ValidateScope(scope));
    if (!store_.keeps_scope_index()) {
      return absl::FailedPreconditionError(
          "scope usage across users needs the scope index, which this server's Redis mode does not "
          "keep (Redis Cluster)");
    }
    store::ListScopeHoldsArgs args;
    if (usage_only) {
      args.page_size = 0;
    } else {
      ORDERHOLD_ASSIGN_OR_RETURN(args.page_size, ResolvePageSize(page.page_size));
    }
    if (!page.page_token.empty()) {
      ORDERHOLD_ASSIGN_OR_RETURN(args.after, DecodePageToken(page.page_token, "", scope));
    }
    args.scope = scope;
    return args;
  }();
  if (!args.ok()) {
    std::move(done)(args.status());
    return;
  }
  store_.ListScopeHolds(*std::move(args), options,
                        [this, scope = std::move(scope), done = std::move(done)](
                            absl::StatusOr<store::ListScopeHoldsResult> result) mutable {
                          if (!result.ok()) {
                            std::move(done)(result.status());
                            return;
                          }
                          // The scope's runtime rule, read in the same step, when it has one: what
                          // a PlaceHold applies (its limits, totals and capacity), in place of the
                          // file's.
                          ScopeRules::Resolved resolved = holds_.ResolvedFor(scope);
                          if (result->rule.has_value()) {
                            resolved =
                                ScopeRules::Resolved{result->rule->limits, result->rule->totals,
                                                     result->rule->capacity_units};
                          }
                          std::move(done)(ReplyOf(scope, *std::move(result), resolved));
                        });
}

ListScopeHoldsReply ScopeService::ReplyOf(const std::string& scope,
                                          store::ListScopeHoldsResult result,
                                          const ScopeRules::Resolved& rule) {
  ListScopeHoldsReply reply;
  reply.usage = ScopeUsageOf(result, rule);
  if (result.more && !result.holds.empty()) {
    reply.next_page_token = EncodePageToken(
        "", scope, store::ListCursor{result.holds.back().expire_time, result.last_key});
  }
  reply.holds.reserve(result.holds.size());
  for (store::ScopeHold& hold : result.holds) {
    reply.holds.push_back(ScopeHoldOf(std::move(hold), scope));
  }
  return reply;
}

// One ReleaseScopeHolds in progress: shared by its pages' callbacks.
struct ScopeService::ScopeRelease {
  std::string scope;
  store::CallOptions options;
  store::Callback<ReleaseScopeHoldsReply> done;
  ReleaseScopeHoldsReply reply;
  int pages = 0;
  std::optional<store::ListCursor> after;  // the next page starts after the last one listed
};

void ScopeService::ReleaseScopeHolds(std::string scope, store::CallOptions options,
                                     store::Callback<ReleaseScopeHoldsReply> done) {
  absl::Status valid =
      scope.empty() ? absl::InvalidArgumentError("scope: required") : ValidateScope(scope);
  if (valid.ok() && !store_.keeps_scope_index()) {
    valid = absl::FailedPreconditionError(
        "releasing a scope across users needs the scope index, which this server's Redis mode "
        "does not keep (Redis Cluster)");
  }
  if (!valid.ok()) {
    std::move(done)(valid);
    return;
  }
  auto release = std::make_shared<ScopeRelease>();
  release->scope = std::move(scope);
  release->options = options;
  release->done = std::move(done);
  ReleaseScopePage(std::move(release));
}

void ScopeService::ReleaseScopePage(std::shared_ptr<ScopeRelease> release) {
  store::ListScopeHoldsArgs args;
  args.scope = release->scope;
  args.page_size = kDefaultPageSize;
  args.after = release->after;
  store_.ListScopeHolds(
      std::move(args), release->options,
      [this, release](absl::StatusOr<store::ListScopeHoldsResult> page) mutable {
        if (!page.ok()) {
          std::move(release->done)(page.status());
          return;
        }
        release->reply.now = page->now;
        if (page->holds.empty() || release->pages >= kMaxReleasePages) {
          std::move(release->done)(std::move(release->reply));
          return;
        }
        ++release->pages;
        // Forward from the page's last entry: an entry that ends nothing (a hold being placed, or
        // one already ended whose entry has not gone yet, on a Redis Cluster) is passed over once
        // instead of listed again.
        release->after = store::ListCursor{page->holds.back().expire_time, page->last_key};
        const bool more = page->more;
        std::vector<store::ScopeHold> holds = std::move(page->holds);
        const size_t n = holds.size();
        auto shared_holds = std::make_shared<std::vector<store::ScopeHold>>(std::move(holds));
        FanIn<store::EndHoldResult>(
            n,
            [&](size_t i, Callback<store::EndHoldResult> one) {
              const store::ScopeHold& hold = (*shared_holds)[i];
              store_.EndHold(hold.user_id, hold.order_id, store::HoldOutcome::kCancelled,
                             release->options, std::move(one));
            },
            [this, release, more,
             shared_holds](std::vector<absl::StatusOr<store::EndHoldResult>> results) mutable {
              for (size_t i = 0; i < results.size(); ++i) {
                absl::StatusOr<store::EndHoldResult>& result = results[i];
                if (!result.ok()) {
                  std::move(release->done)(result.status());
                  return;
                }
                CountLazyExpiries(metrics_, result->expired_removed);
                if (result->result != store::EndHoldResult::Result::kEnded) continue;
                metrics_.holds_cancelled().Increment();
                metrics_.events_appended().Increment();
                ++release->reply.released;
                release->reply.now = result->now;
                if (release->reply.holds.size() < static_cast<size_t>(kDefaultPageSize)) {
                  store::ScopeHold& hold = (*shared_holds)[i];
                  release->reply.holds.push_back(
                      Hold{std::move(hold.user_id), std::move(hold.order_id),
                           result->end.expire_time, std::move(result->details)});
                }
              }
              if (!more) {
                std::move(release->done)(std::move(release->reply));
                return;
              }
              ReleaseScopePage(std::move(release));
            });
      });
}

}  // namespace orderhold::domain
