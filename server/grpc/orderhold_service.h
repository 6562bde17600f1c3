// OrderHoldService: the gRPC adapter of the OrderHold API (proto/orderhold/v1/orderhold.proto)
// on the callback API. Each call: convert the request (INVALID_ARGUMENT for a malformed ttl),
// hand it to domain::HoldService, and finish the reactor from the store's completion callback:
// no gRPC thread ever waits for Redis. Records orderhold_grpc_requests_total{method,code} and
// orderhold_grpc_request_duration_seconds{method}.
//
// The call's deadline is passed down to the store, which answers DEADLINE_EXCEEDED rather than
// working past it. Thread-safe.
#ifndef ORDERHOLD_SERVER_GRPC_ORDERHOLD_SERVICE_H_
#define ORDERHOLD_SERVER_GRPC_ORDERHOLD_SERVICE_H_

#include "orderhold/v1/orderhold.grpc.pb.h"
#include "server/domain/hold_service.h"
#include "server/metrics/metrics.h"

namespace orderhold::grpc_api {

class OrderHoldService final : public orderhold::v1::OrderHold::CallbackService {
 public:
  // `holds` and `metrics` must outlive the service (and the grpc::Server it is registered on).
  OrderHoldService(domain::HoldService& holds, metrics::Metrics& metrics);

  grpc::ServerUnaryReactor* PlaceHold(grpc::CallbackServerContext* context,
                                      const orderhold::v1::PlaceHoldRequest* request,
                                      orderhold::v1::PlaceHoldResponse* response) override;
  grpc::ServerUnaryReactor* Pay(grpc::CallbackServerContext* context,
                                const orderhold::v1::PayRequest* request,
                                orderhold::v1::PayResponse* response) override;
  grpc::ServerUnaryReactor* ListHolds(grpc::CallbackServerContext* context,
                                      const orderhold::v1::ListHoldsRequest* request,
                                      orderhold::v1::ListHoldsResponse* response) override;

 private:
  domain::HoldService& holds_;
  metrics::Metrics& metrics_;
};

// absl::Status -> grpc::Status (the codes are the same numbers).
grpc::Status ToGrpcStatus(const absl::Status& status);

}  // namespace orderhold::grpc_api

#endif  // ORDERHOLD_SERVER_GRPC_ORDERHOLD_SERVICE_H_
