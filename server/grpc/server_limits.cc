#include "server/grpc/server_limits.h"

#include <cstdint>
#include <limits>

#include "absl/strings/str_cat.h"
#include "grpc/grpc.h"
#include "grpcpp/resource_quota.h"

namespace orderhold::grpc_api {
namespace {

// Milliseconds for a channel argument (an int).
int Ms(absl::Duration d) {
  return static_cast<int>(
      std::min<int64_t>(absl::ToInt64Milliseconds(d), std::numeric_limits<int>::max()));
}

absl::Status AtLeastASecond(absl::string_view flag, absl::Duration d, bool zero_allowed) {
  if ((zero_allowed && d == absl::ZeroDuration()) || d >= absl::Seconds(1)) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(flag, ": must be at least 1s", zero_allowed ? " (or 0: none)" : ""));
}

}  // namespace

absl::Status ValidateServerLimits(const ServerLimits& limits) {
  if (limits.memory_quota_bytes != 0 && limits.memory_quota_bytes < kMinMemoryQuotaBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("grpc_memory_quota: must be 0 or >= ", kMinMemoryQuotaBytes, " bytes"));
  }
  if (limits.max_concurrent_streams < 1 ||
      limits.max_concurrent_streams > kMaxConcurrentStreamsLimit) {
    return absl::InvalidArgumentError(
        absl::StrCat("grpc_max_concurrent_streams: must be 1-", kMaxConcurrentStreamsLimit));
  }
  if (limits.max_receive_message_bytes < kMinReceiveMessageBytes ||
      limits.max_receive_message_bytes > kMaxReceiveMessageBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("grpc_max_receive_message_size: must be ", kMinReceiveMessageBytes, "-",
                     kMaxReceiveMessageBytes, " bytes (the largest valid request is ~300 KB)"));
  }
  if (auto s = AtLeastASecond("grpc_keepalive_time", limits.keepalive_time, false); !s.ok()) {
    return s;
  }
  if (auto s = AtLeastASecond("grpc_keepalive_timeout", limits.keepalive_timeout, false); !s.ok()) {
    return s;
  }
  if (auto s = AtLeastASecond("grpc_max_connection_idle", limits.max_connection_idle, true);
      !s.ok()) {
    return s;
  }
  if (auto s = AtLeastASecond("grpc_max_connection_age", limits.max_connection_age, true);
      !s.ok()) {
    return s;
  }
  return AtLeastASecond("grpc_max_connection_age_grace", limits.max_connection_age_grace, true);
}

void ApplyServerLimits(const ServerLimits& limits, grpc::ServerBuilder& builder) {
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, limits.max_concurrent_streams);
  builder.SetMaxReceiveMessageSize(limits.max_receive_message_bytes);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, Ms(limits.keepalive_time));
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, Ms(limits.keepalive_timeout));
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  // gRPC stops pinging after 2 pings without data by default: a watch with no events would then
  // never find out that its client froze.
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS,
                             Ms(kMinClientPingInterval));
  if (limits.max_connection_idle > absl::ZeroDuration()) {
    builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS, Ms(limits.max_connection_idle));
  }
  if (limits.max_connection_age > absl::ZeroDuration()) {
    builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_MS, Ms(limits.max_connection_age));
    if (limits.max_connection_age_grace > absl::ZeroDuration()) {
      builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_GRACE_MS,
                                 Ms(limits.max_connection_age_grace));
    }
  }
  if (limits.memory_quota_bytes > 0) {
    grpc::ResourceQuota quota("orderhold-server");
    quota.Resize(static_cast<size_t>(limits.memory_quota_bytes));
    builder.SetResourceQuota(quota);
  }
}

}  // namespace orderhold::grpc_api
