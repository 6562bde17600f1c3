// HoldEventWatch: the server side of one WatchHoldEvents stream (a gRPC callback
// ServerWriteReactor), and WatchRegistry, which ends every open watch at shutdown.
//
// Reading: the watch joins its group in the server's EventDispatcher and asks it for work
// (TakeWork) whenever it has sent everything it had; it reads what it is given (EventService::Read)
// and, given nothing, waits to be woken (a nudge, the safety sweep, or another watch of its group
// whose read filled its budget). An idle watch costs Redis nothing.
//
// Flow control: the watch holds at most one read's events (EventPolicy::max_events_per_read),
// sends them one StartWrite at a time and asks for more only after the last one was written
// (OnWriteDone), so a slow reader slows the reads instead of growing a buffer.
//
// Ending: a client cancel (OnCancel) or a failed write ends the call at once; Redis failing ends it
// with UNAVAILABLE; WatchRegistry::EndAll (server shutdown) ends it with UNAVAILABLE "server
// shutting down". Events sent but not acked stay pending in their group and are redelivered, so
// a consumer that reconnects loses nothing.
//
// Lifetime: the reactor deletes itself after OnDone (which leaves the dispatcher, so no wake comes
// after it) once no store callback it started is outstanding. Thread-safety: all state is guarded
// by one mutex; reactions and store callbacks may run on any thread.
#ifndef ORDERHOLD_SERVER_GRPC_HOLD_EVENT_WATCH_H_
#define ORDERHOLD_SERVER_GRPC_HOLD_EVENT_WATCH_H_

#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/server_callback.h"
#include "server/domain/event_dispatcher.h"
#include "server/domain/event_service.h"
#include "server/domain/tenant.h"
#include "server/grpc/authz_policy.h"
#include "server/metrics/metrics.h"

namespace orderhold::grpc_api {

class HoldEventWatch;

// The open watches of a server, at most `max_watches` (--max_watches) of them. Thread-safe.
class WatchRegistry {
 public:
  // `open` (may be null) is kept equal to the number of open watches (orderhold_watches); it
  // must outlive the registry. max_watches >= 1, max_per_caller >= 1.
  WatchRegistry(int max_watches, int max_per_caller, prometheus::Gauge* open = nullptr)
      : max_watches_(max_watches), max_per_caller_(max_per_caller), open_(open) {}

  // Ends every open watch with UNAVAILABLE and refuses new ones (they end at once the same way).
  void EndAll();

  // Ends every open watch that was admitted by an authorization policy or under --tenants
  // (HoldEventWatch's `authz`) and that `check` now refuses (given the call and the watch's
  // tenant), with the status `check` returns (PERMISSION_DENIED): a reloaded policy or tenants file
  // applies to open streams too (revocation reaches a watch that is already open). Returns how many
  // it ended.
  int EndDenied(
      absl::FunctionRef<absl::Status(const AuthzRequest&, const std::optional<std::string>&)>
          check);

  // --tenants: a tenant's max_watches bounds its watches here (domain/tenant.h). `tenants` must
  // outlive the registry; set it before the first watch.
  void set_tenants(const domain::TenantTable* tenants) { tenants_ = tenants; }

 private:
  friend class HoldEventWatch;
  // OK, or the status a refused watch ends with: UNAVAILABLE when shutting down,
  // RESOURCE_EXHAUSTED naming --max_watches when that many are open (AIP-193: a quota of this
  // server; the client may retry later or on another replica), or naming
  // --max_watches_per_caller (QuotaFailure subject "caller/watches", ErrorInfo WATCH_LIMIT) when
  // `caller` has that many open, or naming the tenant's max_watches (QuotaFailure subject
  // "tenant/watches", ErrorInfo WATCH_LIMIT) when `tenant` ("" = none) has that many open.
  absl::Status Add(HoldEventWatch* watch, const std::string& caller, const std::string& tenant);
  void Remove(HoldEventWatch* watch, const std::string& caller, const std::string& tenant);

