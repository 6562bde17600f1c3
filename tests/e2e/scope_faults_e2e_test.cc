// The scope protocol's crash points on a Redis Cluster (3 primaries with a replica each, WAIT 1),
// with the real orderhold-server binary: a victim server is killed (SIGKILL) or stopped (SIGSTOP)
// by its own test hook right after one step of the protocol (ORDERHOLD_TESTING_SCOPE_STEP_SIGNAL,
// server/app.cc), and a survivor server's sweep must give the scope's place back within the bound
// server/README.md "Scope totals" states, never granting over the total (1 hold) meanwhile. Each
// case runs ORDERHOLD_FAULT_REPEATS times (3 by default; more on demand) and prints the
// distribution of the time until the place came back. The negative control runs the same kill
// with a survivor whose sweep waits far longer (--scope_pending_age=60s): the place is then not
// back within the bound, which shows the measurement can fail.
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iostream>
#include <iterator>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "orderhold/v1/orderhold.grpc.pb.h"
#include "server/store/keys.h"
#include "tests/testing/eventually.h"
#include "tests/testing/live_intervals.h"
#include "tests/testing/os_util.h"
#include "tests/testing/redis_cluster.h"
#include "tests/testing/server_process.h"
#include "tests/testing/status_matchers.h"

namespace orderhold {
namespace {

constexpr absl::Duration kBound = absl::Seconds(7);  // the issue's bound on a place held by a crash

int Repeats() {
  const char* value = std::getenv("ORDERHOLD_FAULT_REPEATS");
  return value != nullptr && std::atoi(value) > 0 ? std::atoi(value) : 3;
}

class ScopeFaultsE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::RedisClusterOptions options;
    options.primaries = 3;
    options.replicas_per_primary = 1;
    ASSERT_OK_AND_ASSIGN(cluster_, testing::RedisCluster::Start(options));
    ASSERT_OK_AND_ASSIGN(dir_, testing::MakeTempDir("scope-faults"));
    limits_ = absl::StrCat(dir_, "/limits.json");
    std::ofstream(limits_) << R"({"rules": [{"prefix": "event:", "total_max_holds": 1},
                                            {"prefix": "herd:", "total_max_holds": 20}]})";
  }

  // A server on the cluster, as the kit starts one (its flags), with `env` added.
  std::unique_ptr<testing::ServerProcess> StartServer(
      std::vector<std::string> extra = {},
      std::vector<std::pair<std::string, std::string>> env = {}) {
    auto server = std::make_unique<testing::ServerProcess>(ORDERHOLD_SERVER_BINARY);
    std::vector<std::string> args = {"--grpc_address=127.0.0.1:0",
                                     "--metrics_address=127.0.0.1:0",
                                     "--redis_mode=cluster",
                                     absl::StrCat("--redis_url=", cluster_->SeedUrl()),
                                     "--redis_wait_replicas=1",
                                     "--reap_interval=1s",
                                     absl::StrCat("--scope_limits=", limits_)};
    args.insert(args.end(), extra.begin(), extra.end());
    server->Start(args, env);
    EXPECT_TRUE(server->WaitServing()) << server->log();
    return server;
  }

  static std::unique_ptr<v1::OrderHold::Stub> StubOf(const testing::ServerProcess& server) {
    return v1::OrderHold::NewStub(grpc::CreateChannel(
        absl::StrCat("127.0.0.1:", server.grpc_port()), grpc::InsecureChannelCredentials()));
  }

  static grpc::Status Place(v1::OrderHold::Stub& stub, const std::string& user,
                            const std::string& scope, absl::Duration deadline = absl::Seconds(5)) {
    v1::PlaceHoldRequest request;
    request.set_user_id(user);
    request.set_order_id("o-1");
    request.set_scope(scope);
    request.mutable_ttl()->set_seconds(30);
    v1::PlaceHoldResponse response;
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + deadline));
    return stub.PlaceHold(&context, request, &response);
  }

  static grpc::Status Pay(v1::OrderHold::Stub& stub, const std::string& user,
                          const std::string& order = "o-1") {
    v1::PayRequest request;
    request.set_user_id(user);
    request.set_order_id(order);
    v1::PayResponse response;
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
    return stub.Pay(&context, request, &response);
  }

  static int LiveHolds(v1::OrderHold::Stub& stub, const std::string& user) {
    v1::ListHoldsRequest request;
    request.set_user_id(user);
    v1::ListHoldsResponse response;
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
    return stub.ListHolds(&context, request, &response).ok() ? response.holds_size() : -1;
  }

  // Places for `user` in `scope` through `stub` every 100 ms until one is created or `limit`
  // passes; yields the time it took from `since`, or nullopt. Each refusal must be the total's.
  static std::optional<absl::Duration> PlaceBack(v1::OrderHold::Stub& stub, const std::string& user,
                                                 const std::string& scope, absl::Time since,
                                                 absl::Duration limit) {
    while (absl::Now() - since < limit) {
      const grpc::Status status = Place(stub, user, scope);
      if (status.ok()) return absl::Now() - since;
      EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
          << status.error_message();
      absl::SleepFor(absl::Milliseconds(100));
    }
    return std::nullopt;
  }

  static void Print(const std::string& what, std::vector<absl::Duration> times) {
    std::sort(times.begin(), times.end());
    std::vector<std::string> shown;
    for (absl::Duration t : times)
      shown.push_back(absl::FormatDuration(absl::Trunc(t, absl::Milliseconds(10))));
    std::cout << "  " << what << ": " << absl::StrJoin(shown, ", ") << "\n";
  }

  // One kill after `step` of a place through a victim, then the survivor's wait for the place:
  // the time it took (nullopt past `limit`). `survivor_flags` go to the survivor.
  std::optional<absl::Duration> KillAfter(const std::string& step, const std::string& scope,
                                          absl::Duration limit,
                                          std::vector<std::string> survivor_flags = {}) {
    auto survivor = StartServer(std::move(survivor_flags));
    auto victim = StartServer({}, {{"ORDERHOLD_TESTING_SCOPE_STEP_SIGNAL", step + ":KILL"}});
    auto victim_stub = StubOf(*victim);
    auto survivor_stub = StubOf(*survivor);
    const std::string user = absl::StrCat("victim-", scope);
    if (step == "end") {
      EXPECT_TRUE(Place(*victim_stub, user, scope).ok());
      EXPECT_FALSE(Pay(*victim_stub, user).ok());  // killed before it answered
    } else {
      Place(*victim_stub, user, scope);  // answered or not: killed right after the step
    }
    EXPECT_EQ(victim->Wait(), 128 + SIGKILL) << victim->log();
    const absl::Time killed = absl::Now();
    std::optional<absl::Duration> back =
        PlaceBack(*survivor_stub, absl::StrCat("other-", scope), scope, killed, limit);
    // Never over: with the victim's hold live (a kill after the place), the other's place waits
    // for the victim's hold to end.
    if (step == "place") {
      EXPECT_FALSE(back.has_value()) << "granted over the total";
    } else {
      EXPECT_EQ(LiveHolds(*survivor_stub, user), 0);
    }
    return back;
  }

  // A herd of 8 client threads over `stubs`: 500 users place holds in `scope` until `stop`, half
  // of them long (10 s, kept) and half short (1 s, paid at once), so places come back all the
  // time and a take lost in a failover leaves a long hold without its entry well past the
  // failover (a paid hold's drop lost with it brings back an entry that lapses within 1 s).
  // Yields every grant as the client saw it.
  static std::vector<testing::Grant> Herd(
      const std::vector<std::unique_ptr<v1::OrderHold::Stub>>& stubs, const std::string& scope,
      std::atomic<bool>& stop, std::atomic<int>* failed = nullptr) {
    absl::Mutex mu;
    std::vector<testing::Grant> grants;
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t) {
      threads.emplace_back([&, t] {
        std::mt19937 random(static_cast<uint32_t>(t));
        for (int i = 0; !stop.load(); ++i) {
          v1::OrderHold::Stub& stub = *stubs[static_cast<size_t>(i) % stubs.size()];
          const std::string user = absl::StrCat("buyer-", random() % 500);
          v1::PlaceHoldRequest request;
          request.set_user_id(user);
          request.set_order_id(absl::StrCat("o-", t, "-", i));
          request.set_scope(scope);
          const bool keep = random() % 2 == 0;
          request.mutable_ttl()->set_seconds(keep ? 10 : 1);
          v1::PlaceHoldResponse response;
          grpc::ClientContext context;
          context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
          const grpc::Status status = stub.PlaceHold(&context, request, &response);
          const bool error = status.error_code() == grpc::StatusCode::UNAVAILABLE ||
                             status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
          if (error && failed != nullptr && failed->fetch_add(1) % 100 == 0) {
            std::cout << "  a PlaceHold failed: " << status.error_code() << " "
                      << status.error_message() << "\n";
          }
          if (!status.ok() || !response.created()) {
            absl::SleepFor(absl::Milliseconds(5));
            continue;
          }
          testing::Grant grant{absl::Now(),
                               absl::FromUnixSeconds(response.hold().expire_time().seconds()) +
                                   absl::Nanoseconds(response.hold().expire_time().nanos())};
          if (!keep) {
            grant.to = std::min(grant.to, absl::Now());  // the Pay is sent now
            Pay(stub, user, request.order_id());
          }
          absl::MutexLock lock(&mu);
          grants.push_back(grant);
        }
      });
    }
    for (std::thread& thread : threads) thread.join();
    return grants;
  }

  // Kills (SIGKILL) the primary serving `key`'s slot, or with `other` a primary that does not, and
  // brings it back as a replica once its replica took over; yields how long the slot had no
  // primary (from the kill to the promotion seen).
  // With `lag`, the victim's replica is paused for 2 s first, its link cut, and resumed right
  // after the kill: what the primary acknowledged meanwhile without WAIT is lost in the failover
  // (on one host replication is too fast for a kill alone to lose an acknowledged write).
  // `while_lagging` runs during the pause (instead of a 2 s sleep).
  absl::Duration KillPrimary(const std::string& key, bool other, bool lag = false,
                             const std::function<void()>& while_lagging = nullptr) {
    absl::StatusOr<int> slot = cluster_->KeySlot(key);
    EXPECT_TRUE(slot.ok()) << slot.status();
    absl::StatusOr<int> owner = cluster_->PrimaryFor(*slot);
    EXPECT_TRUE(owner.ok()) << owner.status();
    int victim = *owner, victim_slot = *slot;
    for (int probe = 0; other && probe < testing::kClusterSlots; probe += 97) {
      absl::StatusOr<int> node = cluster_->PrimaryFor(probe);
      if (node.ok() && *node != *owner) {
        victim = *node;
        victim_slot = probe;
        break;
      }
    }
    int replica = -1;
    for (int i = 0; lag && i < cluster_->node_count(); ++i) {
      absl::StatusOr<std::string> role = cluster_->Command(i, {"ROLE"});
      if (i != victim && role.ok() && absl::StartsWith(*role, "slave") &&
          absl::StrContains(*role, absl::StrCat("\n", cluster_->node(victim).port(), "\n"))) {
        replica = i;
      }
    }
    if (replica >= 0) {
      // Stopped, and its link cut from the primary's side: what the primary writes now reaches
      // no replica (a stopped replica alone still reads its socket's buffer once resumed).
      EXPECT_TRUE(cluster_->node(replica).Pause().ok());
      EXPECT_TRUE(cluster_->Command(victim, {"CLIENT", "KILL", "TYPE", "replica"}).ok());
      if (while_lagging) {
        while_lagging();
      } else {
        absl::SleepFor(absl::Seconds(2));
      }
    }
    EXPECT_TRUE(cluster_->node(victim).Crash().ok());
    if (replica >= 0) {
      EXPECT_TRUE(cluster_->node(replica).Resume().ok());
    }
    const absl::Time killed = absl::Now();
    EXPECT_TRUE(testing::Eventually(
        [&] {
          absl::StatusOr<int> now = cluster_->PrimaryFor(victim_slot);
          return now.ok() && *now != victim;
        },
        absl::Seconds(30), absl::Milliseconds(50)));
    const absl::Duration promoted = absl::Now() - killed;
    EXPECT_TRUE(cluster_->node(victim).Restart().ok());
    EXPECT_TRUE(cluster_->WaitForReady(absl::Seconds(30)).ok());
    return promoted;
  }

  // The herd over two servers, `kills` kills of a primary (the scope's, or another), then the
  // checks: never more than the total (20) live at once, and every place free again within 10 s
  // of the herd's last hold's end.
  // Takes acknowledged and then lost in a failover: the scope's primary's replica is paused, 20
  // holds are asked for (total 20), the primary is killed and the stale replica promoted, then 20
  // more are asked for. With `wait` (WAIT 1) the first 20 takes were never acknowledged
  // (UNAVAILABLE: their places never sent), so at most 20 holds live; without (the negative
  // control) they were, their holds live on in the users' slots without entries, and the second
  // 20 pass too. Yields the live holds of the 40 users.
  int LiveAfterLostTakes(bool wait) {
    std::vector<std::string> flags = {"--scope_clock_margin=0s"};
    std::vector<std::pair<std::string, std::string>> env;
    if (!wait) {
      flags.push_back("--redis_wait_replicas=0");
      env.emplace_back("ORDERHOLD_TESTING_TOTALS_WITHOUT_WAIT", "1");
    }
    auto server = StartServer(flags, env);
    auto stub = StubOf(*server);
    const std::string scope = "herd:lost-takes";
    const std::string key = store::KeySchema("orderhold").ScopeLiveKey(scope);
    auto place_all = [&](const std::string& prefix) {
      int ok = 0;
      for (int i = 0; i < 20; ++i) {
        v1::PlaceHoldRequest request;
        request.set_user_id(absl::StrCat(prefix, i));
        request.set_order_id("o-1");
        request.set_scope(scope);
        request.mutable_ttl()->set_seconds(120);
        v1::PlaceHoldResponse response;
        grpc::ClientContext context;
        context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
        ok += stub->PlaceHold(&context, request, &response).ok() ? 1 : 0;
      }
      return ok;
    };
    int first = 0;
    KillPrimary(key, /*other=*/false, /*lag=*/true, [&] { first = place_all("first-"); });
    const int second = place_all("second-");
    int live = 0;
    for (const char* prefix : {"first-", "second-"}) {
      for (int i = 0; i < 20; ++i) live += std::max(0, LiveHolds(*stub, absl::StrCat(prefix, i)));
    }
    std::cout << "  paused replica, then kill: " << first << " placed before the kill, " << second
              << " after, " << live << " live of a total of 20\n";
    return live;
  }

  // The oracle over Redis itself: at one instant t0 of the scope node's clock, the scope's index
  // entry by entry (ZRANGE WITHSCORES on its slot's primary) against the live holds of `users`
  // in their own slots (ListHolds), with no clock margin. It lists what breaks the invariants of
  // server/README.md "Scope totals" once the sweep has run: a live hold without its entry, or
  // whose entry ends before it (a place over the total could follow); an entry that ends after
  // its hold, or that has no live hold (a place kept past its bound). Holds and entries ending
  // within 2 s of t0 are left out on both sides: the reads take less. *compared counts the live
  // holds checked.
  std::vector<std::string> OracleProblems(v1::OrderHold::Stub& stub, const std::string& scope,
                                          const std::vector<std::string>& users, int* compared) {
    std::vector<std::string> problems;
    const std::string key = store::KeySchema("orderhold").ScopeLiveKey(scope);
    absl::StatusOr<int> slot = cluster_->KeySlot(key);
    absl::StatusOr<int> node = slot.ok() ? cluster_->PrimaryFor(*slot) : slot.status();
    absl::StatusOr<std::string> time =
        node.ok() ? cluster_->Command(*node, {"TIME"}) : node.status();
    absl::StatusOr<std::string> index =
        time.ok() ? cluster_->Command(*node, {"ZRANGE", key, "0", "-1", "WITHSCORES"})
                  : time.status();
    if (!index.ok()) return {absl::StrCat("cannot read the index: ", index.status().ToString())};
    const std::vector<std::string> clock = absl::StrSplit(*time, '\n');
    int64_t seconds = 0, micros = 0;
    if (clock.size() != 2 || !absl::SimpleAtoi(clock[0], &seconds) ||
        !absl::SimpleAtoi(clock[1], &micros)) {
      return {absl::StrCat("TIME answered ", *time)};
    }
    const int64_t horizon = seconds * 1000 + micros / 1000 + 2000;
    std::map<std::string, int64_t> entries;  // "<user>/<order>" -> the entry's end, Unix ms
    const std::vector<std::string> flat = absl::StrSplit(*index, '\n', absl::SkipEmpty());
    for (size_t i = 0; i + 1 < flat.size(); i += 2) {
      const size_t colon = flat[i].find(':'), zero = flat[i].find('\0');
      int64_t score = 0;
      if (colon == std::string::npos || zero == std::string::npos ||
          !absl::SimpleAtoi(flat[i + 1], &score)) {
        problems.push_back(absl::StrCat("malformed entry ", absl::CHexEscape(flat[i])));
        continue;
      }
      if (score <= horizon) continue;
      entries[absl::StrCat(flat[i].substr(colon + 1, zero - colon - 1), "/",
                           flat[i].substr(zero + 1))] = score;
    }
    *compared = 0;
    for (const std::string& user : users) {
      v1::ListHoldsRequest request;
      request.set_user_id(user);
      v1::ListHoldsResponse response;
      grpc::ClientContext context;
      context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
      if (!stub.ListHolds(&context, request, &response).ok()) {
        problems.push_back(absl::StrCat("ListHolds failed for ", user));
        continue;
      }
      for (const v1::Hold& hold : response.holds()) {
        if (hold.scope() != scope) continue;
        const int64_t expire =
            hold.expire_time().seconds() * 1000 + hold.expire_time().nanos() / 1000000;
        if (expire <= horizon) continue;
        ++*compared;
        const std::string id = absl::StrCat(user, "/", hold.order_id());
        auto entry = entries.find(id);
        if (entry == entries.end()) {
          problems.push_back(absl::StrCat("live hold ", id, " has no entry"));
          continue;
        }
        if (entry->second != expire) {
          problems.push_back(
              absl::StrCat("entry of ", id, " ends at ", entry->second, ", its hold at ", expire));
        }
        entries.erase(entry);
      }
    }
    for (const auto& [id, score] : entries) {
      problems.push_back(absl::StrCat("entry ", id, " (until ", score, ") has no live hold"));
    }
    return problems;
  }

  // Yields the most holds live at once.
  int64_t HerdUnderKills(const std::string& scope, bool other_primary, int kills, bool lag,
                         std::vector<std::string> flags = {},
                         std::vector<std::pair<std::string, std::string>> env = {}) {
    const std::string key = store::KeySchema("orderhold").ScopeLiveKey(scope);
    return HerdUnderFaults(
        scope, kills, [&] { return KillPrimary(key, other_primary, lag); },
        absl::StrCat(other_primary ? "another primary" : "the scope's primary", " killed ", kills,
                     " times: replica promoted after"),
        std::move(flags), std::move(env));
  }

  // The herd over two servers with `faults` calls of `fault` (each yields how long its fault
  // lasted, printed after `what`), a second apart, then the checks: never more than the total
  // (20) live at once, the oracle over Redis finds nothing wrong, and every place is free again
  // within 10 s of the herd's last hold's end. Yields the most holds live at once.
  int64_t HerdUnderFaults(const std::string& scope, int faults,
                          const std::function<absl::Duration()>& fault, const std::string& what,
                          std::vector<std::string> flags = {},
                          std::vector<std::pair<std::string, std::string>> env = {}) {
    // One host's nodes share a clock: no margin, so that places come back as holds expire.
    flags.push_back("--scope_clock_margin=0s");
    auto a = StartServer(flags, env);
    auto b = StartServer(flags, env);
    std::vector<std::unique_ptr<v1::OrderHold::Stub>> stubs;
    stubs.push_back(StubOf(*a));
    stubs.push_back(StubOf(*b));
    std::atomic<bool> stop{false};
    std::atomic<int> failed{0};
    std::vector<testing::Grant> grants;
    std::thread herd([&] { grants = Herd(stubs, scope, stop, &failed); });
    std::vector<absl::Duration> durations;
    for (int k = 0; k < faults; ++k) {
      absl::SleepFor(absl::Seconds(1));
      durations.push_back(fault());
    }
    absl::SleepFor(absl::Seconds(1));
    stop = true;
    herd.join();
    // The oracle over Redis, once the sweep ran (pending age 3 s + a tick): long holds of the
    // herd's last seconds are still live.
    absl::SleepFor(absl::Seconds(5));
    int compared = 0;
    std::vector<std::string> users;
    for (int u = 0; u < 500; ++u) users.push_back(absl::StrCat("buyer-", u));
    const std::vector<std::string> problems = OracleProblems(*stubs[0], scope, users, &compared);
    if (env.empty()) {
      EXPECT_THAT(problems, ::testing::IsEmpty());
      EXPECT_GT(compared, 0) << "the oracle compared nothing";
    }
    const int64_t most = testing::MostLiveAtOnce(grants).first;
    if (env.empty()) {
      EXPECT_LE(most, 20) << "granted over the total";
    }
    absl::Time last_end = absl::InfinitePast();
    for (const testing::Grant& grant : grants) last_end = std::max(last_end, grant.to);
    // Every place back: the scope's usage reaches 0 within 10 s of the last hold's end.
    bool empty = testing::Eventually(
        [&] {
          v1::GetScopeUsageRequest request;
          request.set_scope(scope);
          v1::GetScopeUsageResponse response;
          grpc::ClientContext context;
          context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(2)));
          return stubs[1]->GetScopeUsage(&context, request, &response).ok() &&
                 response.usage().holds() == 0;
        },
        std::max(absl::ZeroDuration(), last_end + absl::Seconds(10) - absl::Now()),
        absl::Milliseconds(100));
    EXPECT_TRUE(empty) << "a place stayed taken more than 10 s past the last hold's end";
    Print(what, durations);
    redirects_ = {0, 0};
    for (const auto* server : {a.get(), b.get()}) {
      redirects_.first +=
          std::max(0.0, testing::ScrapedValue(server->metrics_port(),
                                              R"(orderhold_redis_redirects_total{kind="moved"})"));
      redirects_.second +=
          std::max(0.0, testing::ScrapedValue(server->metrics_port(),
                                              R"(orderhold_redis_redirects_total{kind="ask"})"));
    }
    std::cout << "  redirects followed by the two servers: " << redirects_.first << " MOVED, "
              << redirects_.second << " ASK\n";
    std::cout << "  oracle over Redis: " << compared << " live holds each with its entry, "
              << problems.size() << " problems\n";
    std::cout << "  " << grants.size() << " grants, " << failed.load()
              << " PlaceHolds failed (UNAVAILABLE or deadline), most live at once " << most
              << " of 20; places free " << (empty ? "within" : "NOT within")
              << " 10 s of the last end\n";
    return most;
  }

  std::unique_ptr<testing::RedisCluster> cluster_;
  std::string dir_, limits_;
  std::pair<double, double> redirects_;  // the last HerdUnderFaults': MOVED and ASK followed
};

