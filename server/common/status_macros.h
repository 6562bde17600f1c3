// Tiny status-propagation helpers. Abseil 20220623 has no RETURN_IF_ERROR / ASSIGN_OR_RETURN, so
// the project defines them once, here, instead of one variant per file.
#ifndef ORDERHOLD_SERVER_COMMON_STATUS_MACROS_H_
#define ORDERHOLD_SERVER_COMMON_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

// Returns `expr` (an absl::Status) from the enclosing function when it is not OK.
#define ORDERHOLD_RETURN_IF_ERROR(expr)        \
  do {                                         \
    ::absl::Status orderhold_status_ = (expr); \
    if (!orderhold_status_.ok()) {             \
      return orderhold_status_;                \
    }                                          \
  } while (false)

// Pastes two tokens after expanding them (ORDERHOLD_CONCAT_(x_, __LINE__) -> x_42): unique
// temporaries for the assign-or-return macros here and in tests/testing/status_matchers.h.
#define ORDERHOLD_CONCAT_INNER_(a, b) a##b
#define ORDERHOLD_CONCAT_(a, b) ORDERHOLD_CONCAT_INNER_(a, b)

// `lhs = value of expr` (an absl::StatusOr<T>), or returns its status from the enclosing function.
#define ORDERHOLD_ASSIGN_OR_RETURN(lhs, expr) \
  ORDERHOLD_ASSIGN_OR_RETURN_IMPL_(ORDERHOLD_CONCAT_(orderhold_statusor_, __LINE__), lhs, expr)
#define ORDERHOLD_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                     \
  if (!tmp.ok()) {                                       \
    return std::move(tmp).status();                      \
  }                                                      \
  lhs = std::move(tmp).value()

#endif  // ORDERHOLD_SERVER_COMMON_STATUS_MACROS_H_
