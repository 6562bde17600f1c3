#include "server/grpc/orderhold_service.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/common/log.h"
#include "server/common/status_macros.h"
#include "server/grpc/conversions.h"
#include "server/grpc/lenient_requests.pb.h"

namespace orderhold::grpc_api {
namespace {

using metrics::Method;

absl::Status NoEventLog() {
  return absl::UnavailableError("hold events need the Redis store (this server runs --store=noop)");
}

// The API's name of the message a lenient mirror stands for ("orderhold.v1.PayRequest").
template <typename Request>
absl::string_view ApiName() {
  static const std::string* const name =
      new std::string(absl::StrCat("orderhold.v1.", Request::descriptor()->name()));
  return *name;
}

// One unary call in flight: its reactor, response buffer, deadline and metrics. Copyable (the
// copies share the call); Finish it exactly once, directly or through a Respond callback.
class UnaryCall {
 public:
  UnaryCall(metrics::Metrics& metrics, grpc::CallbackServerContext* context,
            grpc::ByteBuffer* response, Method method)
      : metrics_(&metrics),
        context_(context),
        reactor_(context->DefaultReactor()),
        response_(response),
        method_(method),
        deadline_(absl::FromChrono(context->deadline())) {}

  grpc::ServerUnaryReactor* reactor() const { return reactor_; }
  const grpc::CallbackServerContext& context() const { return *context_; }
  metrics::Metrics& metrics() const { return *metrics_; }
  Method method() const { return method_; }

  // The caller's typed identity: as the policy admitted it (Authorizer::Admit: set by ServeUnary
  // for the methods that ActsAsCaller), else PrincipalOf; "" without a client certificate.
  std::string caller() const { return caller_.has_value() ? *caller_ : PrincipalOf(*context_); }
  void set_caller(std::string caller) { caller_ = std::move(caller); }

  // The tenant the call acts in (tenants.h; "" = none), set by ServeUnary under --tenants.
  void set_tenant(std::string tenant) { tenant_ = std::move(tenant); }
  // The tenant the call acts in ("" = none).
  const std::string& tenant() const { return tenant_; }
  // What the caller sent, validated as sent and in the stored form of its tenant (domain/tenant.h):
  // INVALID_ARGUMENT naming the field.
  absl::StatusOr<std::string> User(std::string user_id) const {
    return domain::QualifyId("user_id", tenant_, std::move(user_id));
  }
  absl::StatusOr<std::string> Scope(std::string scope) const {
    return domain::QualifyScope(tenant_, std::move(scope));
  }
  absl::StatusOr<std::string> Group(std::string group) const {
    return domain::QualifyGroup(tenant_, std::move(group));
  }

  // The store call options of this call: its deadline is the store's.
  store::CallOptions options() const {
    store::CallOptions options;
    options.deadline = deadline_;
    return options;
  }

  // Ends the call with `status` and records its metrics.
  void Finish(const absl::Status& status) const {
    metrics_->RecordRequest(method_, status.code(), absl::Now() - start_);
    reactor_->Finish(ToGrpcStatus(status));
  }

  // Counts the call in orderhold_holds_rejected_total{reason="invalid_argument"}.
  void CountRejectedHold() const {
    metrics_->RecordRejected(metrics::RejectReason::kInvalidArgument);
  }

  // A domain callback (store::Callback<Reply>) that finishes the call: with the reply's error, or
  // OK and `to_proto(reply)` serialized as the response.
  // OK with `message` serialized as the response (the status to Finish with).
  absl::Status Serialize(const google::protobuf::Message& message) const {
    return SerializeToByteBuffer(message, response_);
  }

  template <typename ToProto>
  auto Respond(ToProto to_proto) const {
    return [call = *this, to_proto](auto reply) {
      if (!reply.ok()) return call.Finish(reply.status());
      call.Finish(SerializeToByteBuffer(to_proto(*reply), call.response_));
    };
  }