TEST_F(ScopeFaultsE2eTest, AServerKilledBetweenTakeAndPlaceGivesThePlaceBackWithinTheBound) {
  std::vector<absl::Duration> times;
  for (int i = 0; i < Repeats(); ++i) {
    std::optional<absl::Duration> back = KillAfter("take", absl::StrCat("event:take-", i), kBound);
    ASSERT_TRUE(back.has_value()) << "the place stayed taken past " << kBound;
    times.push_back(*back);
  }
  Print("kill between take and place: place back after", times);
}

TEST_F(ScopeFaultsE2eTest, AServerKilledBetweenAnEndAndItsDropGivesThePlaceBackWithinTheBound) {
  std::vector<absl::Duration> times;
  for (int i = 0; i < Repeats(); ++i) {
    std::optional<absl::Duration> back = KillAfter("end", absl::StrCat("event:end-", i), kBound);
    ASSERT_TRUE(back.has_value()) << "the place stayed taken past " << kBound;
    times.push_back(*back);
  }
  Print("kill between an end and its drop: place back after", times);
}

// Killed after the place answered, before the settle: the hold is live, its entry still at the
// take's bound; the sweep settles it to the hold's expiry, and no other place passes meanwhile.
TEST_F(ScopeFaultsE2eTest, AServerKilledBetweenPlaceAndSettleNeverGrantsOver) {
  for (int i = 0; i < Repeats(); ++i) {
    const std::string scope = absl::StrCat("event:place-", i);
    KillAfter("place", scope, absl::Seconds(5));
  }
}

