// EventsOf: the events of a HoldEventLog::ReadEvents answer (its cursors dropped), for tests that
// only look at what was delivered.
#ifndef ORDERHOLD_TESTS_TESTING_EVENT_BATCHES_H_
#define ORDERHOLD_TESTS_TESTING_EVENT_BATCHES_H_

#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "server/store/event_log.h"

namespace orderhold::testing {

// `batch`'s events, or its error.
inline absl::StatusOr<std::vector<store::StoredEvent>> EventsOf(
    absl::StatusOr<store::EventBatch> batch) {
  if (!batch.ok()) return batch.status();
  return std::move(batch->events);
}

}  // namespace orderhold::testing

#endif  // ORDERHOLD_TESTS_TESTING_EVENT_BATCHES_H_
