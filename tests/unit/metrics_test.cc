// Metrics: the Redis failover series exist from the start (at 0), each accessor records into its
// own series, and no label carries anything but the documented reasons.
#include "server/metrics/metrics.h"

#include <map>
#include <set>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "prometheus/registry.h"
#include "tests/testing/metric_values.h"

namespace orderhold::metrics {
namespace {

using ::orderhold::testing::MetricValue;

TEST(MetricsTest, RedisFailoverSeriesExportZeroFromTheStart) {
  prometheus::Registry registry;
  Metrics metrics(registry);
  EXPECT_EQ(MetricValue(registry, "orderhold_redis_failovers_total"), 0);
  for (const char* reason : {"io_error", "peer_closed", "not_primary", "failover"}) {
    EXPECT_EQ(MetricValue(registry, "orderhold_redis_reconnects_total", {{"reason", reason}}), 0)
        << reason;
  }
}

TEST(MetricsTest, EachReconnectReasonCountsInItsOwnSeries) {
  prometheus::Registry registry;
  Metrics metrics(registry);
  metrics.redis_failovers().Increment();
  metrics.redis_reconnects(RedisReconnectReason::kIoError).Increment();
  metrics.redis_reconnects(RedisReconnectReason::kPeerClosed).Increment(2);
  metrics.redis_reconnects(RedisReconnectReason::kNotPrimary).Increment(3);
  metrics.redis_reconnects(RedisReconnectReason::kFailover).Increment(4);
  EXPECT_EQ(MetricValue(registry, "orderhold_redis_failovers_total"), 1);
  const std::map<std::string, double> expected = {
      {"io_error", 1}, {"peer_closed", 2}, {"not_primary", 3}, {"failover", 4}};
  for (const auto& [reason, value] : expected) {
    EXPECT_EQ(MetricValue(registry, "orderhold_redis_reconnects_total", {{"reason", reason}}),
              value)
        << reason;
  }
}

// Exactly the documented series, with a HELP text, and only the `reason` label (no address, no
// password).
TEST(MetricsTest, RedisFailoverFamiliesHaveHelpAndOnlyTheReasonLabel) {
  prometheus::Registry registry;
  Metrics metrics(registry);
  std::set<std::string> seen;
  for (const prometheus::MetricFamily& family : registry.Collect()) {
    if (family.name != "orderhold_redis_failovers_total" &&
        family.name != "orderhold_redis_reconnects_total") {
      continue;
    }
    seen.insert(family.name);
    EXPECT_EQ(family.type, prometheus::MetricType::Counter) << family.name;
    EXPECT_FALSE(family.help.empty()) << family.name;
    for (const prometheus::ClientMetric& metric : family.metric) {
      for (const prometheus::ClientMetric::Label& label : metric.label) {
        EXPECT_EQ(label.name, "reason") << family.name;
      }
    }
    EXPECT_EQ(family.metric.size(), family.name == "orderhold_redis_failovers_total"
                                        ? 1u
                                        : size_t{kRedisReconnectReasonCount});
  }
  EXPECT_EQ(seen.size(), 2u);
}

// The event nudge counters are exported from the start, at 0, and count what they are given.
TEST(MetricsTest, EventNudgeCountersStartAtZero) {
  prometheus::Registry registry;
  Metrics metrics(registry);
  EXPECT_EQ(MetricValue(registry, "orderhold_event_nudges_total"), 0);
  EXPECT_EQ(MetricValue(registry, "orderhold_event_nudge_subscriptions_total"), 0);
  metrics.event_nudges().Increment();
  metrics.event_nudge_subscriptions().Increment(64);
  EXPECT_EQ(MetricValue(registry, "orderhold_event_nudges_total"), 1);
  EXPECT_EQ(MetricValue(registry, "orderhold_event_nudge_subscriptions_total"), 64);
}

}  // namespace
}  // namespace orderhold::metrics
