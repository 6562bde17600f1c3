// OrderHoldService: the gRPC adapter of the OrderHold API (proto/orderhold/v1/orderhold.proto)
// on the callback API. Each call: parse the request, hand it to domain::HoldService (or
// domain::EventService), and finish the reactor from the store's completion callback: no gRPC
// thread ever waits for Redis. The mapping between protobuf and domain types, status codes
// included, lives in conversions.h; this class only wires it up (the unary rpcs through one
// helper). Records orderhold_grpc_requests_total{method,code} and
// orderhold_grpc_request_duration_seconds{method}.
//
// The methods are registered "raw" (request and response as ByteBuffers): requests are parsed
// with the wire-compatible mirrors of lenient_requests.proto, so an id with invalid UTF-8 gets
// INVALID_ARGUMENT naming the field from domain validation instead of protobuf's parse failure
// (which gRPC 1.51 reports as UNIMPLEMENTED). The service name, paths and reflection are those of
// orderhold.v1.OrderHold. Undecodable bytes -> INVALID_ARGUMENT; a malformed ttl ->
// INVALID_ARGUMENT.
//
// WatchHoldEvents is a HoldEventWatch reactor (hold_event_watch.h).
//
// With an Authorizer (--authz_policy), every call is checked first (authorizer.h): a denied call
// is PERMISSION_DENIED before its request is even parsed, so it reads and changes nothing.
//
// With Tenants (--tenants), every call then finds the tenant it acts in (tenants.h; refused
// PERMISSION_DENIED as the policy's refusals are), and the ids it sends (user_id, scope,
// consumer_group) are validated as sent and qualified by that tenant (domain/tenant.h) before the
// domain sees them; answers and events show them as sent. A watch reads only its tenant's events.
// Without --tenants, ids are validated the same way and used as sent.
//
// The call's deadline is passed down to the store, which answers DEADLINE_EXCEEDED rather than
// working past it. Thread-safe.
#ifndef ORDERHOLD_SERVER_GRPC_ORDERHOLD_SERVICE_H_
#define ORDERHOLD_SERVER_GRPC_ORDERHOLD_SERVICE_H_

#include "orderhold/v1/orderhold.grpc.pb.h"
#include "server/domain/event_service.h"
#include "server/domain/hold_service.h"
#include "server/domain/return_service.h"
#include "server/domain/scope_rule_service.h"
#include "server/domain/scope_service.h"
#include "server/grpc/authorizer.h"
#include "server/grpc/hold_event_watch.h"
#include "server/grpc/tenants.h"
#include "server/metrics/metrics.h"

