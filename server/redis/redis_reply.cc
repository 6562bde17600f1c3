#include "server/redis/redis_reply.h"

#include "absl/strings/str_cat.h"

namespace orderhold::redis {

RedisErrorKind ClassifyRedisError(absl::string_view error) {
  const absl::string_view code = error.substr(0, error.find(' '));
  if (code == "NOSCRIPT" || error == "ERR Function not found") return RedisErrorKind::kNoScript;
  if (code == "READONLY" || code == "MASTERDOWN") return RedisErrorKind::kNotPrimary;
  if (code == "LOADING" || code == "BUSY" || code == "NOREPLICAS" || code == "OOM") {
    return RedisErrorKind::kRetryable;
  }
  if (code == "TRYAGAIN" || code == "CLUSTERDOWN") return RedisErrorKind::kTryAgain;
  if (code == "MOVED") return RedisErrorKind::kMoved;
  if (code == "ASK") return RedisErrorKind::kAsk;
  return RedisErrorKind::kOther;
}

absl::Status RedisErrorStatus(absl::string_view error) {
  return absl::UnavailableError(absl::StrCat("redis: ", error));
}

}  // namespace orderhold::redis
