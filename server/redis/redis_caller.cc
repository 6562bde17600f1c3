#include "server/redis/redis_caller.h"

#include "absl/strings/cord.h"

namespace orderhold::redis {
namespace {

// absl::Status payload marking a NotSentError.
constexpr char kNotSentPayload[] = "type.orderhold.dev/redis.NotSent";

}  // namespace

absl::Status NotSentError(absl::string_view message) {
  absl::Status status = absl::UnavailableError(message);
  status.SetPayload(kNotSentPayload, absl::Cord());
  return status;
}

bool IsNotSent(const absl::Status& status) {
  return absl::IsUnavailable(status) && status.GetPayload(kNotSentPayload).has_value();
}

}  // namespace orderhold::redis