 private:
  metrics::Metrics* metrics_;
  grpc::CallbackServerContext* context_;
  grpc::ServerUnaryReactor* reactor_;
  grpc::ByteBuffer* response_;
  Method method_;
  absl::Time deadline_;
  absl::Time start_ = absl::Now();
  std::optional<std::string> caller_;  // set by ServeUnary under a policy
  std::string tenant_;                 // set by ServeUnary under --tenants
};

// Whether a request refused before the domain saw it also counts as a rejected hold
// (orderhold_holds_rejected_total{reason="invalid_argument"}): PlaceHold's do, as the domain's
// own validation counts them.
enum class Refusals { kNotCounted, kCountAsRejectedHolds };

// Whether `method` acts on what its caller owns (a consumer group), so that it needs the caller's
// identity as the policy admitted it (Authorizer::Admit); the others only need the decision.
bool ActsAsCaller(Method method) {
  return method == Method::kAckHoldEvents || method == Method::kDeleteConsumerGroup;
}

// The tenant `context`'s call to `method` acts in (null `tenants`: none), or why it is refused; a
// PERMISSION_DENIED counted in orderhold_calls_denied_total{method}, as the policy's are.
absl::StatusOr<std::string> TenantOf(Tenants* tenants, const grpc::ServerContextBase& context,
                                     Method method, metrics::Metrics& metrics) {
  if (tenants == nullptr) return std::string();
  absl::StatusOr<CallTenant> tenant = tenants->Resolve(context);
  if (!tenant.ok()) {
    if (absl::IsPermissionDenied(tenant.status())) metrics.calls_denied(method).Increment();
    return tenant.status();
  }
  return std::move(tenant->tenant);
}

// Serves one unary call: asks `authorizer` (null: no --authz_policy), then `tenants` (null: no
// --tenants) which tenant it acts in, parses `bytes` as `Request`
// (a lenient mirror), then `start(request, call)` starts the domain call, which finishes `call`
// from its callback, and returns OK, or returns why the request is refused. A call that is denied,
// does not parse or is refused finishes at once with that status. A denied call is not counted
// as a rejected hold: it never reached the domain.
template <typename Request, typename Start>
grpc::ServerUnaryReactor* ServeUnary(Authorizer* authorizer, Tenants* tenants, UnaryCall call,
                                     const grpc::ByteBuffer& bytes, Start start,
                                     Refusals refusals = Refusals::kNotCounted) {
  if (authorizer != nullptr && ActsAsCaller(call.method())) {
    absl::StatusOr<std::string> caller = authorizer->Admit(call.context(), call.method());
    if (!caller.ok()) {
      call.Finish(caller.status());
      return call.reactor();
    }
    call.set_caller(*std::move(caller));
  } else if (authorizer != nullptr) {
    if (absl::Status denied = authorizer->Check(call.context(), call.method()); !denied.ok()) {
      call.Finish(denied);
      return call.reactor();
    }
  }
  if (tenants != nullptr) {
    absl::StatusOr<std::string> tenant =
        TenantOf(tenants, call.context(), call.method(), call.metrics());
    if (!tenant.ok()) {
      call.Finish(tenant.status());
      return call.reactor();
    }
    call.set_tenant(*std::move(tenant));
  }
  Request request;
  absl::Status status = ParseFromByteBuffer(bytes, ApiName<Request>(), &request);
  if (status.ok()) status = start(request, call);
  if (!status.ok()) {
    if (refusals == Refusals::kCountAsRejectedHolds) call.CountRejectedHold();
    call.Finish(status);
  }
  return call.reactor();
}

// A WatchHoldEvents reactor that only finishes: the call ends with `status`.
class FailedWatch final : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  explicit FailedWatch(const grpc::Status& status) { Finish(status); }
  void OnDone() override { delete this; }
};

}  // namespace

