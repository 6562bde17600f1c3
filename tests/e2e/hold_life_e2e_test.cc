// A hold's life end to end (ExtendHold, ReleaseHolds): two replicas (Apps) on one real
// redis-server, called over real gRPC channels with the generated stubs, racing what a ticketing
// backend races in production.
//   - ExtendHold aimed within +-2 ms of each hold's own expiry, with the reaper on and off: every
//     hold ends up either extended (and then payable, and paid) or EXPIRED, with exactly one event
//     in the stream either way, never both and never neither; no extension passes
//     max_expire_time; a repeated request_id never counts twice.
//   - ReleaseHolds racing PlaceHold in the same scope: each placed order is either released (one
//     CANCELLED event) or live afterwards and counted; the user's limit stays exact.
// The events are read from the partitions' streams in Redis (what the scripts appended), not
// through a watch: the count per order is the contract here.
#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "orderhold/v1/orderhold.grpc.pb.h"
#include "server/app.h"
#include "server/store/keys.h"
#include "tests/testing/parsed_redis_url.h"
#include "tests/testing/redis_server.h"
#include "tests/testing/status_matchers.h"

namespace orderhold {
namespace {

using ::orderhold::testing::IsOk;
using ::orderhold::testing::ParsedRedisUrl;
using ::orderhold::testing::RedisServer;
using ::testing::HasSubstr;

constexpr absl::Duration kLifetime = absl::Seconds(4);

absl::Time FromProto(const google::protobuf::Timestamp& t) {
  return absl::FromUnixSeconds(t.seconds()) + absl::Nanoseconds(t.nanos());
}

class HoldLifeE2eTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_OK_AND_ASSIGN(redis_, RedisServer::Start()); }
  void TearDown() override { apps_.clear(); }

  // Two replicas on the fixture's Redis: max_holds `max_holds`, lifetime cap kLifetime, one
  // extension per hold; with `reaper`, both reap every 10 ms.
  void StartReplicas(bool reaper, int max_holds = 3) {
    for (int i = 0; i < 2; ++i) {
      Config config;
      config.grpc_address = "127.0.0.1:0";
      config.redis_url = ParsedRedisUrl(redis_->url());
      config.run_reaper = reaper;
      config.reap_interval = absl::Milliseconds(10);
      config.health_check_interval = absl::Milliseconds(50);
      config.policy.max_holds = max_holds;
      config.policy.max_hold_lifetime = kLifetime;
      config.policy.max_extensions = 1;
      registries_.push_back(std::make_unique<prometheus::Registry>());
      auto app = App::Start(config, *registries_.back());
      ASSERT_THAT(app, IsOk());
      stubs_.push_back(v1::OrderHold::NewStub(grpc::CreateChannel(
          absl::StrCat("127.0.0.1:", (*app)->grpc_port()), grpc::InsecureChannelCredentials())));
      apps_.push_back(*std::move(app));
    }
  }

  static std::unique_ptr<grpc::ClientContext> Context() {
    auto context = std::make_unique<grpc::ClientContext>();
    context->set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
    return context;
  }

  // Every event in the partitions' streams, as "user|order|outcome" -> how many.
  std::map<std::string, int> Events() {
    store::KeySchema keys("orderhold");
    std::vector<std::string> args = {"EVAL",
                                     "local out = {} "
                                     "for _, key in ipairs(KEYS) do "
                                     "  for _, e in ipairs(redis.call('XRANGE', key, '-', '+')) do "
                                     "    local f = {} "
                                     "    for i = 1, #e[2], 2 do f[e[2][i]] = e[2][i + 1] end "
                                     "    out[#out + 1] = f.u .. '|' .. f.o .. '|' .. f.x "
                                     "  end "
                                     "end "
                                     "return out",
                                     absl::StrCat(store::KeySchema::kPartitionCount)};
    for (int p = 0; p < store::KeySchema::kPartitionCount; ++p) args.push_back(keys.EventsKey(p));
    absl::StatusOr<std::string> reply = redis_->Command(args);
    EXPECT_THAT(reply, IsOk());
    std::map<std::string, int> events;
    if (!reply.ok() || reply->empty()) return events;
    for (absl::string_view line : absl::StrSplit(*reply, '\n')) ++events[std::string(line)];
    return events;
  }

