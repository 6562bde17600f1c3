// A redis:// URL as Config::redis_url holds it (parsed), for tests that build a Config themselves:
// in production ConfigFromFlags parses --redis_url once. Header-only.
//   config.redis_url = ParsedRedisUrl(redis->url());
#ifndef ORDERHOLD_TESTS_TESTING_PARSED_REDIS_URL_H_
#define ORDERHOLD_TESTS_TESTING_PARSED_REDIS_URL_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "gtest/gtest.h"
#include "server/redis/redis_url.h"

namespace orderhold::testing {

// `url` parsed (redis/redis_url.h). A URL that does not parse fails the test and gives the default
// endpoint, so that the test goes on to fail where it uses it rather than crash.
inline redis::RedisEndpoint ParsedRedisUrl(absl::string_view url) {
  absl::StatusOr<redis::RedisEndpoint> endpoint = redis::ParseRedisUrl(url);
  EXPECT_TRUE(endpoint.ok()) << endpoint.status();
  return endpoint.ok() ? *std::move(endpoint) : redis::RedisEndpoint{};
}

}  // namespace orderhold::testing

#endif  // ORDERHOLD_TESTS_TESTING_PARSED_REDIS_URL_H_
