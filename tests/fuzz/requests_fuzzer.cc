// Fuzzes what a client controls in a request: the bytes of each rpc's request message, decoded as
// the server decodes them (ParseFromByteBuffer into the lenient mirror, server/grpc/
// lenient_requests.proto), converted (conversions.h) and validated by HoldService over the no-op
// store, as OrderHoldService does before any store call (the scope rpcs included). The first byte
// picks the rpc (or, past
// the rpcs, a ListHolds page token given raw, decoded for a user and scope cut from the input,
// and an encoded token that must decode to its cursor). A crash, a sanitizer report, a leak or a
// token that does not round-trip is a finding; every input must end in OK or a clean status.
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"
#include "prometheus/registry.h"
#include "server/domain/event_service.h"
#include "server/domain/hold_service.h"
#include "server/domain/page_token.h"
#include "server/domain/scope_service.h"
#include "server/grpc/conversions.h"
#include "server/grpc/lenient_requests.pb.h"
#include "server/metrics/metrics.h"
#include "server/store/event_log.h"
#include "server/store/noop_hold_store.h"

namespace orderhold {
namespace {

struct Service {
  prometheus::Registry registry;
  metrics::Metrics metrics{registry};
  store::NoopHoldStore store;
  domain::HoldService holds{store, domain::HoldPolicy{}, metrics};
  domain::ScopeService scopes{store, holds, metrics};
};

template <typename Message>
bool Decode(const uint8_t* data, size_t size, const char* type, Message* out) {
  grpc::Slice slice(data, size);
  grpc::ByteBuffer bytes(&slice, 1);
  return grpc_api::ParseFromByteBuffer(bytes, type, out).ok();
}

// Runs the service call and drops the answer (the callback runs inline on the no-op store).
template <typename Reply, typename Call>
void Run(Call call) {
  (void)Await<Reply>(call);
}

}  // namespace
}  // namespace orderhold

// Rpcs 0-6: one user's holds (PlaceHold, Pay, CancelHold, ListHolds, ExtendHold, GetHold,
// ReleaseHolds).
int FuzzHoldRpc(orderhold::Service& service, uint8_t rpc, const uint8_t* data, size_t size) {
  using namespace orderhold;  // NOLINT: a fuzz entry point's helper
  domain::HoldService& holds = service.holds;
  switch (rpc) {
    case 0: {
      internal::PlaceHoldRequest request;
      if (!Decode(data, size, "orderhold.v1.PlaceHoldRequest", &request)) return 0;
      absl::StatusOr<domain::PlaceHoldCommand> command =
          grpc_api::PlaceHoldCommandFromProto(request);
      if (!command.ok()) return 0;
      Run<domain::PlaceHoldReply>(
          [&](auto done) { holds.PlaceHold(*std::move(command), {}, std::move(done)); });
      return 0;
    }
    case 1:
    case 2: {
      internal::PayRequest request;
      if (!Decode(data, size, "orderhold.v1.PayRequest", &request)) return 0;
      if (rpc == 1) {
        Run<domain::PayReply>([&](auto done) {
          holds.Pay(request.user_id(), request.order_id(), {}, std::move(done));
        });
      } else {
        Run<domain::CancelReply>([&](auto done) {
          holds.Cancel(request.user_id(), request.order_id(), {}, std::move(done));
        });
      }
      return 0;
    }
    case 3: {
      internal::ListHoldsRequest request;
      if (!Decode(data, size, "orderhold.v1.ListHoldsRequest", &request)) return 0;
      // The page fields as given: page_size any int32, page_token any bytes (page_token.h).
      Run<domain::ListHoldsReply>([&](auto done) {
        holds.ListHolds(request.user_id(), request.scope(),
                        domain::ListPage{request.page_size(), request.page_token()}, {},
                        std::move(done));
      });
      return 0;
    }
    case 4: {
      internal::ExtendHoldRequest request;
      if (!Decode(data, size, "orderhold.v1.ExtendHoldRequest", &request)) return 0;
      absl::StatusOr<domain::ExtendHoldCommand> command =
          grpc_api::ExtendHoldCommandFromProto(request);
      if (!command.ok()) return 0;
      Run<domain::ExtendHoldReply>(
          [&](auto done) { holds.ExtendHold(*std::move(command), {}, std::move(done)); });
      return 0;
    }
    case 5: {
      internal::GetHoldRequest request;
      if (!Decode(data, size, "orderhold.v1.GetHoldRequest", &request)) return 0;
      Run<domain::GetHoldReply>([&](auto done) {
        holds.GetHold(request.user_id(), request.order_id(), {}, std::move(done));
      });
      return 0;
    }
    case 6: {
      internal::ReleaseHoldsRequest request;
      if (!Decode(data, size, "orderhold.v1.ReleaseHoldsRequest", &request)) return 0;
      Run<domain::ReleaseHoldsReply>([&](auto done) {
        holds.ReleaseHolds(request.user_id(), request.scope(), {}, std::move(done));
      });
      return 0;
    }
  }
  return 0;
}

