#include "client/bench/workload.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/random/distributions.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

namespace orderhold::client::bench {
namespace {

// The mix keys as a user reads them in an error message: "place, pay, list, cancel, extend or
// get".
std::string MixKeyList() {
  std::string out;
  for (int m = 0; m < kNumMethods; ++m) {
    absl::StrAppend(&out, m == 0 ? "" : (m == kNumMethods - 1 ? " or " : ", "),
                    MethodMixKey(static_cast<Method>(m)));
  }
  return out;
}

}  // namespace

absl::InsecureBitGen& ThreadBitGen() {
  thread_local absl::InsecureBitGen gen;
  return gen;
}

int64_t Mix::Total() const {
  int64_t total = 0;
  for (int64_t w : weights) total += w;
  return total;
}

absl::StatusOr<Mix> ParseMix(absl::string_view spec) {
  if (absl::StripAsciiWhitespace(spec).empty()) {
    return absl::InvalidArgumentError("--mix is empty; want e.g. place=70,pay=20,list=10");
  }
  Mix mix;
  std::array<bool, kNumMethods> seen{};
  for (absl::string_view part : absl::StrSplit(spec, ',')) {
    part = absl::StripAsciiWhitespace(part);
    const size_t eq = part.find('=');
    if (eq == absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--mix entry \"", part, "\" is not method=weight (e.g. place=70,pay=20,list=10)"));
    }
    const absl::string_view key = absl::StripAsciiWhitespace(part.substr(0, eq));
    const absl::string_view value = absl::StripAsciiWhitespace(part.substr(eq + 1));
    int m = 0;
    while (m < kNumMethods && MethodMixKey(static_cast<Method>(m)) != key) ++m;
    if (m == kNumMethods) {
      return absl::InvalidArgumentError(
          absl::StrCat("--mix: unknown method \"", key, "\" (want ", MixKeyList(), ")"));
    }
    if (seen[m]) {
      return absl::InvalidArgumentError(absl::StrCat("--mix: \"", key, "\" is given twice"));
    }
    seen[m] = true;
    int64_t weight = 0;
    if (!absl::SimpleAtoi(value, &weight) || weight < 0 || weight > kMaxMixWeight) {
      return absl::InvalidArgumentError(absl::StrCat("--mix: the weight of ", key,
                                                     " must be an integer from 0 to ",
                                                     kMaxMixWeight, ", got \"", value, "\""));
    }
    mix.weights[m] = weight;
  }
  if (mix.Total() == 0) return absl::InvalidArgumentError("--mix: all weights are zero");
  return mix;
}

std::string FormatMix(const Mix& mix) {
  std::string out;
  for (int m = 0; m < kNumMethods; ++m) {
    if (mix.weights[m] == 0) continue;
    absl::StrAppend(&out, out.empty() ? "" : ",", MethodMixKey(static_cast<Method>(m)), "=",
                    mix.weights[m]);
  }
  return out;
}

Method PickMethod(const Mix& mix, int64_t draw) {
  for (int m = 0; m < kNumMethods; ++m) {
    if (draw < mix.weights[m]) return static_cast<Method>(m);
    draw -= mix.weights[m];
  }
  // Only reachable with draw >= Total(); the last method with a weight is the closest answer.
  for (int m = kNumMethods - 1; m > 0; --m) {
    if (mix.weights[m] > 0) return static_cast<Method>(m);
  }
  return static_cast<Method>(0);
}

absl::StatusOr<Distribution> ParseDistribution(absl::string_view name) {
  if (name == "uniform") return Distribution::kUniform;
  if (name == "zipf") return Distribution::kZipf;
  return absl::InvalidArgumentError(
      absl::StrCat("--distribution must be uniform or zipf, got \"", name, "\""));
}

absl::string_view DistributionName(Distribution distribution) {
  return distribution == Distribution::kZipf ? "zipf" : "uniform";
}

std::string UserId(absl::string_view prefix, int64_t index) { return absl::StrCat(prefix, index); }

std::string OrderId(uint32_t run_seed, int64_t sequence) {
  return absl::StrFormat("b%08x-%d", run_seed, sequence);
}

std::string MissingOrderId(uint32_t run_seed, int64_t sequence) {
  return absl::StrFormat("b%08x-missing-%d", run_seed, sequence);
}

UserPicker::UserPicker(int64_t users, Distribution distribution, double zipf_exponent)
    : users_(users), distribution_(distribution) {
  if (distribution_ == Distribution::kZipf) {
    // zipf_distribution draws from [0, k] inclusive, hence users - 1; v = 1 makes P(i) ~ (1+i)^-q.
    zipf_.emplace(users_ - 1, zipf_exponent, 1.0);
  }
}

int64_t UserPicker::Draw() const {
  if (zipf_.has_value()) {
    // The distribution object is a thin wrapper around the precomputed parameters.
    absl::zipf_distribution<int64_t> zipf(*zipf_);
    return zipf(ThreadBitGen());
  }
  return absl::Uniform<int64_t>(ThreadBitGen(), 0, users_);
}

bool PlaceShape::IsSet() const {
  return scopes != 0 || quantity != 0 || scope_max_holds != 0 || scope_max_units != 0;
}