// A server stopped right after its take, past two sweeps, then continued: the sweep fenced its
// take and gave the place to another; the stopped server's place is refused when it comes.
TEST_F(ScopeFaultsE2eTest, AServerStoppedPastTwoSweepsAfterItsTakeHasItsPlaceRefused) {
  auto survivor = StartServer();
  auto victim = StartServer({}, {{"ORDERHOLD_TESTING_SCOPE_STEP_SIGNAL", "take:STOP"}});
  auto survivor_stub = StubOf(*survivor);
  auto victim_stub = StubOf(*victim);
  const std::string scope = "event:stopped";
  grpc::Status late;
  // A deadline past the stop, so that the stopped server still sends its place step.
  std::thread placing(
      [&] { late = Place(*victim_stub, "stopped-user", scope, absl::Seconds(60)); });
  // The victim stops itself once its take answered (state "T" in /proc/<pid>/stat).
  ASSERT_TRUE(testing::Eventually([&] {
    std::ifstream file(absl::StrCat("/proc/", victim->pid(), "/stat"));
    const std::string stat((std::istreambuf_iterator<char>(file)),
                           std::istreambuf_iterator<char>());
    const size_t paren = stat.rfind(')');
    return paren != std::string::npos && stat.substr(paren + 2, 1) == "T";
  })) << victim->log();
  const absl::Time stopped = absl::Now();
  std::optional<absl::Duration> back =
      PlaceBack(*survivor_stub, "other-user", scope, stopped, kBound);
  ASSERT_TRUE(back.has_value()) << "the place stayed taken past " << kBound;
  absl::SleepFor(absl::Seconds(2));  // two more sweeps
  victim->Signal(SIGCONT);
  placing.join();
  EXPECT_EQ(late.error_code(), grpc::StatusCode::UNAVAILABLE) << late.error_message();
  EXPECT_EQ(LiveHolds(*survivor_stub, "stopped-user"), 0);
  EXPECT_EQ(LiveHolds(*survivor_stub, "other-user"), 1);
  std::cout << "  stopped after its take: the place came back after " << *back
            << "; the late place answered " << late.error_code() << " " << late.error_message()
            << "\n";
}

