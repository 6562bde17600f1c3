// Runtime scope rules end to end: two replicas (Apps) on a real Redis, standalone or managed by
// Sentinel, called over real gRPC with the generated stubs, and no limits file. An edit through
// one replica applies on the other from the step that writes it (no SIGHUP), and a stale etag is
// ABORTED; a PAUSED rule opens at its open_time on the Redis clock; CloseScope under load: once it
// answers no PlaceHold of the scope succeeds on either replica, and with release_holds every hold
// live at the close ends CANCELLED with one event.
#include <algorithm>
#include <atomic>
#include <filesystem>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "client/orderhold_client.h"
#include "google/protobuf/util/time_util.h"
#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "orderhold/v1/orderhold.grpc.pb.h"
#include "server/app.h"
#include "tests/testing/app_acl.h"
#include "tests/testing/grpc_retry.h"
#include "tests/testing/herd_ends.h"
#include "tests/testing/hold_event_watcher.h"
#include "tests/testing/live_intervals.h"
#include "tests/testing/os_util.h"
#include "tests/testing/parsed_redis_url.h"
#include "tests/testing/redis_server.h"
#include "tests/testing/sentinel_group.h"
#include "tests/testing/status_matchers.h"

namespace orderhold {
namespace {

using ::google::protobuf::util::TimeUtil;
using ::orderhold::testing::IsOk;
using ::orderhold::testing::ParsedRedisUrl;
using ::orderhold::testing::RedisServer;
using ::orderhold::testing::SentinelGroup;
using ::orderhold::testing::SentinelGroupOptions;
using ::orderhold::testing::Watcher;

constexpr char kScope[] = "event:rules";

class ScopeRulesE2eTest : public ::testing::TestWithParam<std::string> {
 public:
  v1::OrderHold::Stub& stub(int replica) { return *stubs_[replica]; }
  client::OrderHoldClient& client(int replica) { return *clients_[replica]; }

 protected:
  void SetUp() override {
    if (GetParam() == "sentinel") {
      SentinelGroupOptions options;
      ASSERT_OK_AND_ASSIGN(options.app_acl_rules, testing::AppAclRulesLine());
      ASSERT_OK_AND_ASSIGN(group_, SentinelGroup::Start(options));
    } else {
      ASSERT_OK_AND_ASSIGN(redis_, RedisServer::Start());
    }
    for (int i = 0; i < 2; ++i) {
      Config config;
      config.grpc_address = "127.0.0.1:0";
      if (group_ != nullptr) {
        config.redis_mode = RedisMode::kSentinel;
        config.redis_url = ParsedRedisUrl(group_->SentinelUrl());
        config.redis_sentinel_master = group_->master_name();
      } else {
        config.redis_url = ParsedRedisUrl(redis_->url());
      }
      config.run_reaper = true;
      config.health_check_interval = absl::Milliseconds(50);
      config.policy.max_holds = 3;
      registries_.push_back(std::make_unique<prometheus::Registry>());
      auto app = App::Start(config, *registries_.back());
      ASSERT_THAT(app, IsOk());
      auto channel = grpc::CreateChannel(absl::StrCat("127.0.0.1:", (*app)->grpc_port()),
                                         grpc::InsecureChannelCredentials());
      stubs_.push_back(v1::OrderHold::NewStub(channel));
      clients_.push_back(std::make_unique<client::OrderHoldClient>(
          v1::OrderHold::NewStub(channel), client::ClientOptions{absl::Seconds(20), ""}));
      apps_.push_back(*std::move(app));
    }
  }
  void TearDown() override {
    clients_.clear();
    stubs_.clear();
    apps_.clear();
    group_.reset();
    redis_.reset();
  }

 public:
  static grpc::ClientContext* Deadline(grpc::ClientContext* context) {
    context->set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(20)));
    return context;
  }