// Rpcs 7-13: events, scopes across users and page tokens.
int FuzzOtherRpc(orderhold::Service& service, uint8_t rpc, const uint8_t* data, size_t size) {
  using namespace orderhold;  // NOLINT: a fuzz entry point's helper
  domain::ScopeService& scopes = service.scopes;
  switch (rpc) {
    case 7: {
      internal::WatchHoldEventsRequest request;
      if (!Decode(data, size, "orderhold.v1.WatchHoldEventsRequest", &request)) return 0;
      absl::StatusOr<domain::WatchSpec> spec = grpc_api::WatchSpecFromProto(request);
      if (!spec.ok()) return 0;
      // What EventService::Subscribe checks before it touches the log.
      (void)domain::ValidateGroup(spec->group);
      (void)domain::ValidateId("consumer", spec->consumer);
      return 0;
    }
    case 8: {
      internal::AckHoldEventsRequest request;
      if (!Decode(data, size, "orderhold.v1.AckHoldEventsRequest", &request)) return 0;
      (void)domain::ValidateGroup(request.consumer_group());
      for (const std::string& id : request.event_ids()) (void)store::ParseEventId(id, 64);
      return 0;
    }
    case 9: {
      internal::DeleteConsumerGroupRequest request;
      if (!Decode(data, size, "orderhold.v1.DeleteConsumerGroupRequest", &request)) return 0;
      (void)domain::ValidateGroup(request.consumer_group());
      return 0;
    }
    case 10: {
      internal::GetScopeUsageRequest request;
      if (!Decode(data, size, "orderhold.v1.GetScopeUsageRequest", &request)) return 0;
      Run<domain::ScopeUsageReply>(
          [&](auto done) { scopes.GetScopeUsage(request.scope(), {}, std::move(done)); });
      return 0;
    }
    case 11: {
      internal::ListScopeHoldsRequest request;
      if (!Decode(data, size, "orderhold.v1.ListScopeHoldsRequest", &request)) return 0;
      Run<domain::ListScopeHoldsReply>([&](auto done) {
        scopes.ListScopeHolds(request.scope(),
                              domain::ListPage{request.page_size(), request.page_token()}, {},
                              std::move(done));
      });
      return 0;
    }
    case 12: {
      internal::ReleaseScopeHoldsRequest request;
      if (!Decode(data, size, "orderhold.v1.ReleaseScopeHoldsRequest", &request)) return 0;
      Run<domain::ReleaseScopeHoldsReply>(
          [&](auto done) { scopes.ReleaseScopeHolds(request.scope(), {}, std::move(done)); });
      return 0;
    }
    default: {
      // A page token as a caller may send it: the input split into user, scope and token.
      const std::string input(reinterpret_cast<const char*>(data), size);
      const size_t a = input.size() / 3, b = 2 * input.size() / 3;
      const std::string user = input.substr(0, a), scope = input.substr(a, b - a);
      const std::string token = input.substr(b);
      absl::StatusOr<store::ListCursor> cursor = domain::DecodePageToken(token, user, scope);
      if (cursor.ok()) {
        // Whatever decoded must encode back to a token that decodes to the same cursor.
        absl::StatusOr<store::ListCursor> again =
            domain::DecodePageToken(domain::EncodePageToken(user, scope, *cursor), user, scope);
        if (!again.ok() || again->order_id != cursor->order_id ||
            again->expire_time != cursor->expire_time) {
          __builtin_trap();
        }
      }
      // A token this server issues for any order id (1-128 bytes, as ids are) decodes to it.
      if (!token.empty() && token.size() <= 128) {
        const store::ListCursor issued{absl::FromUnixMillis(static_cast<int64_t>(size) * 1000),
                                       token};
        absl::StatusOr<store::ListCursor> back =
            domain::DecodePageToken(domain::EncodePageToken(user, scope, issued), user, scope);
        if (!back.ok() || back->order_id != token) __builtin_trap();
      }
      return 0;
    }
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static auto* service = new orderhold::Service;
  if (size == 0) return 0;
  const uint8_t rpc = data[0] % 14;
  return rpc < 7 ? FuzzHoldRpc(*service, rpc, data + 1, size - 1)
                 : FuzzOtherRpc(*service, rpc, data + 1, size - 1);
}
