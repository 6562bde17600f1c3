#include "client/bench/method.h"

#include <array>

namespace orderhold::client::bench {
namespace {

struct MethodInfo {
  Method method;
  absl::string_view name;
  absl::string_view mix_key;
};

// One row per method, in Method order.
constexpr std::array<MethodInfo, kNumMethods> kMethodInfo = {{
    {Method::kPlaceHold, "PlaceHold", "place"},
    {Method::kPay, "Pay", "pay"},
    {Method::kListHolds, "ListHolds", "list"},
    {Method::kCancelHold, "CancelHold", "cancel"},
    {Method::kExtendHold, "ExtendHold", "extend"},
    {Method::kGetHold, "GetHold", "get"},
    {Method::kReleaseHolds, "ReleaseHolds", "release"},
}};

}  // namespace

absl::string_view MethodName(Method method) {
  const int m = static_cast<int>(method);
  return m >= 0 && m < kNumMethods ? kMethodInfo[m].name : "Unknown";
}

absl::string_view MethodMixKey(Method method) {
  const int m = static_cast<int>(method);
  return m >= 0 && m < kNumMethods ? kMethodInfo[m].mix_key : "unknown";
}

}  // namespace orderhold::client::bench