  // One hold per user, each extended once at its own expiry +-2 ms: see the file comment.
  void RaceExtensionsWithExpiry(int holds) {
    struct Hold {
      std::string user, order;
      absl::Time place, expire, target;
      bool extended = false, expired = false;
    };
    std::vector<Hold> all(holds);
    // Placed from 4 threads, with ttls spread so that expiries fall over ~2 s.
    std::atomic<int> next{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&] {
        for (int i = next++; i < holds; i = next++) {
          Hold& h = all[i];
          h.user = absl::StrCat("user-", i);
          h.order = absl::StrCat("order-", i);
          v1::PlaceHoldRequest request;
          request.set_user_id(h.user);
          request.set_order_id(h.order);
          const int ttl_ms = 400 + (i * 37) % 2000;
          request.mutable_ttl()->set_seconds(ttl_ms / 1000);
          request.mutable_ttl()->set_nanos((ttl_ms % 1000) * 1000000);
          v1::PlaceHoldResponse response;
          grpc::Status status = stubs_[i % 2]->PlaceHold(Context().get(), request, &response);
          ASSERT_TRUE(status.ok()) << status.error_message();
          h.place = FromProto(response.hold().place_time());
          h.expire = FromProto(response.hold().expire_time());
          EXPECT_EQ(FromProto(response.hold().max_expire_time()), h.place + kLifetime);
          // Redis runs on this host: its clock is ours. Aim at expire -2, -1, 0, +1, +2 ms.
          h.target = h.expire + absl::Milliseconds((i * 7) % 5 - 2);
        }
      });
    }
    for (std::thread& t : threads) t.join();
    threads.clear();
    std::vector<int> order(holds);
    for (int i = 0; i < holds; ++i) order[i] = i;
    std::sort(order.begin(), order.end(),
              [&](int a, int b) { return all[a].target < all[b].target; });

    absl::Mutex mu;
    std::vector<std::string> failures;
    auto fail = [&](std::string what) {
      absl::MutexLock lock(&mu);
      failures.push_back(std::move(what));
    };
    next = 0;
    for (int t = 0; t < 8; ++t) {
      threads.emplace_back([&] {
        for (int k = next++; k < holds; k = next++) {
          const int i = order[k];
          Hold& h = all[i];
          absl::SleepFor(h.target - absl::Now());
          v1::ExtendHoldRequest request;
          request.set_user_id(h.user);
          request.set_order_id(h.order);
          request.mutable_ttl()->set_seconds(2);
          request.set_request_id(absl::StrCat("pay-", i));
          v1::ExtendHoldResponse response;
          grpc::Status status = stubs_[i % 2]->ExtendHold(Context().get(), request, &response);
          if (status.error_code() == grpc::StatusCode::FAILED_PRECONDITION) {
            if (status.error_message().find("EXPIRED at") == std::string::npos) {
              fail(absl::StrCat(h.order, ": ", status.error_message()));
            }
            h.expired = true;
            // Pay agrees: the hold ended EXPIRED, whoever ended it.
            v1::PayRequest pay;
            pay.set_user_id(h.user);
            pay.set_order_id(h.order);
            v1::PayResponse paid;
            grpc::Status pay_status = stubs_[1 - i % 2]->Pay(Context().get(), pay, &paid);
            if (pay_status.error_code() != grpc::StatusCode::FAILED_PRECONDITION ||
                pay_status.error_message().find("EXPIRED at") == std::string::npos) {
              fail(absl::StrCat(h.order,
                                ": Pay after an EXPIRED extend: ", pay_status.error_message()));
            }
            continue;
          }
          if (!status.ok() || !response.extended()) {
            fail(absl::StrCat(h.order, ": extend: ", status.error_code(), " ",
                              status.error_message(), " extended=", response.extended()));
            continue;
          }
          h.extended = true;
          const absl::Time expire = FromProto(response.hold().expire_time());
          const absl::Time cap = FromProto(response.hold().max_expire_time());
          if (expire > cap || cap != h.place + kLifetime || response.hold().extensions() != 1) {
            fail(absl::StrCat(h.order, ": extended past its cap or miscounted"));
          }
          // The same request again, on the other replica: never counted twice (max_extensions
          // is 1: a second count would be refused).
          v1::ExtendHoldResponse again;
          grpc::Status retry = stubs_[1 - i % 2]->ExtendHold(Context().get(), request, &again);
          if (!retry.ok() || !again.extended() || again.hold().extensions() != 1 ||
              !again.has_extensions_left() || again.extensions_left() != 0 ||
              FromProto(again.hold().expire_time()) != expire) {
            fail(absl::StrCat(h.order, ": retry of the same request_id: ", retry.error_message(),
                              " extensions=", again.hold().extensions()));
          }
          v1::PayRequest pay;
          pay.set_user_id(h.user);
          pay.set_order_id(h.order);
          v1::PayResponse paid;
          grpc::Status pay_status = stubs_[i % 2]->Pay(Context().get(), pay, &paid);
          if (!pay_status.ok() || paid.already_paid()) {
            fail(absl::StrCat(h.order, ": Pay after extending: ", pay_status.error_message()));
          }
        }
      });
    }
    for (std::thread& t : threads) t.join();
    EXPECT_THAT(failures, ::testing::IsEmpty());

    // Every hold ended exactly one way, with exactly one event.
    std::map<std::string, int> events;
    int extended = 0, expired = 0;
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    for (;;) {
      events = Events();
      if (static_cast<int>(events.size()) >= holds || absl::Now() > deadline) break;
      absl::SleepFor(absl::Milliseconds(20));
    }
    for (const Hold& h : all) {
      EXPECT_NE(h.extended, h.expired) << h.order;
      extended += h.extended;
      expired += h.expired;
      const std::string key = absl::StrCat(h.user, "|", h.order, "|");
      const int paid_events = events[absl::StrCat(key, "1")];
      const int expired_events = events[absl::StrCat(key, "3")];
      EXPECT_EQ(paid_events, h.extended ? 1 : 0) << h.order;
      EXPECT_EQ(expired_events, h.expired ? 1 : 0) << h.order;
    }
    std::cout << "extend at expiry +-2 ms over " << holds << " holds: " << extended
              << " extended and paid, " << expired << " EXPIRED" << std::endl;
  }

  std::unique_ptr<RedisServer> redis_;
  std::vector<std::unique_ptr<prometheus::Registry>> registries_;
  std::vector<std::unique_ptr<App>> apps_;
  std::vector<std::unique_ptr<v1::OrderHold::Stub>> stubs_;
};