OrderHoldService::OrderHoldService(domain::HoldService& holds, domain::ScopeService& scopes,
                                   domain::EventService* events,
                                   domain::EventDispatcher* dispatcher, metrics::Metrics& metrics,
                                   ServiceOptions options)
    : holds_(holds),
      scopes_(scopes),
      rules_(scopes.store(), scopes),
      returns_(scopes.store(), metrics),
      events_(events),
      dispatcher_(dispatcher),
      metrics_(metrics),
      authorizer_(options.authorizer),
      tenants_(options.tenants),
      trusted_proxies_(options.trusted_proxies),
      watches_(options.max_watches, options.max_watches_per_caller, &metrics.watches()) {
  if (tenants_ != nullptr) watches_.set_tenants(&tenants_->table());
}

grpc::ServerUnaryReactor* OrderHoldService::PlaceHold(grpc::CallbackServerContext* context,
                                                      const grpc::ByteBuffer* request,
                                                      grpc::ByteBuffer* response) {
  return ServeUnary<internal::PlaceHoldRequest>(
      authorizer_, tenants_, UnaryCall(metrics_, context, response, Method::kPlaceHold), *request,
      [this](internal::PlaceHoldRequest& in, const UnaryCall& call) -> absl::Status {
        ORDERHOLD_ASSIGN_OR_RETURN(domain::PlaceHoldCommand command, PlaceHoldCommandFromProto(in));
        ORDERHOLD_ASSIGN_OR_RETURN(command.user_id, call.User(std::move(command.user_id)));
        ORDERHOLD_ASSIGN_OR_RETURN(command.scope, call.Scope(std::move(command.scope)));
        if (!command.limit_class.empty()) {  // the class's principals are matched in the step
          command.caller_identities = PeerIdentities(
              AuthzRequestOf(call.context(), Method::kPlaceHold, /*with_headers=*/false));
        }
        holds_.PlaceHold(std::move(command), call.options(), call.Respond(PlaceHoldReplyToProto));
        return absl::OkStatus();
      },
      Refusals::kCountAsRejectedHolds);
}