  const int max_watches_;
  const int max_per_caller_;
  prometheus::Gauge* const open_;
  absl::Mutex mu_;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  std::set<HoldEventWatch*> watches_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, int> per_caller_ ABSL_GUARDED_BY(mu_);  // caller -> open watches
  std::map<std::string, int> per_tenant_ ABSL_GUARDED_BY(mu_);  // tenant -> open watches
  const domain::TenantTable* tenants_ = nullptr;
};

class HoldEventWatch final : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  // Starts the watch (subscribes the group, joins it in `dispatcher`, then reads). `spec` must be
  // validated by Subscribe (done here: a bad spec ends the call with INVALID_ARGUMENT). Everything
  // passed must outlive the call.
  // `caller` is who the watch counts against in `registry` (CallerKeyOf). `authz`: what the
  // authorization policy matched when it admitted the call (AuthzRequestOf), kept so that a
  // reloaded policy or tenants file can check it again (WatchRegistry::EndDenied); unset without
  // either.
  HoldEventWatch(domain::EventService& events, domain::EventDispatcher& dispatcher,
                 metrics::Metrics& metrics, WatchRegistry& registry, domain::WatchSpec spec,
                 std::string caller, std::optional<AuthzRequest> authz = std::nullopt);

  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

  // Ends the call with `status` unless it already ended (used by WatchRegistry::EndAll).
  void End(const grpc::Status& status);

  // What the policy matched when it admitted the call; unset without a policy. Immutable.
  const std::optional<AuthzRequest>& authz() const { return authz_; }
  // The tenant the watch reads (domain::WatchSpec::tenant). Immutable.
  const std::optional<std::string>& tenant() const { return spec_.tenant; }

 private:
  ~HoldEventWatch() override = default;
  // Under mu_ these only decide what to do; Unlock() does it after releasing mu_, because a store
  // call may run its callback inline and gRPC may run reactions inline: nothing that can call
  // back into this object is started while mu_ is held.
  void WriteNextOrRead() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FinishLocked(const grpc::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Releases mu_, then starts the decided read / write / finish; `op_done` ends one outstanding
  // store call. Deletes `this` when nothing is outstanding after OnDone.
  void Unlock(bool op_done) ABSL_UNLOCK_FUNCTION(mu_);
  // Asks the dispatcher for work and reads it, or (given none) stays parked.
  void StartRead();
  // The dispatcher's wake: work for this watch's group appeared. False when the watch is ending
  // (the dispatcher then wakes another watch of the group).
  bool Wake();

  domain::EventService& events_;
  domain::EventDispatcher& dispatcher_;
  metrics::Metrics& metrics_;
  WatchRegistry& registry_;
  const domain::WatchSpec spec_;
  const std::string caller_;
  const std::optional<AuthzRequest> authz_;  // set before the registry sees the watch
  const absl::Time started_ = absl::Now();   // for orderhold_grpc_request_duration_seconds

  absl::Mutex mu_;
  // Set once joined (under mu_), read by StartRead and OnDone after that.
  std::shared_ptr<domain::EventDispatcher::Member> member_;
  std::deque<store::StoredEvent> buffer_ ABSL_GUARDED_BY(mu_);
  grpc::ByteBuffer out_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool reading_ ABSL_GUARDED_BY(mu_) = false;  // a StartRead is under way
  // A wake came while busy: ask the dispatcher again once idle (it may have parked us meanwhile).
  bool rewake_ ABSL_GUARDED_BY(mu_) = false;
  // Decided under mu_, done by Unlock().
  bool want_read_ ABSL_GUARDED_BY(mu_) = false;
  bool want_write_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<grpc::Status> want_finish_ ABSL_GUARDED_BY(mu_);
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  int outstanding_ ABSL_GUARDED_BY(mu_) = 0;  // store calls in flight
  bool registered_ = false;
};

}  // namespace orderhold::grpc_api

#endif  // ORDERHOLD_SERVER_GRPC_HOLD_EVENT_WATCH_H_