TEST_F(HoldLifeE2eTest, ExtendRacingExpiryWithTheReaperOffEndsEachHoldOneWayOnce) {
  StartReplicas(/*reaper=*/false);
  RaceExtensionsWithExpiry(1000);
}

TEST_F(HoldLifeE2eTest, ExtendRacingExpiryWithTheReaperOnEndsEachHoldOneWayOnce) {
  StartReplicas(/*reaper=*/true);
  RaceExtensionsWithExpiry(1000);
}

// 100 rounds, one user each: two holds in scope "event:A" are live; then PlaceHold of two more
// orders in that scope races ReleaseHolds of the scope on the other replica.
TEST_F(HoldLifeE2eTest, ReleaseHoldsRacingPlaceHoldReleasesOrCountsEachOrder) {
  StartReplicas(/*reaper=*/false, /*max_holds=*/3);
  auto place = [&](int replica, const std::string& user, const std::string& order) {
    v1::PlaceHoldRequest request;
    request.set_user_id(user);
    request.set_order_id(order);
    request.set_scope("event:A");
    v1::PlaceHoldResponse response;
    grpc::Status status = stubs_[replica]->PlaceHold(Context().get(), request, &response);
    return std::make_pair(status, response);
  };
  for (int round = 0; round < 100; ++round) {
    const std::string user = absl::StrCat("releaser-", round);
    ASSERT_TRUE(place(0, user, "pre-1").first.ok());
    ASSERT_TRUE(place(1, user, "pre-2").first.ok());
    std::set<std::string> created;
    v1::ReleaseHoldsResponse released;
    grpc::Status release_status;
    std::thread placer([&] {
      for (const char* order : {"new-1", "new-2"}) {
        auto [status, response] = place(round % 2, user, order);
        if (status.ok() && response.created()) created.insert(order);
        // Else: the user had 3 live holds (RESOURCE_EXHAUSTED), which the release may not yet
        // have freed.
        EXPECT_TRUE(status.ok() || status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED)
            << status.error_message();
      }
    });
    std::thread releaser([&] {
      v1::ReleaseHoldsRequest request;
      request.set_user_id(user);
      request.set_scope("event:A");
      release_status = stubs_[1 - round % 2]->ReleaseHolds(Context().get(), request, &released);
    });
    placer.join();
    releaser.join();
    ASSERT_TRUE(release_status.ok()) << release_status.error_message();
    std::set<std::string> released_orders;
    for (const v1::Hold& hold : released.holds()) released_orders.insert(hold.order_id());
    EXPECT_TRUE(released_orders.count("pre-1") && released_orders.count("pre-2")) << round;
    v1::ListHoldsRequest list_request;
    list_request.set_user_id(user);
    v1::ListHoldsResponse listed;
    ASSERT_TRUE(stubs_[0]->ListHolds(Context().get(), list_request, &listed).ok());
    std::set<std::string> live;
    for (const v1::Hold& hold : listed.holds()) live.insert(hold.order_id());
    EXPECT_LE(live.size(), 3u);
    const std::map<std::string, int> events = Events();
    for (const std::string& order : created) {
      // Released (with one CANCELLED event) or live and counted: exactly one.
      const bool was_released = released_orders.count(order) > 0;
      EXPECT_NE(was_released, live.count(order) > 0) << round << " " << order;
      auto it = events.find(absl::StrCat(user, "|", order, "|2"));
      EXPECT_EQ(it == events.end() ? 0 : it->second, was_released ? 1 : 0) << round << order;
    }
    for (const std::string& order : released_orders) {
      EXPECT_TRUE(order.rfind("pre-", 0) == 0 || created.count(order)) << order;
    }
    // Live holds are exactly the created ones not released.
    std::set<std::string> expected_live;
    for (const std::string& order : created) {
      if (!released_orders.count(order)) expected_live.insert(order);
    }
    EXPECT_EQ(live, expected_live) << round;
  }
}

}  // namespace
}  // namespace orderhold
