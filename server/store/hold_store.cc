#include "server/store/hold_store.h"

namespace orderhold::store {

const char* HoldOutcomeName(HoldOutcome outcome) {
  switch (outcome) {
    case HoldOutcome::kPaid:
      return "PAID";
    case HoldOutcome::kCancelled:
      return "CANCELLED";
    case HoldOutcome::kExpired:
      return "EXPIRED";
  }
  return "HOLD_OUTCOME_UNSPECIFIED";
}

}  // namespace orderhold::store
