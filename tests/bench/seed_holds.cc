// orderhold-seed: fills Redis with holds fast, through the production store (the real
// place_hold.lua, pipelined by RedisClient), for the benchmarks in tests/bench/. Not a test and
// not for production use.
//
// Users are `<user_prefix><i>` for i in [first_user, first_user + users); each gets
// `holds_per_user` holds with order ids `<order_prefix><j>`. With --expire_spread > 0 the holds'
// expire times are spread evenly over [now + ttl, now + ttl + expire_spread) in seeding order
// (each PlaceHold runs with an explicit "now" = real now + its offset); this needs ttl >
// expire_spread so no seeded hold is due when a later one is placed. With --first_expiry > 0 the
// window is [now + first_expiry, now + first_expiry + expire_spread) whatever the ttl (each
// PlaceHold then runs with "now" = its expire time - ttl, possibly in the past): the reaper
// benchmark uses it to make thousands of holds expire per second soon after seeding.
//
// --redis_mode=cluster: the URL lists seed nodes of a Redis Cluster, and each PlaceHold goes to
// the primary of its user's slot (RedisClusterClient, as the server's --redis_mode=cluster).
//
// Prints one line: holds created, seconds, holds/s. Exit 1 on any failed or refused PlaceHold.
#include <atomic>
#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "server/redis/cluster_topology.h"
#include "server/redis/redis_topology.h"
#include "server/redis/redis_url.h"
#include "server/redis_store.h"
#include "server/store/redis_hold_store.h"

ABSL_FLAG(std::string, redis_url, "redis://127.0.0.1:6379", "Redis to fill.");
ABSL_FLAG(std::string, redis_mode, "standalone",
          "standalone (one node) or cluster (--redis_url lists seed nodes of a Redis Cluster).");
ABSL_FLAG(std::string, key_prefix, "orderhold", "Key prefix (as the server's --key_prefix).");
ABSL_FLAG(int64_t, users, 100000, "Number of users.");
ABSL_FLAG(int64_t, first_user, 0, "Index of the first user.");
ABSL_FLAG(int, holds_per_user, 3, "Holds per user (<= max_holds).");
ABSL_FLAG(std::string, user_prefix, "u", "User id prefix.");
ABSL_FLAG(std::string, order_prefix, "seed-", "Order id prefix.");
ABSL_FLAG(absl::Duration, ttl, absl::Hours(1), "Hold ttl.");
ABSL_FLAG(absl::Duration, expire_spread, absl::ZeroDuration(),
          "Spread expire times evenly over this window after now + ttl (0: all at now + ttl).");
ABSL_FLAG(absl::Duration, first_expiry, absl::ZeroDuration(),
          "When > 0: the first hold expires this long after the start, whatever --ttl.");
ABSL_FLAG(int, in_flight, 4096, "Max PlaceHolds outstanding.");
ABSL_FLAG(int, connections, 4, "Redis connections.");

