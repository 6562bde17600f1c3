// Reads metric values back from a prometheus-cpp Registry, for assertions on what was recorded.
#ifndef ORDERHOLD_TESTS_TESTING_METRIC_VALUES_H_
#define ORDERHOLD_TESTS_TESTING_METRIC_VALUES_H_

#include <map>
#include <string>
#include <vector>

#include "prometheus/registry.h"

namespace orderhold::testing {

// The series of `name` with exactly `labels` (and its family's type), or null when there is none.
// Points into `families`.
inline const prometheus::ClientMetric* FindSeries(
    const std::vector<prometheus::MetricFamily>& families, const std::string& name,
    const std::map<std::string, std::string>& labels, prometheus::MetricType* type) {
  for (const prometheus::MetricFamily& family : families) {
    if (family.name != name) continue;
    for (const prometheus::ClientMetric& metric : family.metric) {
      std::map<std::string, std::string> have;
      for (const auto& label : metric.label) have[label.name] = label.value;
      if (have != labels) continue;
      *type = family.type;
      return &metric;
    }
  }
  return nullptr;
}

// The counter or gauge value of `name` with exactly these labels; for a histogram, its sample
// count. -1 when no such series exists.
inline double MetricValue(const prometheus::Registry& registry, const std::string& name,
                          const std::map<std::string, std::string>& labels = {}) {
  const std::vector<prometheus::MetricFamily> families = registry.Collect();
  prometheus::MetricType type;
  const prometheus::ClientMetric* metric = FindSeries(families, name, labels, &type);
  if (metric == nullptr) return -1;
  switch (type) {
    case prometheus::MetricType::Counter:
      return metric->counter.value;
    case prometheus::MetricType::Gauge:
      return metric->gauge.value;
    case prometheus::MetricType::Histogram:
      return static_cast<double>(metric->histogram.sample_count);
    default:
      return -1;
  }
}

// The sum of the samples of the histogram `name` with exactly `labels`; -1 when there is none.
inline double HistogramSum(const prometheus::Registry& registry, const std::string& name,
                           const std::map<std::string, std::string>& labels = {}) {
  const std::vector<prometheus::MetricFamily> families = registry.Collect();
  prometheus::MetricType type;
  const prometheus::ClientMetric* metric = FindSeries(families, name, labels, &type);
  if (metric == nullptr || type != prometheus::MetricType::Histogram) return -1;
  return metric->histogram.sample_sum;
}

}  // namespace orderhold::testing

#endif  // ORDERHOLD_TESTS_TESTING_METRIC_VALUES_H_
