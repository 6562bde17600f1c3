// The RPCs orderhold-bench can send, and their two names: the RPC name used in reports
// ("PlaceHold") and the key used in --mix ("place"). Every other part of the bench indexes its
// per-method arrays by Method.
//
// Adding a method: add a Method enumerator before kCount, its row in kMethodInfo (method.cc), and
// its case in LoadGenerator::StartCall (load_generator.cc). --mix, the reports and the
// statistics then pick it up; only the --mix flag's help text in bench_main.cc lists the keys by
// hand. New methods go last: a mix's draws are laid out in Method order (PickMethod), so an
// existing --mix keeps drawing exactly as before.
#ifndef ORDERHOLD_CLIENT_BENCH_METHOD_H_
#define ORDERHOLD_CLIENT_BENCH_METHOD_H_

#include "absl/strings/string_view.h"

namespace orderhold::client::bench {

// The RPCs the generator can send. kCount is the number of methods, not a method.
enum class Method : int {
  kPlaceHold = 0,
  kPay,
  kListHolds,
  kCancelHold,
  kExtendHold,
  kGetHold,
  kReleaseHolds,
  kCount
};
inline constexpr int kNumMethods = static_cast<int>(Method::kCount);

// The RPC name of a method ("PlaceHold", "Pay", "ListHolds", "CancelHold", "ExtendHold",
// "GetHold", "ReleaseHolds"), as used in reports; "Unknown" for a value outside [0, kNumMethods).
// Pure.
absl::string_view MethodName(Method method);

// The key of a method in --mix ("place", "pay", "list", "cancel", "extend", "get", "release");
// "unknown" for a value outside [0, kNumMethods). Pure.
absl::string_view MethodMixKey(Method method);

}  // namespace orderhold::client::bench

#endif  // ORDERHOLD_CLIENT_BENCH_METHOD_H_