namespace orderhold::grpc_api {

template <typename Base>
using RawScopeRuleMethods = orderhold::v1::OrderHold::WithRawCallbackMethod_PutScopeRule<
    orderhold::v1::OrderHold::WithRawCallbackMethod_GetScopeRule<
        orderhold::v1::OrderHold::WithRawCallbackMethod_ListScopeRules<
            orderhold::v1::OrderHold::WithRawCallbackMethod_DeleteScopeRule<
                orderhold::v1::OrderHold::WithRawCallbackMethod_CloseScope<
                    orderhold::v1::OrderHold::WithRawCallbackMethod_ReturnUnits<Base>>>>>>;
using RawOrderHoldService =
    RawScopeRuleMethods<orderhold::v1::OrderHold::WithRawCallbackMethod_GetScopeUsage<
        orderhold::v1::OrderHold::WithRawCallbackMethod_ListScopeHolds<
            orderhold::v1::OrderHold::WithRawCallbackMethod_ReleaseScopeHolds<
                orderhold::v1::OrderHold::WithRawCallbackMethod_DeleteConsumerGroup<
                    orderhold::v1::OrderHold::WithRawCallbackMethod_PlaceHold<
                        orderhold::v1::OrderHold::WithRawCallbackMethod_Pay<
                            orderhold::v1::OrderHold::WithRawCallbackMethod_ListHolds<
                                orderhold::v1::OrderHold::WithRawCallbackMethod_CancelHold<
                                    orderhold::v1::OrderHold::WithRawCallbackMethod_WatchHoldEvents<
                                        orderhold::v1::OrderHold::WithRawCallbackMethod_AckHoldEvents<
                                            orderhold::v1::OrderHold::
                                                WithRawCallbackMethod_ExtendHold<
                                                    orderhold::v1::OrderHold::
                                                        WithRawCallbackMethod_GetHold<
                                                            orderhold::v1::OrderHold::
                                                                WithRawCallbackMethod_ReleaseHolds<
                                                                    orderhold::v1::OrderHold::
                                                                        Service>>>>>>>>>>>>>>;

// What the service enforces of each caller besides the domain's limits.
struct ServiceOptions {
  // --max_watches (>= 1): WatchHoldEvents streams open at once on this server; one more is
  // RESOURCE_EXHAUSTED.
  int max_watches = 1000;
  // --max_watches_per_caller (>= 1): of them, one caller's (CallerKeyOf: its principal, else its
  // address); one more is RESOURCE_EXHAUSTED with a QuotaFailure.
  int max_watches_per_caller = 100;
  // --authz_policy, or null: every call is allowed (and groups have no enforced owner).
  Authorizer* authorizer = nullptr;
  // --trusted_proxies: CallerKeyOf's.
  TrustedProxies trusted_proxies;
  // --tenants, or null: every caller acts in no tenant, as before tenants existed.
  Tenants* tenants = nullptr;
};

class OrderHoldService final : public RawOrderHoldService {
 public:
  // `holds`, `scopes`, `events`, `dispatcher`, `metrics` and options.authorizer must outlive the
  // service (and the grpc::Server it is registered on). `events` and `dispatcher` are both null
  // or both set; null (--store=noop): the event rpcs answer UNAVAILABLE.
  OrderHoldService(domain::HoldService& holds, domain::ScopeService& scopes,
                   domain::EventService* events, domain::EventDispatcher* dispatcher,
                   metrics::Metrics& metrics, ServiceOptions options);

  // Ends every open WatchHoldEvents stream with UNAVAILABLE and refuses new ones (shutdown).
  void EndWatches() { watches_.EndAll(); }

  // Checks every open WatchHoldEvents stream against the authorizer's policy and the tenants in
  // force and ends those they now refuse (a caller no longer allowed, or no longer in the watch's
  // tenant) with PERMISSION_DENIED, each counted in
  // orderhold_calls_denied_total{method="WatchHoldEvents"}; what the change listeners of
  // Authorizer and Tenants run after a reload. Nothing without either. Thread-safe.
  void RecheckWatches();