// kill -9 of the scope's primary under a herd (the take, settle and drop steps lose their node),
// its replica paused for the 2 s before so that what was not waited for is lost: never over,
// every place back within 10 s. CI runs 2 kills; ORDERHOLD_FAULT_REPEATS=30 the
// issue's 30.
TEST_F(ScopeFaultsE2eTest, KillingTheScopesPrimaryUnderAHerdNeverGrantsOver) {
  HerdUnderKills("herd:scope-primary", /*other_primary=*/false, std::max(2, Repeats() - 1),
                 /*lag=*/true);
}

// kill -9 of a primary that is not the scope's (users' slots lose their node) under a herd.
TEST_F(ScopeFaultsE2eTest, KillingAUsersPrimaryUnderAHerdNeverGrantsOver) {
  HerdUnderKills("herd:user-primary", /*other_primary=*/true, std::max(2, Repeats() - 1),
                 /*lag=*/true);
}

// The scope's slot moved between primaries under the herd, 4 times, 3 s apart (`redis-cli --cluster
// reshard`'s steps for one slot: IMPORTING, MIGRATING, MIGRATE key by key, SETSLOT NODE): every
// step of the protocol in that slot meets ASK and TRYAGAIN meanwhile. Never over, the oracle finds
// every live hold with its entry, every place back.
TEST_F(ScopeFaultsE2eTest, ReshardingTheScopesSlotUnderAHerdNeverGrantsOver) {
  const std::string scope = "herd:reshard";
  const std::string key = store::KeySchema("orderhold").ScopeLiveKey(scope);
  HerdUnderFaults(
      scope, 4,
      [&] {
        absl::StatusOr<int> slot = cluster_->KeySlot(key);
        absl::StatusOr<int> from = slot.ok() ? cluster_->PrimaryFor(*slot) : slot.status();
        EXPECT_TRUE(from.ok()) << from.status();
        const absl::Time start = absl::Now();
        if (from.ok()) {
          const absl::Status moved = cluster_->MigrateSlot(*slot, *from, (*from + 1) % 3);
          EXPECT_TRUE(moved.ok()) << moved;
        }
        const absl::Duration took = absl::Now() - start;
        // The herd goes on past the first holds' expiry (10 s), so that the oracle finds live
        // holds placed after the moves.
        absl::SleepFor(absl::Seconds(2));
        return took;
      },
      "the scope's slot moved 4 times: each migration took");
  EXPECT_GT(redirects_.first, 0) << "the servers never met the move";
}

