// Live intervals: the oracle of the herd tests that check "never more than N live at once" from
// the client's side. A grant is certainly live from `from` (its answer arrived) to `to` (the end's
// request was sent, or its expire_time), so the most intervals open at one instant is a lower
// bound of what the store had live then: above a limit, the store granted over it.
#ifndef ORDERHOLD_TESTS_TESTING_LIVE_INTERVALS_H_
#define ORDERHOLD_TESTS_TESTING_LIVE_INTERVALS_H_

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/time/time.h"

namespace orderhold::testing {

// One granted hold as the client saw it (see the file comment), with its units.
struct Grant {
  absl::Time from;
  absl::Time to;
  int64_t units = 1;
};

// The most holds and units certainly live at one instant, over `grants`. An interval is open at
// its end: one that ends where another starts does not overlap it.
inline std::pair<int64_t, int64_t> MostLiveAtOnce(const std::vector<Grant>& grants) {
  std::vector<std::pair<absl::Time, int64_t>> edges;  // +units at from, -units at to
  for (const Grant& grant : grants) {
    if (grant.to <= grant.from) continue;
    edges.emplace_back(grant.from, grant.units);
    edges.emplace_back(grant.to, -grant.units);
  }
  std::sort(edges.begin(), edges.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first < b.first : a.second < b.second;
  });
  int64_t holds = 0, units = 0, most_holds = 0, most_units = 0;
  for (const auto& [at, delta] : edges) {
    holds += delta > 0 ? 1 : -1;
    units += delta;
    most_holds = std::max(most_holds, holds);
    most_units = std::max(most_units, units);
  }
  return {most_holds, most_units};
}

}  // namespace orderhold::testing

#endif  // ORDERHOLD_TESTS_TESTING_LIVE_INTERVALS_H_
