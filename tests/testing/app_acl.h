// The app user's ACL of deploy/redis/orderhold.acl (deploy/README.md "Redis settings for a
// deployment"), for tests that run OrderHold as that user and so prove the documented ACL is
// enough.
#ifndef ORDERHOLD_TESTS_TESTING_APP_ACL_H_
#define ORDERHOLD_TESTS_TESTING_APP_ACL_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace orderhold::testing {

// The file's rules after `user <name> on ><password>` ("resetkeys", "~orderhold:*", "-@all",
// "+eval", ...). With `key_prefix` not empty (tests that use another --key_prefix), its key and
// channel patterns "~orderhold:*" and "&orderhold:*" become "~<key_prefix>*" and
// "&<key_prefix>*", so the app user may use that prefix's keys and publish its nudges. NOT_FOUND
// when the file cannot be read, INVALID_ARGUMENT when its first line is not such a `user` line.
// Thread-safe.
absl::StatusOr<std::vector<std::string>> AppAclRules(absl::string_view key_prefix = "");

// The same rules joined by spaces (SentinelGroupOptions::app_acl_rules).
absl::StatusOr<std::string> AppAclRulesLine(absl::string_view key_prefix = "");

}  // namespace orderhold::testing

#endif  // ORDERHOLD_TESTS_TESTING_APP_ACL_H_