  grpc::Status Put(int replica, const v1::ScopeRule& rule, v1::ScopeRule* out) {
    v1::PutScopeRuleRequest request;
    *request.mutable_rule() = rule;
    grpc::ClientContext context;
    return stubs_[replica]->PutScopeRule(Deadline(&context), request, out);
  }
  grpc::Status Get(int replica, v1::ScopeRule* out) {
    v1::GetScopeRuleRequest request;
    request.set_scope(kScope);
    grpc::ClientContext context;
    return stubs_[replica]->GetScopeRule(Deadline(&context), request, out);
  }
  grpc::Status Place(int replica, const std::string& user, const std::string& order,
                     v1::PlaceHoldResponse* out = nullptr, absl::Duration ttl = absl::Minutes(10)) {
    v1::PlaceHoldRequest request;
    request.set_user_id(user);
    request.set_order_id(order);
    request.set_scope(kScope);
    *request.mutable_ttl() = TimeUtil::MillisecondsToDuration(absl::ToInt64Milliseconds(ttl));
    v1::PlaceHoldResponse response;
    grpc::ClientContext context;
    return stubs_[replica]->PlaceHold(Deadline(&context), request, out ? out : &response);
  }
  // The ErrorInfo reason of `status` and its RetryInfo's delay (-1 ms without one).
  static std::pair<std::string, absl::Duration> ReasonAndRetry(const grpc::Status& status) {
    google::rpc::Status details;
    std::pair<std::string, absl::Duration> out{"", absl::Milliseconds(-1)};
    if (!details.ParseFromString(status.error_details())) return out;
    for (const google::protobuf::Any& any : details.details()) {
      google::rpc::ErrorInfo info;
      google::rpc::RetryInfo retry;
      if (any.UnpackTo(&info)) out.first = info.reason();
      if (any.UnpackTo(&retry)) {
        out.second = absl::Milliseconds(TimeUtil::DurationToMilliseconds(retry.retry_delay()));
      }
    }
    return out;
  }

 protected:
  std::unique_ptr<RedisServer> redis_;
  std::unique_ptr<SentinelGroup> group_;
  std::vector<std::unique_ptr<prometheus::Registry>> registries_;
  std::vector<std::unique_ptr<App>> apps_;
  std::vector<std::unique_ptr<v1::OrderHold::Stub>> stubs_;
  std::vector<std::unique_ptr<client::OrderHoldClient>> clients_;
};