TEST_F(ScopeFaultsE2eTest, TakesLostInAFailoverWereNeverAcknowledgedWithWait) {
  EXPECT_LE(LiveAfterLostTakes(/*wait=*/true), 20) << "granted over the total";
}

// The negative control: the same without WAIT grants over the total, which the test above exists
// to catch (and a Cluster server refuses totals without WAIT:
// ScopeTotalsClusterE2eTest.AFileWithTotalsIsRefusedOnARedisClusterWithoutWait).
TEST_F(ScopeFaultsE2eTest, WithoutWaitTakesLostInAFailoverGrantOverTheTotal) {
  EXPECT_GT(LiveAfterLostTakes(/*wait=*/false), 20);
}

// A take whose WAIT falls short (the scope primary's replica stopped, its link cut) answers
// UNAVAILABLE and is counted in orderhold_scope_wait_timeouts_total{step="take"}; the take ran, so
// its pending record shows in orderhold_scope_oldest_pending_take_seconds until the sweep fences
// and drops it, once the replica is back.
TEST_F(ScopeFaultsE2eTest, AStepWhoseWaitFallsShortIsCountedAndItsTakeSwept) {
  auto server = StartServer({"--redis_wait_timeout=200ms"});
  auto stub = StubOf(*server);
  const std::string scope = "event:wait";
  const std::string key = store::KeySchema("orderhold").ScopeLiveKey(scope);
  ASSERT_OK_AND_ASSIGN(int slot, cluster_->KeySlot(key));
  ASSERT_OK_AND_ASSIGN(int primary, cluster_->PrimaryFor(slot));
  int replica = -1;
  for (int i = 0; i < cluster_->node_count(); ++i) {
    absl::StatusOr<std::string> role = cluster_->Command(i, {"ROLE"});
    if (i != primary && role.ok() && absl::StartsWith(*role, "slave") &&
        absl::StrContains(*role, absl::StrCat("\n", cluster_->node(primary).port(), "\n"))) {
      replica = i;
    }
  }
  ASSERT_GE(replica, 0);
  const std::string series = R"(orderhold_scope_wait_timeouts_total{step="take"})";
  EXPECT_EQ(testing::ScrapedValue(server->metrics_port(), series), 0);
  ASSERT_TRUE(cluster_->node(replica).Pause().ok());
  ASSERT_TRUE(cluster_->Command(primary, {"CLIENT", "KILL", "TYPE", "replica"}).ok());
  const grpc::Status refused = Place(*stub, "wait-user", scope);
  ASSERT_TRUE(cluster_->node(replica).Resume().ok());
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::UNAVAILABLE) << refused.error_message();
  EXPECT_EQ(testing::ScrapedValue(server->metrics_port(), series), 1);
  const std::string oldest = "orderhold_scope_oldest_pending_take_seconds";
  EXPECT_TRUE(testing::Eventually(
      [&] { return testing::ScrapedValue(server->metrics_port(), oldest) > 0; }, absl::Seconds(5)));
  EXPECT_TRUE(testing::Eventually(
      [&] { return testing::ScrapedValue(server->metrics_port(), oldest) == 0; },
      absl::Seconds(15)));
  EXPECT_EQ(LiveHolds(*stub, "wait-user"), 0);
  EXPECT_TRUE(Place(*stub, "other-user", scope).ok());  // the place is free again
}