  // Request: orderhold.v1.PlaceHoldRequest bytes; response: orderhold.v1.PlaceHoldResponse bytes.
  grpc::ServerUnaryReactor* PlaceHold(grpc::CallbackServerContext* context,
                                      const grpc::ByteBuffer* request,
                                      grpc::ByteBuffer* response) override;
  // Request: orderhold.v1.PayRequest bytes; response: orderhold.v1.PayResponse bytes.
  grpc::ServerUnaryReactor* Pay(grpc::CallbackServerContext* context,
                                const grpc::ByteBuffer* request,
                                grpc::ByteBuffer* response) override;
  // Request: orderhold.v1.ListHoldsRequest bytes; response: orderhold.v1.ListHoldsResponse bytes.
  grpc::ServerUnaryReactor* ListHolds(grpc::CallbackServerContext* context,
                                      const grpc::ByteBuffer* request,
                                      grpc::ByteBuffer* response) override;
  // Request: orderhold.v1.CancelHoldRequest bytes; response: orderhold.v1.CancelHoldResponse.
  grpc::ServerUnaryReactor* CancelHold(grpc::CallbackServerContext* context,
                                       const grpc::ByteBuffer* request,
                                       grpc::ByteBuffer* response) override;
  // Request: orderhold.v1.ExtendHoldRequest bytes; response: orderhold.v1.ExtendHoldResponse.
  grpc::ServerUnaryReactor* ExtendHold(grpc::CallbackServerContext* context,
                                       const grpc::ByteBuffer* request,
                                       grpc::ByteBuffer* response) override;
  // Request: orderhold.v1.GetHoldRequest bytes; response: orderhold.v1.GetHoldResponse bytes.
  grpc::ServerUnaryReactor* GetHold(grpc::CallbackServerContext* context,
                                    const grpc::ByteBuffer* request,
                                    grpc::ByteBuffer* response) override;
  // Request: orderhold.v1.ReleaseHoldsRequest bytes; response: ReleaseHoldsResponse bytes.
  grpc::ServerUnaryReactor* ReleaseHolds(grpc::CallbackServerContext* context,
                                         const grpc::ByteBuffer* request,
                                         grpc::ByteBuffer* response) override;
  // Request: orderhold.v1.WatchHoldEventsRequest bytes; streams orderhold.v1.HoldEvent bytes
  // (see hold_event_watch.h).
  grpc::ServerWriteReactor<grpc::ByteBuffer>* WatchHoldEvents(
      grpc::CallbackServerContext* context, const grpc::ByteBuffer* request) override;
  // Request: orderhold.v1.AckHoldEventsRequest bytes; response: AckHoldEventsResponse bytes.
  grpc::ServerUnaryReactor* AckHoldEvents(grpc::CallbackServerContext* context,
                                          const grpc::ByteBuffer* request,
                                          grpc::ByteBuffer* response) override;
  // Request: orderhold.v1.DeleteConsumerGroupRequest bytes; response: its response.
  grpc::ServerUnaryReactor* DeleteConsumerGroup(grpc::CallbackServerContext* context,
                                                const grpc::ByteBuffer* request,
                                                grpc::ByteBuffer* response) override;
  // Request: orderhold.v1.GetScopeUsageRequest bytes; response: GetScopeUsageResponse bytes.
  grpc::ServerUnaryReactor* GetScopeUsage(grpc::CallbackServerContext* context,
                                          const grpc::ByteBuffer* request,
                                          grpc::ByteBuffer* response) override;
  // Request: orderhold.v1.ListScopeHoldsRequest bytes; response: ListScopeHoldsResponse bytes.
  grpc::ServerUnaryReactor* ListScopeHolds(grpc::CallbackServerContext* context,
                                           const grpc::ByteBuffer* request,
                                           grpc::ByteBuffer* response) override;
  // The scope rule rpcs (domain/scope_rule_service.h). Request: orderhold.v1.<Rpc>Request
  // bytes; response: ScopeRule, ListScopeRulesResponse, DeleteScopeRuleResponse or
  // CloseScopeResponse bytes.
  grpc::ServerUnaryReactor* PutScopeRule(grpc::CallbackServerContext* context,
                                         const grpc::ByteBuffer* request,
                                         grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* GetScopeRule(grpc::CallbackServerContext* context,
                                         const grpc::ByteBuffer* request,
                                         grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* ListScopeRules(grpc::CallbackServerContext* context,
                                           const grpc::ByteBuffer* request,
                                           grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* DeleteScopeRule(grpc::CallbackServerContext* context,
                                            const grpc::ByteBuffer* request,
                                            grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* CloseScope(grpc::CallbackServerContext* context,
                                       const grpc::ByteBuffer* request,
                                       grpc::ByteBuffer* response) override;
  // Request: orderhold.v1.ReturnUnitsRequest bytes; response: ReturnUnitsResponse bytes
  // (domain/return_service.h).
  grpc::ServerUnaryReactor* ReturnUnits(grpc::CallbackServerContext* context,
                                        const grpc::ByteBuffer* request,
                                        grpc::ByteBuffer* response) override;
  // Request: orderhold.v1.ReleaseScopeHoldsRequest bytes; response: its response bytes.
  grpc::ServerUnaryReactor* ReleaseScopeHolds(grpc::CallbackServerContext* context,
                                              const grpc::ByteBuffer* request,
                                              grpc::ByteBuffer* response) override;

 private:
  // The sum of the authorizer's and the tenants' generations: it moves with every reload.
  uint64_t TrustGeneration() const;

  domain::HoldService& holds_;
  domain::ScopeService& scopes_;
  domain::ScopeRuleService rules_;  // on the scopes' store
  domain::ReturnService returns_;   // on the scopes' store
  domain::EventService* const events_;
  domain::EventDispatcher* const dispatcher_;
  metrics::Metrics& metrics_;
  Authorizer* const authorizer_;
  Tenants* const tenants_;
  const TrustedProxies trusted_proxies_;
  WatchRegistry watches_;
};

}  // namespace orderhold::grpc_api

#endif  // ORDERHOLD_SERVER_GRPC_ORDERHOLD_SERVICE_H_
