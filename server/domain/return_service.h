// ReturnService: ReturnUnits, a refund of some units of a paid hold. The units go back to the
// scope's capacity (its sold count) and to the buyer's purchases under the scope's runtime rule,
// so a buyer refunded one ticket of a 4-per-person event may buy one again; one RETURNED
// HoldEvent per return. Never more units than the hold had, in all returns together; idempotent
// by request_id (a retry answers the first return again and changes nothing).
//
// Errors: INVALID_ARGUMENT naming the field (user_id, order_id as for Pay; units 0;
// request_id missing, longer than 128 bytes or with control characters); NOT_FOUND (the order is
// unknown: never placed, or paid longer ago than --outcome_retention, default 72h);
// FAILED_PRECONDITION (the hold is live, or ended CANCELLED or EXPIRED; more units than are left,
// with a google.rpc.ErrorInfo RETURN_EXCEEDS_QUANTITY; the hold has had store::kMaxReturnsPerHold
// returns, ErrorInfo TOO_MANY_RETURNS; a store that keeps no returns: --store=noop); UNAVAILABLE,
// DEADLINE_EXCEEDED, INTERNAL from the store. Thread-safe (no state of its own).
#ifndef ORDERHOLD_SERVER_DOMAIN_RETURN_SERVICE_H_
#define ORDERHOLD_SERVER_DOMAIN_RETURN_SERVICE_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/time/time.h"
#include "server/domain/hold.h"
#include "server/domain/hold_service.h"
#include "server/metrics/metrics.h"
#include "server/store/hold_store.h"

namespace orderhold::domain {

struct ReturnUnitsCommand {
  std::string user_id;
  std::string order_id;
  int64_t units = 0;       // >= 1
  std::string request_id;  // required, 1-128 bytes, no control characters
};

struct ReturnUnitsReply {
  Hold hold;                         // the paid hold, as it was paid
  absl::Time now;                    // the store's clock at the call
  int64_t returned_units = 0;        // the units this request_id returned (now or before)
  int64_t total_returned_units = 0;  // the hold's units returned in all
  bool already_returned = false;     // a retry: an earlier call made this return
  std::string payment_reference;     // the reference the hold was paid with; "" = none
  // When the hold's scope has a runtime rule: the user's purchase-cap level there after the call
  // (live holds plus purchases; limits = the rule's max_purchased_holds/units, 0 = none).
  std::optional<LevelUsage> scope_usage;
};

class ReturnService {
 public:
  // `store` and `metrics` must outlive this object.
  ReturnService(store::HoldStore& store, metrics::Metrics& metrics)
      : store_(store), metrics_(metrics) {}

  // See the file comment. Counts orderhold_units_returned_total and
  // orderhold_events_appended_total for a return made now.
  void ReturnUnits(ReturnUnitsCommand command, store::CallOptions options,
                   store::Callback<ReturnUnitsReply> done);

 private:
  store::HoldStore& store_;
  metrics::Metrics& metrics_;
};

}  // namespace orderhold::domain

#endif  // ORDERHOLD_SERVER_DOMAIN_RETURN_SERVICE_H_