namespace orderhold::store {
namespace {

int Run() {
  const int64_t users = absl::GetFlag(FLAGS_users);
  const int64_t first_user = absl::GetFlag(FLAGS_first_user);
  const int per_user = absl::GetFlag(FLAGS_holds_per_user);
  const absl::Duration ttl = absl::GetFlag(FLAGS_ttl);
  const absl::Duration spread = absl::GetFlag(FLAGS_expire_spread);
  const absl::Duration first_expiry = absl::GetFlag(FLAGS_first_expiry);
  if (users < 1 || per_user < 1 || ttl <= absl::ZeroDuration() || spread < absl::ZeroDuration() ||
      (first_expiry <= absl::ZeroDuration() && spread >= ttl)) {
    std::fprintf(stderr,
                 "need users >= 1, holds_per_user >= 1, ttl > 0, and ttl > expire_spread >= 0 "
                 "unless --first_expiry is set\n");
    return 2;
  }
  RedisStoreOptions options;
  auto endpoint = redis::ParseRedisUrl(absl::GetFlag(FLAGS_redis_url));
  if (!endpoint.ok()) {
    std::fprintf(stderr, "%s\n", endpoint.status().ToString().c_str());
    return 2;
  }
  options.client.node.user = endpoint->user;
  options.client.node.password = endpoint->password;
  options.client.db = endpoint->db;
  const std::string mode = absl::GetFlag(FLAGS_redis_mode);
  if (mode == "cluster") {
    redis::ClusterTopologyOptions cluster;
    cluster.seeds = endpoint->hosts;
    cluster.node.user = endpoint->user;
    cluster.node.password = endpoint->password;
    auto topology = redis::ClusterTopology::Create(std::move(cluster));
    if (!topology.ok()) {
      std::fprintf(stderr, "%s\n", topology.status().ToString().c_str());
      return 2;
    }
    options.cluster = *std::move(topology);
  } else if (mode == "standalone") {
    options.client.topology = std::make_shared<redis::StandaloneTopology>(endpoint->hosts.front());
  } else {
    std::fprintf(stderr, "--redis_mode must be standalone or cluster\n");
    return 2;
  }
  options.client.connections = absl::GetFlag(FLAGS_connections);
  options.client.command_timeout = absl::Seconds(10);
  options.client.node.connect_timeout = absl::Seconds(2);
  options.key_prefix = absl::GetFlag(FLAGS_key_prefix);
  auto store = ConnectRedisStore(std::move(options));
  if (!store.ok()) {
    std::fprintf(stderr, "%s\n", store.status().ToString().c_str());
    return 2;
  }

  const int64_t total = users * per_user;
  const int window = absl::GetFlag(FLAGS_in_flight);
  absl::Mutex mu;
  int64_t outstanding = 0;
  std::atomic<int64_t> created{0}, failed{0};
  const absl::Time start = absl::FromUnixMillis(absl::ToUnixMillis(absl::Now()));
  for (int64_t i = 0; i < total; ++i) {
    {
      absl::MutexLock lock(&mu);
      auto room = [&] { return outstanding < window; };
      mu.Await(absl::Condition(&room, &decltype(room)::operator()));
      ++outstanding;
    }
    // Round-robin over users, so a user's holds are spread over the whole expiry window.
    const int64_t user = first_user + i % users;
    const int64_t hold = i / users;
    PlaceHoldArgs args{absl::StrCat(absl::GetFlag(FLAGS_user_prefix), user),
                       absl::StrCat(absl::GetFlag(FLAGS_order_prefix), hold),
                       ttl,
                       per_user,
                       0,
                       {}};
    CallOptions call;
    call.deadline = absl::Now() + absl::Seconds(30);
    const absl::Duration offset = absl::Milliseconds(absl::ToInt64Milliseconds(spread) * i / total);
    if (first_expiry > absl::ZeroDuration()) {
      call.now = start + first_expiry + offset - ttl;
    } else if (spread > absl::ZeroDuration()) {
      call.now = start + offset;
    }
    (*store)->PlaceHold(std::move(args), call, [&](absl::StatusOr<PlaceHoldResult> result) {
      if (result.ok() && result->outcome == PlaceHoldResult::Outcome::kCreated) {
        created.fetch_add(1, std::memory_order_relaxed);
      } else {
        if (failed.fetch_add(1) < 5) {
          std::fprintf(stderr, "PlaceHold: %s\n",
                       result.ok() ? "not created" : result.status().ToString().c_str());
        }
      }
      absl::MutexLock lock(&mu);
      --outstanding;
    });
  }
  {
    absl::MutexLock lock(&mu);
    auto drained = [&] { return outstanding == 0; };
    mu.Await(absl::Condition(&drained, &decltype(drained)::operator()));
  }
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  std::printf("seeded %lld holds (%lld users x %d) in %.1f s: %.0f holds/s, %lld failed\n",
              static_cast<long long>(created.load()), static_cast<long long>(users), per_user,
              seconds, created.load() / seconds, static_cast<long long>(failed.load()));
  return failed.load() == 0 ? 0 : 1;
}

}  // namespace
}  // namespace orderhold::store

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return orderhold::store::Run();
}