absl::Status ValidatePlaceShape(const PlaceShape& shape) {
  // The server's bounds (orderhold.proto); beyond them every PlaceHold would be INVALID_ARGUMENT.
  constexpr int64_t kMaxQuantity = 1'000'000'000;
  constexpr int64_t kMaxScopeHolds = 10'000;
  constexpr int64_t kMaxScopeUnits = 1'000'000'000;
  const auto out_of_range = [](absl::string_view flag, int64_t max, int64_t value) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, " must be from 0 to ", max, ", got ", value));
  };
  if (shape.scopes < 0 || shape.scopes > kMaxScopes) {
    return out_of_range("scopes", kMaxScopes, shape.scopes);
  }
  if (shape.quantity < 0 || shape.quantity > kMaxQuantity) {
    return out_of_range("quantity", kMaxQuantity, shape.quantity);
  }
  if (shape.scope_max_holds < 0 || shape.scope_max_holds > kMaxScopeHolds) {
    return out_of_range("scope_max_holds", kMaxScopeHolds, shape.scope_max_holds);
  }
  if (shape.scope_max_units < 0 || shape.scope_max_units > kMaxScopeUnits) {
    return out_of_range("scope_max_units", kMaxScopeUnits, shape.scope_max_units);
  }
  if (shape.scopes == 0 && (shape.scope_max_holds != 0 || shape.scope_max_units != 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", shape.scope_max_holds != 0 ? "scope_max_holds" : "scope_max_units",
                     " needs --scopes > 0: scope limits apply to a scope"));
  }
  if (shape.scope_max_units != 0 && std::max<int64_t>(shape.quantity, 1) > shape.scope_max_units) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--quantity ", std::max<int64_t>(shape.quantity, 1), " is above --scope_max_units ",
        shape.scope_max_units, ": every PlaceHold would be INVALID_ARGUMENT"));
  }
  return absl::OkStatus();
}

std::string FormatPlaceShape(const PlaceShape& shape) {
  if (!shape.IsSet()) return "unscoped";
  std::string out;
  for (const auto& [key, value] : {std::pair<absl::string_view, int64_t>{"scopes", shape.scopes},
                                   {"quantity", shape.quantity},
                                   {"scope_max_holds", shape.scope_max_holds},
                                   {"scope_max_units", shape.scope_max_units}}) {
    if (value != 0) absl::StrAppend(&out, out.empty() ? "" : ",", key, "=", value);
  }
  return out;
}

std::string ScopeName(int64_t index) { return absl::StrCat("event:", index); }

namespace {

std::vector<std::string> ScopeNames(int64_t scopes) {
  std::vector<std::string> names;
  names.reserve(static_cast<size_t>(std::max<int64_t>(scopes, 0)));
  for (int64_t i = 0; i < scopes; ++i) names.push_back(ScopeName(i));
  return names;
}

}  // namespace

PlaceShaper::PlaceShaper(const PlaceShape& shape)
    : shape_(shape), scope_names_(ScopeNames(shape.scopes)) {}

int64_t PlaceShaper::DrawScope() const {
  if (shape_.scopes <= 1) return 0;
  return absl::Uniform<int64_t>(ThreadBitGen(), 0, shape_.scopes);
}

void PlaceShaper::Apply(int64_t scope_index, orderhold::v1::PlaceHoldRequest* request) const {
  if (!scope_names_.empty()) request->set_scope(scope_names_[static_cast<size_t>(scope_index)]);
  if (shape_.quantity != 0) request->set_quantity(static_cast<uint32_t>(shape_.quantity));
  if (shape_.scope_max_holds != 0 || shape_.scope_max_units != 0) {
    request->mutable_scope_limits()->set_max_holds(static_cast<uint32_t>(shape_.scope_max_holds));
    request->mutable_scope_limits()->set_max_units(static_cast<uint32_t>(shape_.scope_max_units));
  }
}

HoldPool::HoldPool(int64_t capacity) : capacity_(capacity) {}

void HoldPool::Push(PoolEntry entry) {
  absl::MutexLock lock(&mu_);
  if (size_ < capacity_) {
    const int64_t slot = (start_ + size_) % capacity_;
    if (slot == static_cast<int64_t>(ring_.size())) {
      ring_.push_back(entry);
    } else {
      ring_[slot] = entry;
    }
    ++size_;
    return;
  }
  // Full: the newest entry replaces the oldest, which becomes the newest slot.
  ring_[start_] = entry;
  start_ = (start_ + 1) % capacity_;
}

std::optional<PoolEntry> HoldPool::Pop() {
  absl::MutexLock lock(&mu_);
  if (size_ == 0) return std::nullopt;
  --size_;
  return ring_[(start_ + size_) % capacity_];
}

std::optional<PoolEntry> HoldPool::Sample(uint64_t draw) const {
  absl::MutexLock lock(&mu_);
  if (size_ == 0) return std::nullopt;
  const int64_t window = std::min(size_, kSampleWindow);
  const int64_t back = static_cast<int64_t>(draw % static_cast<uint64_t>(window));
  // The newest entry is at start_ + size_ - 1; back <= size_ - 1 keeps the index >= start_.
  return ring_[(start_ + size_ - 1 - back) % capacity_];
}

int64_t HoldPool::size() const {
  absl::MutexLock lock(&mu_);
  return size_;
}

}  // namespace orderhold::client::bench
