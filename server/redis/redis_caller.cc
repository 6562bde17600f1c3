#include "server/redis/redis_caller.h"

#include "absl/strings/cord.h"

namespace orderhold::redis {
namespace {

// absl::Status payload marking a NotSentError.
constexpr char kNotSentPayload[] = "type.orderhold.dev/redis.NotSent";
// absl::Status payload marking a NotReplicatedError.
constexpr char kNotReplicatedPayload[] = "type.orderhold.dev/redis.NotReplicated";

}  // namespace

absl::Status NotSentError(absl::string_view message) {
  absl::Status status = absl::UnavailableError(message);
  status.SetPayload(kNotSentPayload, absl::Cord());
  return status;
}

bool IsNotSent(const absl::Status& status) {
  return absl::IsUnavailable(status) && status.GetPayload(kNotSentPayload).has_value();
}

absl::Status NotReplicatedError(absl::string_view message) {
  absl::Status status = absl::UnavailableError(message);
  status.SetPayload(kNotReplicatedPayload, absl::Cord());
  return status;
}

bool IsNotReplicated(const absl::Status& status) {
  return absl::IsUnavailable(status) && status.GetPayload(kNotReplicatedPayload).has_value();
}

}  // namespace orderhold::redis