// The audit after a failover. A ghost entry (an entry whose hold is gone: what a place or a
// fence acknowledged and then lost in a failover of the user's node leaves; written here
// directly into the index, with its units) holds a place past the sweep's ticks until a failover
// is seen: then the audit hands the index's entries to the sweep, which drops the ghost and keeps
// the live holds' entries.
TEST_F(ScopeFaultsE2eTest, AGhostEntryIsDroppedByTheAuditAfterAFailover) {
  auto server = StartServer({"--scope_clock_margin=0s"});
  auto stub = StubOf(*server);
  const std::string scope = "herd:audit";
  std::vector<std::string> users;
  for (int i = 0; i < 3; ++i) {
    users.push_back(absl::StrCat("audit-", i));
    ASSERT_TRUE(Place(*stub, users.back(), scope).ok());
  }
  const store::KeySchema keys("orderhold");
  const std::string key = keys.ScopeLiveKey(scope);
  ASSERT_OK_AND_ASSIGN(int slot, cluster_->KeySlot(key));
  ASSERT_OK_AND_ASSIGN(int node, cluster_->PrimaryFor(slot));
  const std::string ghost = absl::StrCat("1:ghost", std::string(1, '\0'), "o-1");
  ASSERT_TRUE(cluster_
                  ->Command(node, {"ZADD", key,
                                   absl::StrCat(absl::ToUnixMillis(absl::Now()) + 120000), ghost})
                  .ok());
  ASSERT_TRUE(cluster_->Command(node, {"INCRBY", keys.ScopeUnitsKey(scope), "1"}).ok());
  int compared = 0;
  // The negative control: past the pending age and two ticks, the sweep alone leaves it.
  absl::SleepFor(absl::Seconds(5));
  EXPECT_THAT(OracleProblems(*stub, scope, users, &compared),
              ::testing::ElementsAre(::testing::HasSubstr("entry ghost/o-1")));
  const auto port = server->metrics_port();
  const std::string ghosts = R"(orderhold_scope_sweep_actions_total{action="ghost_dropped"})";
  const std::string audited = R"(orderhold_scope_sweep_actions_total{action="audited"})";
  EXPECT_EQ(testing::ScrapedValue(port, ghosts), 0);
  // A graceful failover of another primary: the server's topology sees it (its periodic look,
  // 5 s), and the audit starts.
  int replica = -1;
  for (int i = 0; i < cluster_->node_count() && replica < 0; ++i) {
    absl::StatusOr<std::string> role = cluster_->Command(i, {"ROLE"});
    if (role.ok() && absl::StartsWith(*role, "slave") &&
        !absl::StrContains(*role, absl::StrCat("\n", cluster_->node(node).port(), "\n"))) {
      replica = i;
    }
  }
  ASSERT_GE(replica, 0);
  const absl::Time failover = absl::Now();
  ASSERT_TRUE(cluster_->Failover(replica).ok());
  EXPECT_TRUE(testing::Eventually([&] { return testing::ScrapedValue(port, ghosts) == 1; },
                                  absl::Seconds(20)))
      << server->log();
  std::cout << "  ghost dropped " << absl::Trunc(absl::Now() - failover, absl::Milliseconds(100))
            << " after the failover; " << testing::ScrapedValue(port, audited)
            << " entries audited\n";
  EXPECT_GE(testing::ScrapedValue(port, audited), 4);
  EXPECT_THAT(OracleProblems(*stub, scope, users, &compared), ::testing::IsEmpty());
  EXPECT_EQ(compared, 3);
  v1::GetScopeUsageRequest request;
  request.set_scope(scope);
  v1::GetScopeUsageResponse response;
  grpc::ClientContext context;
  ASSERT_TRUE(stub->GetScopeUsage(&context, request, &response).ok());
  EXPECT_EQ(response.usage().holds(), 3);
  EXPECT_EQ(response.usage().units(), 3);
}