grpc::ServerUnaryReactor* OrderHoldService::Pay(grpc::CallbackServerContext* context,
                                                const grpc::ByteBuffer* request,
                                                grpc::ByteBuffer* response) {
  return ServeUnary<internal::PayRequest>(
      authorizer_, tenants_, UnaryCall(metrics_, context, response, Method::kPay), *request,
      [this](internal::PayRequest& in, const UnaryCall& call) -> absl::Status {
        ORDERHOLD_ASSIGN_OR_RETURN(std::string user, call.User(std::move(*in.mutable_user_id())));
        holds_.Pay(std::move(user), std::move(*in.mutable_order_id()),
                   std::move(*in.mutable_payment_reference()), call.options(),
                   call.Respond(PayReplyToProto));
        return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* OrderHoldService::ListHolds(grpc::CallbackServerContext* context,
                                                      const grpc::ByteBuffer* request,
                                                      grpc::ByteBuffer* response) {
  return ServeUnary<internal::ListHoldsRequest>(
      authorizer_, tenants_, UnaryCall(metrics_, context, response, Method::kListHolds), *request,
      [this](internal::ListHoldsRequest& in, const UnaryCall& call) -> absl::Status {
        ORDERHOLD_ASSIGN_OR_RETURN(std::string user, call.User(std::move(*in.mutable_user_id())));
        ORDERHOLD_ASSIGN_OR_RETURN(std::string scope, call.Scope(std::move(*in.mutable_scope())));
        domain::ListPage page;
        page.page_size = in.page_size();
        page.page_token = std::move(*in.mutable_page_token());
        holds_.ListHolds(std::move(user), std::move(scope), std::move(page), call.options(),
                         call.Respond(ListHoldsReplyToProto));
        return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* OrderHoldService::CancelHold(grpc::CallbackServerContext* context,
                                                       const grpc::ByteBuffer* request,
                                                       grpc::ByteBuffer* response) {
  return ServeUnary<internal::CancelHoldRequest>(
      authorizer_, tenants_, UnaryCall(metrics_, context, response, Method::kCancelHold), *request,
      [this](internal::CancelHoldRequest& in, const UnaryCall& call) -> absl::Status {
        ORDERHOLD_ASSIGN_OR_RETURN(std::string user, call.User(std::move(*in.mutable_user_id())));
        holds_.Cancel(std::move(user), std::move(*in.mutable_order_id()), call.options(),
                      call.Respond(CancelReplyToProto));
        return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* OrderHoldService::ExtendHold(grpc::CallbackServerContext* context,
                                                       const grpc::ByteBuffer* request,
                                                       grpc::ByteBuffer* response) {
  return ServeUnary<internal::ExtendHoldRequest>(
      authorizer_, tenants_, UnaryCall(metrics_, context, response, Method::kExtendHold), *request,
      [this](internal::ExtendHoldRequest& in, const UnaryCall& call) -> absl::Status {
        ORDERHOLD_ASSIGN_OR_RETURN(domain::ExtendHoldCommand command,
                                   ExtendHoldCommandFromProto(in));
        ORDERHOLD_ASSIGN_OR_RETURN(command.user_id, call.User(std::move(command.user_id)));
        holds_.ExtendHold(std::move(command), call.options(), call.Respond(ExtendHoldReplyToProto));
        return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* OrderHoldService::GetHold(grpc::CallbackServerContext* context,
                                                    const grpc::ByteBuffer* request,
                                                    grpc::ByteBuffer* response) {
  return ServeUnary<internal::GetHoldRequest>(
      authorizer_, tenants_, UnaryCall(metrics_, context, response, Method::kGetHold), *request,
      [this](internal::GetHoldRequest& in, const UnaryCall& call) -> absl::Status {
        ORDERHOLD_ASSIGN_OR_RETURN(std::string user, call.User(std::move(*in.mutable_user_id())));
        holds_.GetHold(std::move(user), std::move(*in.mutable_order_id()), call.options(),
                       call.Respond(GetHoldReplyToProto));
        return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* OrderHoldService::ReleaseHolds(grpc::CallbackServerContext* context,
                                                         const grpc::ByteBuffer* request,
                                                         grpc::ByteBuffer* response) {
  return ServeUnary<internal::ReleaseHoldsRequest>(
      authorizer_, tenants_, UnaryCall(metrics_, context, response, Method::kReleaseHolds),
      *request, [this](internal::ReleaseHoldsRequest& in, const UnaryCall& call) -> absl::Status {
        ORDERHOLD_ASSIGN_OR_RETURN(std::string user, call.User(std::move(*in.mutable_user_id())));
        ORDERHOLD_ASSIGN_OR_RETURN(std::string scope, call.Scope(std::move(*in.mutable_scope())));
        holds_.ReleaseHolds(std::move(user), std::move(scope), call.options(),
                            call.Respond(ReleaseHoldsReplyToProto));
        return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* OrderHoldService::GetScopeUsage(grpc::CallbackServerContext* context,
                                                          const grpc::ByteBuffer* request,
                                                          grpc::ByteBuffer* response) {
  return ServeUnary<internal::GetScopeUsageRequest>(
      authorizer_, tenants_, UnaryCall(metrics_, context, response, Method::kGetScopeUsage),
      *request, [this](internal::GetScopeUsageRequest& in, const UnaryCall& call) -> absl::Status {
        ORDERHOLD_ASSIGN_OR_RETURN(std::string scope, call.Scope(std::move(*in.mutable_scope())));
        scopes_.GetScopeUsage(std::move(scope), call.options(),
                              call.Respond(ScopeUsageReplyToProto));
        return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* OrderHoldService::ListScopeHolds(grpc::CallbackServerContext* context,
                                                           const grpc::ByteBuffer* request,
                                                           grpc::ByteBuffer* response) {
  return ServeUnary<internal::ListScopeHoldsRequest>(
      authorizer_, tenants_, UnaryCall(metrics_, context, response, Method::kListScopeHolds),
      *request, [this](internal::ListScopeHoldsRequest& in, const UnaryCall& call) -> absl::Status {
        ORDERHOLD_ASSIGN_OR_RETURN(std::string scope, call.Scope(std::move(*in.mutable_scope())));
        domain::ListPage page;
        page.page_size = in.page_size();
        page.page_token = std::move(*in.mutable_page_token());
        scopes_.ListScopeHolds(std::move(scope), std::move(page), call.options(),
                               call.Respond(ListScopeHoldsReplyToProto));
        return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* OrderHoldService::ReleaseScopeHolds(grpc::CallbackServerContext* context,
                                                              const grpc::ByteBuffer* request,
                                                              grpc::ByteBuffer* response) {
  return ServeUnary<internal::ReleaseScopeHoldsRequest>(
      authorizer_, tenants_, UnaryCall(metrics_, context, response, Method::kReleaseScopeHolds),
      *request,
      [this](internal::ReleaseScopeHoldsRequest& in, const UnaryCall& call) -> absl::Status {
        ORDERHOLD_ASSIGN_OR_RETURN(std::string scope, call.Scope(std::move(*in.mutable_scope())));
        scopes_.ReleaseScopeHolds(std::move(scope), call.options(),
                                  call.Respond(ReleaseScopeHoldsReplyToProto));
        return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* OrderHoldService::PutScopeRule(grpc::CallbackServerContext* context,
                                                         const grpc::ByteBuffer* request,
                                                         grpc::ByteBuffer* response) {
  return ServeUnary<internal::PutScopeRuleRequest>(
      authorizer_, tenants_, UnaryCall(metrics_, context, response, Method::kPutScopeRule),
      *request, [this](internal::PutScopeRuleRequest& in, const UnaryCall& call) -> absl::Status {
        absl::StatusOr<std::string> scope =
            call.Scope(std::move(*in.mutable_rule()->mutable_scope()));
        if (!scope.ok()) {
          return absl::InvalidArgumentError(absl::StrCat("rule.", scope.status().message()));
        }
        ORDERHOLD_ASSIGN_OR_RETURN(store::ScopeRuleRecord rule,
                                   ScopeRuleFromProto(in.rule(), *std::move(scope)));
        rules_.PutScopeRule(std::move(rule), call.options(), call.Respond(ScopeRuleReplyToProto));
        return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* OrderHoldService::GetScopeRule(grpc::CallbackServerContext* context,
                                                         const grpc::ByteBuffer* request,
                                                         grpc::ByteBuffer* response) {
  return ServeUnary<internal::GetScopeRuleRequest>(
      authorizer_, tenants_, UnaryCall(metrics_, context, response, Method::kGetScopeRule),
      *request, [this](internal::GetScopeRuleRequest& in, const UnaryCall& call) -> absl::Status {
        ORDERHOLD_ASSIGN_OR_RETURN(std::string scope, call.Scope(std::move(*in.mutable_scope())));
        rules_.GetScopeRule(std::move(scope), call.options(), call.Respond(ScopeRuleReplyToProto));
        return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* OrderHoldService::ListScopeRules(grpc::CallbackServerContext* context,
                                                           const grpc::ByteBuffer* request,
                                                           grpc::ByteBuffer* response) {
  return ServeUnary<internal::ListScopeRulesRequest>(
      authorizer_, tenants_, UnaryCall(metrics_, context, response, Method::kListScopeRules),
      *request, [this](internal::ListScopeRulesRequest& in, const UnaryCall& call) -> absl::Status {
        domain::ListPage page;
        page.page_size = in.page_size();
        page.page_token = std::move(*in.mutable_page_token());
        rules_.ListScopeRules(call.tenant(), std::move(page), call.options(),
                              call.Respond(ListScopeRulesReplyToProto));
        return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* OrderHoldService::DeleteScopeRule(grpc::CallbackServerContext* context,
                                                            const grpc::ByteBuffer* request,
                                                            grpc::ByteBuffer* response) {
  return ServeUnary<internal::DeleteScopeRuleRequest>(
      authorizer_, tenants_, UnaryCall(metrics_, context, response, Method::kDeleteScopeRule),
      *request,
      [this](internal::DeleteScopeRuleRequest& in, const UnaryCall& call) -> absl::Status {
        ORDERHOLD_ASSIGN_OR_RETURN(std::string scope, call.Scope(std::move(*in.mutable_scope())));
        rules_.DeleteScopeRule(
            std::move(scope), std::move(*in.mutable_etag()), call.options(),
            call.Respond([](absl::Time) { return v1::DeleteScopeRuleResponse(); }));
        return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* OrderHoldService::CloseScope(grpc::CallbackServerContext* context,
                                                       const grpc::ByteBuffer* request,
                                                       grpc::ByteBuffer* response) {
  return ServeUnary<internal::CloseScopeRequest>(
      authorizer_, tenants_, UnaryCall(metrics_, context, response, Method::kCloseScope), *request,
      [this](internal::CloseScopeRequest& in, const UnaryCall& call) -> absl::Status {
        ORDERHOLD_ASSIGN_OR_RETURN(std::string scope, call.Scope(std::move(*in.mutable_scope())));
        rules_.CloseScope(std::move(scope), in.release_holds(), call.options(),
                          call.Respond(CloseScopeReplyToProto));
        return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* OrderHoldService::ReturnUnits(grpc::CallbackServerContext* context,
                                                        const grpc::ByteBuffer* request,
                                                        grpc::ByteBuffer* response) {
  return ServeUnary<internal::ReturnUnitsRequest>(
      authorizer_, tenants_, UnaryCall(metrics_, context, response, Method::kReturnUnits), *request,
      [this](internal::ReturnUnitsRequest& in, const UnaryCall& call) -> absl::Status {
        ORDERHOLD_ASSIGN_OR_RETURN(std::string user, call.User(std::move(*in.mutable_user_id())));
        domain::ReturnUnitsCommand command{.user_id = std::move(user),
                                           .order_id = std::move(*in.mutable_order_id()),
                                           .units = in.units(),
                                           .request_id = std::move(*in.mutable_request_id())};
        returns_.ReturnUnits(std::move(command), call.options(),
                             call.Respond(ReturnUnitsReplyToProto));
        return absl::OkStatus();
      });
}

uint64_t OrderHoldService::TrustGeneration() const {
  return (authorizer_ == nullptr ? 0 : authorizer_->generation()) +
         (tenants_ == nullptr ? 0 : tenants_->generation());
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* OrderHoldService::WatchHoldEvents(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request) {
  // A reload between the checks below and the watch's registration would not see it: check
  // again once it is registered when one came.
  const uint64_t generation = TrustGeneration();
  absl::StatusOr<domain::WatchSpec> spec = [&]() -> absl::StatusOr<domain::WatchSpec> {
    std::string caller;
    if (authorizer_ != nullptr) {
      ORDERHOLD_ASSIGN_OR_RETURN(caller, authorizer_->Admit(*context, Method::kWatchHoldEvents));
    } else {
      caller = PrincipalOf(*context);
    }
    ORDERHOLD_ASSIGN_OR_RETURN(std::string tenant,
                               TenantOf(tenants_, *context, Method::kWatchHoldEvents, metrics_));
    internal::WatchHoldEventsRequest parsed;
    ORDERHOLD_RETURN_IF_ERROR(
        ParseFromByteBuffer(*request, ApiName<internal::WatchHoldEventsRequest>(), &parsed));
    if (events_ == nullptr || dispatcher_ == nullptr) return NoEventLog();
    ORDERHOLD_ASSIGN_OR_RETURN(domain::WatchSpec watch, WatchSpecFromProto(parsed));
    ORDERHOLD_ASSIGN_OR_RETURN(watch.group, domain::QualifyGroup(tenant, std::move(watch.group)));
    if (tenants_ != nullptr) watch.tenant = std::move(tenant);
    watch.caller = std::move(caller);
    return watch;
  }();
  if (!spec.ok()) {
    metrics_.RecordRequest(Method::kWatchHoldEvents, spec.status().code(), absl::ZeroDuration());
    return new FailedWatch(ToGrpcStatus(spec.status()));
  }
  std::optional<AuthzRequest> authz;
  if (authorizer_ != nullptr || tenants_ != nullptr) {
    authz = AuthzRequestOf(*context, Method::kWatchHoldEvents);
  }
  auto* watch = new HoldEventWatch(*events_, *dispatcher_, metrics_, watches_, *std::move(spec),
                                   CallerKeyOf(*context, trusted_proxies_), std::move(authz));
  if (TrustGeneration() != generation) RecheckWatches();
  return watch;
}

void OrderHoldService::RecheckWatches() {
  if (authorizer_ == nullptr && tenants_ == nullptr) return;
  const int ended = watches_.EndDenied(
      [this](const AuthzRequest& request, const std::optional<std::string>& tenant) {
        if (authorizer_ != nullptr && !authorizer_->Allows(request)) {
          return absl::PermissionDeniedError(
              absl::StrCat("the authorization policy was reloaded and no longer allows this "
                           "caller to call ",
                           request.path));
        }
        if (tenants_ != nullptr) {
          std::vector<std::string> header;
          for (const auto& [key, value] : request.headers) {
            if (key == kTenantHeader) header.push_back(value);
          }
          const absl::StatusOr<CallTenant> now = tenants_->Resolve(request, header);
          if (!now.ok() || now->tenant != tenant.value_or("")) {
            return absl::PermissionDeniedError(
                "the tenants file was reloaded and this caller no longer acts in the watch's "
                "tenant");
          }
        }
        return absl::OkStatus();
      });
  if (ended == 0) return;
  metrics_.calls_denied(Method::kWatchHoldEvents).Increment(ended);
  LogInfo("authz: ended ", ended,
          " open WatchHoldEvents streams that the reloaded policy or tenants no longer allow");
}

grpc::ServerUnaryReactor* OrderHoldService::AckHoldEvents(grpc::CallbackServerContext* context,
                                                          const grpc::ByteBuffer* request,
                                                          grpc::ByteBuffer* response) {
  return ServeUnary<internal::AckHoldEventsRequest>(
      authorizer_, tenants_, UnaryCall(metrics_, context, response, Method::kAckHoldEvents),
      *request, [this](internal::AckHoldEventsRequest& in, const UnaryCall& call) -> absl::Status {
        if (events_ == nullptr) return NoEventLog();
        ORDERHOLD_ASSIGN_OR_RETURN(std::string group,
                                   call.Group(std::move(*in.mutable_consumer_group())));
        std::vector<std::string> ids(in.event_ids().begin(), in.event_ids().end());
        events_->Ack(std::move(group), call.caller(), ids, call.options(),
                     call.Respond(AckedToProto));
        return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* OrderHoldService::DeleteConsumerGroup(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  return ServeUnary<internal::DeleteConsumerGroupRequest>(
      authorizer_, tenants_, UnaryCall(metrics_, context, response, Method::kDeleteConsumerGroup),
      *request,
      [this](internal::DeleteConsumerGroupRequest& in, const UnaryCall& call) -> absl::Status {
        if (events_ == nullptr) return NoEventLog();
        std::string group = std::move(*in.mutable_consumer_group());
        ORDERHOLD_ASSIGN_OR_RETURN(std::string stored, call.Group(group));
        events_->DeleteGroup(std::move(stored), call.caller(), call.options(),
                             [call, group](absl::StatusOr<bool> existed) {
                               if (!existed.ok()) return call.Finish(existed.status());
                               if (!*existed) {
                                 return call.Finish(absl::NotFoundError(absl::StrCat(
                                     "consumer_group \"", group, "\" does not exist")));
                               }
                               call.Finish(call.Serialize(v1::DeleteConsumerGroupResponse()));
                             });
        return absl::OkStatus();
      });
}

}  // namespace orderhold::grpc_api