TEST_P(ScopeRulesE2eTest, AnEditAppliesOnEveryReplicaAtOnceAndAStaleEtagIsAborted) {
  // Without a rule (and no file) the scope has no total.
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(Place(i % 2, absl::StrCat("free-", i), "o").ok());
  v1::ScopeRule rule;
  rule.set_scope(kScope);
  rule.set_total_max_holds(5);
  v1::ScopeRule first;
  ASSERT_TRUE(Put(0, rule, &first).ok());
  EXPECT_FALSE(first.etag().empty());
  EXPECT_EQ(first.effective_state(), v1::OPEN);
  // Replica 1 applies what replica 0 wrote: 3 + 2 live, the sixth is refused.
  ASSERT_TRUE(Place(1, "a", "o").ok());
  ASSERT_TRUE(Place(1, "b", "o").ok());
  grpc::Status refused = Place(1, "c", "o");
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(ReasonAndRetry(refused).first, "SCOPE_TOTAL_LIMIT");
  // An edit through replica 1 with the etag read: replica 0 places under it at once.
  v1::ScopeRule read;
  ASSERT_TRUE(Get(1, &read).ok());
  EXPECT_EQ(read.etag(), first.etag());
  read.set_total_max_holds(6);
  v1::ScopeRule second;
  ASSERT_TRUE(Put(1, read, &second).ok());
  EXPECT_NE(second.etag(), first.etag());
  v1::PlaceHoldResponse placed;
  ASSERT_TRUE(Place(0, "c", "o", &placed).ok());
  EXPECT_EQ(placed.scope_total_usage().max_holds(), 6u);
  EXPECT_EQ(placed.scope_total_usage().holds(), 6u);
  EXPECT_EQ(Place(0, "d", "o").error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  // The first etag is stale now, on either replica; nothing changed.
  rule.set_etag(first.etag());
  rule.set_total_max_holds(100);
  v1::ScopeRule ignored;
  EXPECT_EQ(Put(0, rule, &ignored).error_code(), grpc::StatusCode::ABORTED);
  v1::DeleteScopeRuleRequest stale_delete;
  stale_delete.set_scope(kScope);
  stale_delete.set_etag(first.etag());
  v1::DeleteScopeRuleResponse deleted;
  grpc::ClientContext stale_context;
  EXPECT_EQ(
      stubs_[1]->DeleteScopeRule(Deadline(&stale_context), stale_delete, &deleted).error_code(),
      grpc::StatusCode::ABORTED);
  EXPECT_EQ(Place(1, "d", "o").error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  // GetScopeUsage reports the rule's total; ListScopeRules lists it once.
  v1::GetScopeUsageRequest usage_request;
  usage_request.set_scope(kScope);
  v1::GetScopeUsageResponse usage;
  grpc::ClientContext usage_context;
  ASSERT_TRUE(stubs_[1]->GetScopeUsage(Deadline(&usage_context), usage_request, &usage).ok());
  EXPECT_EQ(usage.usage().max_holds(), 6u);
  v1::ListScopeRulesResponse listed;
  grpc::ClientContext list_context;
  ASSERT_TRUE(stubs_[0]
                  ->ListScopeRules(Deadline(&list_context), v1::ListScopeRulesRequest(), &listed)
                  .ok());
  ASSERT_EQ(listed.rules_size(), 1);
  EXPECT_EQ(listed.rules(0).etag(), second.etag());
  // Deleted with its etag: the scope follows the file again (none: no total).
  v1::DeleteScopeRuleRequest remove;
  remove.set_scope(kScope);
  remove.set_etag(second.etag());
  grpc::ClientContext delete_context;
  ASSERT_TRUE(stubs_[0]->DeleteScopeRule(Deadline(&delete_context), remove, &deleted).ok());
  EXPECT_TRUE(Place(1, "d", "o").ok());
  EXPECT_EQ(Get(0, &ignored).error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_P(ScopeRulesE2eTest, APausedScopeOpensAtItsOpenTimeOnTheRedisClock) {
  const absl::Time open = absl::Now() + absl::Milliseconds(1500);
  v1::ScopeRule rule;
  rule.set_scope(kScope);
  rule.set_state(v1::PAUSED);
  *rule.mutable_open_time() = TimeUtil::MillisecondsToTimestamp(absl::ToUnixMillis(open));
  v1::ScopeRule written;
  ASSERT_TRUE(Put(0, rule, &written).ok());
  EXPECT_EQ(written.effective_state(), v1::PAUSED);
  const grpc::Status early = Place(1, "early", "o");
  EXPECT_EQ(early.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  const auto [reason, retry] = ReasonAndRetry(early);
  EXPECT_EQ(reason, "SCOPE_NOT_OPEN");
  EXPECT_GT(retry, absl::ZeroDuration());
  EXPECT_LE(retry, absl::Milliseconds(1500));
  // Retried when the RetryInfo says (the Redis clock is this host's): open, on both replicas.
  absl::SleepFor(retry + absl::Milliseconds(20));
  EXPECT_TRUE(Place(1, "early", "o").ok());
  EXPECT_TRUE(Place(0, "later", "o").ok());
  v1::ScopeRule now_read;
  ASSERT_TRUE(Get(0, &now_read).ok());
  EXPECT_EQ(now_read.state(), v1::PAUSED);  // as written
  EXPECT_EQ(now_read.effective_state(), v1::OPEN);
}

// What a herd of buyers saw around a close (or a release alone).
struct CloseHerd {
  int granted = 0;         // holds granted, all live at the close (ttl 10 min)
  int after_close = 0;     // of them, placed by a call sent after the close answered
  int refused_closed = 0;  // FAILED_PRECONDITION SCOPE_CLOSED answers
  uint32_t released = 0;   // what the close (or the release) says it ended
};

// 8 buyers place on both replicas; after 500 ms CloseScope(release_holds) through replica 1 (with
// `close` false: ReleaseScopeHolds alone, the negative control), and 500 ms more of buyers.
CloseHerd RunCloseHerd(ScopeRulesE2eTest& test, bool close) {
  std::atomic<bool> stop{false};
  std::atomic<absl::Time*> closed_at{nullptr};
  absl::Mutex mu;
  CloseHerd herd;
  std::vector<std::thread> buyers;
  for (int t = 0; t < 8; ++t) {
    buyers.emplace_back([&, t] {
      for (int i = 0; !stop; ++i) {
        const absl::Time sent = absl::Now();
        const grpc::Status status = test.Place(i % 2, absl::StrCat("buyer-", t, "-", i), "o");
        absl::Time* closed = closed_at.load();
        absl::MutexLock lock(&mu);
        if (status.ok()) {
          ++herd.granted;
          if (closed != nullptr && sent > *closed) ++herd.after_close;
        } else {
          EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
          EXPECT_EQ(ScopeRulesE2eTest::ReasonAndRetry(status).first, "SCOPE_CLOSED");
          ++herd.refused_closed;
        }
      }
    });
  }
  absl::SleepFor(absl::Milliseconds(500));
  grpc::ClientContext context;
  grpc::Status status;
  if (close) {
    v1::CloseScopeRequest request;
    request.set_scope(kScope);
    request.set_release_holds(true);
    v1::CloseScopeResponse response;
    status = test.stub(1).CloseScope(ScopeRulesE2eTest::Deadline(&context), request, &response);
    EXPECT_EQ(response.rule().state(), v1::CLOSED);
    herd.released = response.released_count();
  } else {
    v1::ReleaseScopeHoldsRequest request;
    request.set_scope(kScope);
    v1::ReleaseScopeHoldsResponse response;
    status =
        test.stub(1).ReleaseScopeHolds(ScopeRulesE2eTest::Deadline(&context), request, &response);
    herd.released = response.released_count();
  }
  absl::Time answered = absl::Now();
  closed_at = &answered;
  EXPECT_TRUE(status.ok()) << status.error_message();
  absl::SleepFor(absl::Milliseconds(500));
  stop = true;
  for (std::thread& buyer : buyers) buyer.join();
  return herd;
}

TEST_P(ScopeRulesE2eTest, AfterCloseScopeAnswersNoPlaceSucceedsAndEveryLiveHoldEndsOnce) {
  v1::WatchHoldEventsRequest watch;
  watch.set_consumer_group("closing");
  watch.set_consumer("c1");
  watch.set_start_position(v1::LATEST);
  Watcher watcher(client(0), watch, /*ack=*/true);
  absl::SleepFor(absl::Milliseconds(300));  // the group exists before the first end
  const CloseHerd herd = RunCloseHerd(*this, /*close=*/true);
  EXPECT_EQ(herd.after_close, 0);
  EXPECT_GT(herd.refused_closed, 0);
  // Every hold granted was live at the close and ended CANCELLED by it, once: as many CANCELLED
  // events as holds, one per order, and nothing live.
  EXPECT_EQ(herd.released, static_cast<uint32_t>(herd.granted));
  ASSERT_TRUE(watcher.WaitFor(static_cast<size_t>(herd.granted)));
  absl::SleepFor(absl::Milliseconds(300));  // any extra event would arrive by now
  std::map<std::string, int> events;
  for (const v1::HoldEvent& event : watcher.events()) {
    EXPECT_EQ(event.outcome(), v1::CANCELLED);
    ++events[event.hold().user_id()];
  }
  EXPECT_EQ(events.size(), static_cast<size_t>(herd.granted));
  for (const auto& [user, count] : events) EXPECT_EQ(count, 1) << user;
  v1::GetScopeUsageRequest usage_request;
  usage_request.set_scope(kScope);
  v1::GetScopeUsageResponse usage;
  grpc::ClientContext usage_context;
  ASSERT_TRUE(stubs_[0]->GetScopeUsage(Deadline(&usage_context), usage_request, &usage).ok());
  EXPECT_EQ(usage.usage().holds(), 0u);
  std::cout << "close under load: " << herd.granted << " holds granted before the close, "
            << herd.released << " released, " << herd.refused_closed
            << " placements refused SCOPE_CLOSED, " << herd.after_close << " granted after it\n";
}

// The negative control: ReleaseScopeHolds alone (what an operator had before CloseScope) leaves
// the scope open, and the oracle above sees placements granted after it answered.
TEST_P(ScopeRulesE2eTest, AReleaseWithoutACloseLetsPlacesThroughAndTheOracleSeesIt) {
  const CloseHerd herd = RunCloseHerd(*this, /*close=*/false);
  EXPECT_GT(herd.after_close, 0);
  EXPECT_EQ(herd.refused_closed, 0);
  std::cout << "release without a close: " << herd.after_close << " granted after it answered\n";
}

// What an on-sale herd did: every grant (a paid one counts for ever: held + sold), by user too.
struct OnSaleHerd {
  std::vector<testing::Grant> grants;
  std::map<std::string, std::vector<testing::Grant>> by_user;
  int64_t paid_units = 0;
  int64_t returned_units = 0;
  int returns = 0;
  std::map<std::string, int> refusals;  // by ErrorInfo reason
  int other = 0;
  std::string first_other;

  // Counts `grant` (when units are left of it) and the parts refunds gave back, for `user`.
  void Add(const std::string& user, const testing::Grant& grant,
           const std::vector<testing::Grant>& refunded, absl::Mutex& mu) {
    absl::MutexLock lock(&mu);
    for (const testing::Grant& part : refunded) {
      grants.push_back(part);
      by_user[user].push_back(part);
    }
    if (grant.units > 0) {
      grants.push_back(grant);
      by_user[user].push_back(grant);
    }
  }
};

// Refunds a third of the paid grants, on the replica that placed them, after 0-20 ms: 1 to all of
// the grant's units back (ReturnUnits), splitting it: the units returned count until the refund is
// sent (an end no later than the real one, as for a cancel), the rest for ever.
void MaybeRefund(ScopeRulesE2eTest& test, int replica, const std::string& user,
                 const std::string& order, std::mt19937& random, testing::Grant& grant,
                 std::vector<testing::Grant>& refunded, OnSaleHerd& herd, absl::Mutex& mu) {
  if (random() % 3 != 0) return;
  absl::SleepFor(absl::Milliseconds(random() % 20));
  const int64_t units = 1 + static_cast<int64_t>(random() % static_cast<uint32_t>(grant.units));
  v1::ReturnUnitsRequest request;
  request.set_user_id(user);
  request.set_order_id(order);
  request.set_units(static_cast<uint32_t>(units));
  request.set_request_id(absl::StrCat("refund-", order));
  v1::ReturnUnitsResponse response;
  testing::CallAttempts attempts;  // a retry of a recorded refund answers already_returned
  const grpc::Status status = testing::RetryUnavailableCall(
      [&] {
        grpc::ClientContext context;
        return test.stub(replica).ReturnUnits(ScopeRulesE2eTest::Deadline(&context), request,
                                              &response);
      },
      &attempts);
  const absl::Time sent = attempts.last_sent;
  EXPECT_TRUE(status.ok()) << status.error_message();
  if (!status.ok()) return;
  EXPECT_TRUE(!response.already_returned() || attempts.retried());
  EXPECT_EQ(response.returned_units(), units);
  refunded.push_back(testing::Grant{grant.from, sent, units});
  grant.units -= units;
  absl::MutexLock lock(&mu);
  herd.returned_units += units;
  ++herd.returns;
}

// 5,000 buyers over both replicas for 3 s, half of the calls from 10 eager buyers who come back
// for more; quantity 1 or 2, ttl 300 ms; of the grants a half is paid, a quarter cancelled (by the
// other replica, after 0-20 ms), the rest expire (the reaper on); a third of the paid ones are
// refunded in part or whole (MaybeRefund).
OnSaleHerd RunOnSaleHerd(ScopeRulesE2eTest& test) {
  OnSaleHerd herd;
  absl::Mutex mu;
  std::atomic<int> next{0};
  const absl::Time until = absl::Now() + absl::Seconds(3);
  std::vector<std::thread> threads;
  for (int t = 0; t < 16; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 random(static_cast<uint32_t>(t));
      for (int i = next++; absl::Now() < until; i = next++) {
        const std::string user = absl::StrCat("buyer-", i % 2 == 0 ? (i / 2) % 10 : i % 5000);
        const std::string order = absl::StrCat("o-", i);
        v1::PlaceHoldRequest request;
        request.set_user_id(user);
        request.set_order_id(order);
        request.set_scope(kScope);
        request.set_quantity(1 + i % 2);
        *request.mutable_ttl() = TimeUtil::MillisecondsToDuration(300);
        v1::PlaceHoldResponse response;
        testing::CallAttempts placed;  // a retry of a recorded placement answers created = false
        const grpc::Status status = testing::RetryUnavailableCall(
            [&] {
              grpc::ClientContext context;
              return test.stub(i % 2).PlaceHold(ScopeRulesE2eTest::Deadline(&context), request,
                                                &response);
            },
            &placed);
        if (!status.ok() || (!response.created() && !placed.retried())) {
          absl::MutexLock lock(&mu);
          if (status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
            ++herd.refusals[ScopeRulesE2eTest::ReasonAndRetry(status).first];
          } else if (++herd.other == 1) {
            herd.first_other = status.ok() ? "an order id answered twice" : status.error_message();
          }
          continue;
        }
        std::vector<testing::Grant> refunded;  // the parts a refund gave back
        testing::Grant grant{
            absl::Now(),
            absl::FromUnixMillis(TimeUtil::TimestampToMilliseconds(response.hold().expire_time())),
            response.hold().quantity()};
        const uint32_t dice = random() % 4;
        if (dice < 3) {
          absl::SleepFor(absl::Milliseconds(random() % 20));
          // A sale counts for ever (held + sold).
          if (testing::EndGrant(test.stub(1 - i % 2), user, order, dice < 2, /*sold_stays=*/true,
                                grant)) {
            {
              absl::MutexLock lock(&mu);
              herd.paid_units += grant.units;
            }
            MaybeRefund(test, i % 2, user, order, random, grant, refunded, herd, mu);
          }
        }
        herd.Add(user, grant, refunded, mu);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  return herd;
}

// The most units one buyer held and owned at once, and who.
std::pair<int64_t, std::string> MostPerBuyer(const OnSaleHerd& herd) {
  std::pair<int64_t, std::string> most{0, ""};
  for (const auto& [user, grants] : herd.by_user) {
    const int64_t units = testing::MostLiveAtOnce(grants).second;
    if (units > most.first) most = {units, user};
  }
  return most;
}

// The on-sale of the issue: capacity 100, 4 per person held + bought, payments, cancellations,
// expiries and refunds racing over two replicas: never more than 100 held + sold at once, no buyer
// ever above 4 held + owned, and the sold count is the paid units minus the returned ones.
TEST_P(ScopeRulesE2eTest, AnOnSaleHerdNeverPassesTheCapacityNorABuyersPurchaseCap) {
  v1::ScopeRule rule;
  rule.set_scope(kScope);
  rule.set_capacity_units(100);
  rule.set_max_purchased_units(4);
  v1::ScopeRule written;
  ASSERT_TRUE(Put(0, rule, &written).ok());
  const OnSaleHerd herd = RunOnSaleHerd(*this);
  EXPECT_EQ(herd.other, 0) << herd.first_other;
  const int64_t most = testing::MostLiveAtOnce(herd.grants).second;
  const auto [most_buyer, buyer] = MostPerBuyer(herd);
  EXPECT_LE(most, 100);
  EXPECT_LE(most_buyer, 4) << buyer;
  EXPECT_GT(herd.refusals.count("USER_PURCHASE_LIMIT"), 0u);
  v1::GetScopeUsageRequest usage_request;
  usage_request.set_scope(kScope);
  v1::GetScopeUsageResponse usage;
  grpc::ClientContext usage_context;
  ASSERT_TRUE(stubs_[1]->GetScopeUsage(Deadline(&usage_context), usage_request, &usage).ok());
  EXPECT_GT(herd.returns, 0);
  EXPECT_EQ(usage.sold_units(), static_cast<uint32_t>(herd.paid_units - herd.returned_units));
  EXPECT_EQ(usage.capacity_units(), 100u);
  std::cout << "on-sale herd: " << herd.grants.size() << " grants, " << herd.paid_units
            << " units paid, " << herd.returned_units << " returned in " << herd.returns
            << " refunds, most held + sold at once " << most << " of 100, most per buyer "
            << most_buyer << " of 4; refusals:";
  for (const auto& [reason, count] : herd.refusals) std::cout << " " << reason << " " << count;
  std::cout << "\n";
}

// The negative control: the same herd without the purchase cap lets the eager buyers own more
// than 4, and the per-buyer oracle sees it.
TEST_P(ScopeRulesE2eTest, WithoutAPurchaseCapEagerBuyersOwnMoreAndTheOracleSeesIt) {
  v1::ScopeRule rule;
  rule.set_scope(kScope);
  rule.set_capacity_units(100);
  v1::ScopeRule written;
  ASSERT_TRUE(Put(0, rule, &written).ok());
  const OnSaleHerd herd = RunOnSaleHerd(*this);
  const auto [most_buyer, buyer] = MostPerBuyer(herd);
  EXPECT_GT(most_buyer, 4);
  std::cout << "without a purchase cap: " << buyer << " held + owned " << most_buyer
            << " at once\n";
}

INSTANTIATE_TEST_SUITE_P(Redis, ScopeRulesE2eTest, ::testing::Values("standalone", "sentinel"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace orderhold