// The oracle's own negative control: an entry removed from under a live hold and a ghost entry
// added are both reported, and nothing before the tampering.
TEST_F(ScopeFaultsE2eTest, TheOracleReportsAMissingEntryAndAGhost) {
  auto server = StartServer({"--scope_clock_margin=0s"});
  auto stub = StubOf(*server);
  const std::string scope = "herd:oracle";
  std::vector<std::string> users;
  for (int i = 0; i < 3; ++i) {
    users.push_back(absl::StrCat("oracle-", i));
    ASSERT_TRUE(Place(*stub, users.back(), scope).ok());
  }
  const std::string key = store::KeySchema("orderhold").ScopeLiveKey(scope);
  ASSERT_OK_AND_ASSIGN(int slot, cluster_->KeySlot(key));
  ASSERT_OK_AND_ASSIGN(int node, cluster_->PrimaryFor(slot));
  int compared = 0;
  ASSERT_TRUE(testing::Eventually([&] {  // every settle done
    return cluster_
               ->Command(node, {"HLEN", store::KeySchema("orderhold")
                                            .ScopePendingKey(store::KeySchema::PartitionOf(scope))})
               .value_or("") == "1";  // the stamp counter alone
  }));
  std::vector<std::string> before = OracleProblems(*stub, scope, users, &compared);
  EXPECT_EQ(compared, 3);
  EXPECT_THAT(before, ::testing::IsEmpty());
  ASSERT_TRUE(
      cluster_
          ->Command(node, {"ZREM", key, absl::StrCat("1:oracle-0", std::string(1, '\0'), "o-1")})
          .ok());
  ASSERT_TRUE(
      cluster_
          ->Command(node, {"ZADD", key, absl::StrCat(absl::ToUnixMillis(absl::Now()) + 60000),
                           absl::StrCat("1:ghost", std::string(1, '\0'), "o-1")})
          .ok());
  std::vector<std::string> after = OracleProblems(*stub, scope, users, &compared);
  EXPECT_THAT(after, ::testing::Contains("live hold oracle-0/o-1 has no entry"));
  EXPECT_THAT(after, ::testing::Contains(::testing::HasSubstr("entry ghost/o-1")));
  EXPECT_EQ(after.size(), 2u) << absl::StrJoin(after, "; ");
}

// The negative control: a survivor whose sweep settles only takes older than 60 s does not give
// the place back within the bound; the measurement above can fail.
TEST_F(ScopeFaultsE2eTest, WithoutATimelySweepThePlaceStaysTakenPastTheBound) {
  std::optional<absl::Duration> back =
      KillAfter("take", "event:control", kBound + absl::Seconds(2), {"--scope_pending_age=60s"});
  EXPECT_FALSE(back.has_value()) << "given back after " << *back;
}

}  // namespace
}  // namespace orderhold
