// Unit tests of orderhold-bench's workload (client/bench/workload.h and method.h): mix parsing and
// method picking, the method names, the hold pool, the user picker, user and order ids, and the
// scoped mix (PlaceShape, PlaceShaper). No server, no clock. The few randomised tests (UserPicker)
// use large samples and bounds many standard deviations wide, so they do not flake.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/bench/method.h"
#include "client/bench/workload.h"
#include "orderhold/v1/orderhold.pb.h"

namespace orderhold::client::bench {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

int Index(Method method) { return static_cast<int>(method); }

// ---------------------------------------------------------------------------------------------
// ParseMix / FormatMix / MethodName / MethodMixKey

TEST(BenchMixTest, ParsesEveryMethodKey) {
  const absl::StatusOr<Mix> mix = ParseMix("place=70,pay=20,list=10,cancel=5,extend=4,get=3");
  ASSERT_TRUE(mix.ok()) << mix.status();
  EXPECT_EQ(mix->weights[Index(Method::kPlaceHold)], 70);
  EXPECT_EQ(mix->weights[Index(Method::kPay)], 20);
  EXPECT_EQ(mix->weights[Index(Method::kListHolds)], 10);
  EXPECT_EQ(mix->weights[Index(Method::kCancelHold)], 5);
  EXPECT_EQ(mix->weights[Index(Method::kExtendHold)], 4);
  EXPECT_EQ(mix->weights[Index(Method::kGetHold)], 3);
  EXPECT_EQ(mix->Total(), 112);
}

TEST(BenchMixTest, EachMethodKeySelectsItsMethodAlone) {
  // Whatever methods exist: each MethodMixKey parses, and sets that method's weight only.
  for (int m = 0; m < kNumMethods; ++m) {
    const std::string key(MethodMixKey(static_cast<Method>(m)));
    const absl::StatusOr<Mix> mix = ParseMix(key + "=3");
    ASSERT_TRUE(mix.ok()) << key << ": " << mix.status();
    for (int other = 0; other < kNumMethods; ++other) {
      EXPECT_EQ(mix->weights[other], other == m ? 3 : 0) << key << " / " << other;
    }
    EXPECT_EQ(FormatMix(*mix), key + "=3");
    EXPECT_EQ(PickMethod(*mix, 0), static_cast<Method>(m)) << key;
  }
}

TEST(BenchMixTest, AnyOrderWhitespaceAndMissingKeys) {
  const absl::StatusOr<Mix> mix = ParseMix("  list = 3 ,  place=1 ");
  ASSERT_TRUE(mix.ok()) << mix.status();
  EXPECT_EQ(mix->weights[Index(Method::kPlaceHold)], 1);
  EXPECT_EQ(mix->weights[Index(Method::kPay)], 0);
  EXPECT_EQ(mix->weights[Index(Method::kListHolds)], 3);
  EXPECT_EQ(mix->Total(), 4);
}

TEST(BenchMixTest, WeightsAreRatiosNotPercentages) {
  const absl::StatusOr<Mix> mix = ParseMix("place=7,pay=2,list=1");
  ASSERT_TRUE(mix.ok()) << mix.status();
  EXPECT_EQ(mix->Total(), 10);
}

TEST(BenchMixTest, SingleKeyAndExplicitZeroWeight) {
  const absl::StatusOr<Mix> place_only = ParseMix("place=100");
  ASSERT_TRUE(place_only.ok()) << place_only.status();
  EXPECT_THAT(place_only->weights, ElementsAre(100, 0, 0, 0, 0, 0, 0));

  const absl::StatusOr<Mix> with_zero = ParseMix("place=0,pay=5");
  ASSERT_TRUE(with_zero.ok()) << with_zero.status();
  EXPECT_THAT(with_zero->weights, ElementsAre(0, 5, 0, 0, 0, 0, 0));
}

TEST(BenchMixTest, AllZeroWeightsRejected) {
  const absl::StatusOr<Mix> mix = ParseMix("place=0,pay=0,list=0");
  ASSERT_FALSE(mix.ok());
  EXPECT_EQ(mix.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(mix.status().message()), HasSubstr("all weights are zero"));
}

TEST(BenchMixTest, NegativeWeightRejected) {
  const absl::StatusOr<Mix> mix = ParseMix("place=70,pay=-1");
  ASSERT_FALSE(mix.ok());
  EXPECT_EQ(mix.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(mix.status().message()), HasSubstr("pay"));
  EXPECT_THAT(std::string(mix.status().message()), HasSubstr("-1"));
}

TEST(BenchMixTest, NonIntegerAndHugeWeightsRejected) {
  for (const char* spec :
       {"place=abc", "place=1.5", "place=", "place=10000000000", "place=99999999999999999999999"}) {
    const absl::StatusOr<Mix> mix = ParseMix(spec);
    EXPECT_FALSE(mix.ok()) << spec;
    EXPECT_EQ(mix.status().code(), absl::StatusCode::kInvalidArgument) << spec;
  }
}

TEST(BenchMixTest, UnknownKeyRejected) {
  const absl::StatusOr<Mix> mix = ParseMix("place=1,refund=2");
  ASSERT_FALSE(mix.ok());
  EXPECT_EQ(mix.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(mix.status().message()), HasSubstr("unknown method"));
  EXPECT_THAT(std::string(mix.status().message()), HasSubstr("refund"));
  EXPECT_THAT(std::string(mix.status().message()),
              HasSubstr("(want place, pay, list, cancel, extend, get or release)"));
}

TEST(BenchMixTest, KeysAreCaseSensitive) {
  EXPECT_FALSE(ParseMix("PLACE=1").ok());
  EXPECT_FALSE(ParseMix("Place=1").ok());
}

TEST(BenchMixTest, CancelIsAMethod) {
  const absl::StatusOr<Mix> mix = ParseMix(" place = 70, cancel = 30 ");
  ASSERT_TRUE(mix.ok()) << mix.status();
  EXPECT_EQ(mix->weights[static_cast<int>(Method::kCancelHold)], 30);
  EXPECT_EQ(FormatMix(*mix), "place=70,cancel=30");
  EXPECT_EQ(MethodName(Method::kCancelHold), "CancelHold");
  EXPECT_FALSE(ParseMix("cancel=").ok());
}

TEST(BenchMixTest, ExtendAndGetAreMethods) {
  const absl::StatusOr<Mix> mix = ParseMix("place=50, extend=30 ,get=20");
  ASSERT_TRUE(mix.ok()) << mix.status();
  EXPECT_THAT(mix->weights, ElementsAre(50, 0, 0, 0, 30, 20, 0));
  EXPECT_EQ(FormatMix(*mix), "place=50,extend=30,get=20");
  EXPECT_FALSE(ParseMix("extend=").ok());
  EXPECT_FALSE(ParseMix("Get=1").ok());
  // The default mix and the mixes of tests/bench/run.sh draw exactly as before: the new methods
  // come after every old one.
  const absl::StatusOr<Mix> old = ParseMix("place=70,pay=20,list=10");
  ASSERT_TRUE(old.ok()) << old.status();
  EXPECT_EQ(old->Total(), 100);
  EXPECT_EQ(PickMethod(*old, 99), Method::kListHolds);
}

TEST(BenchMixTest, EmptyRejected) {
  for (const char* spec : {"", "   ", "\t"}) {
    const absl::StatusOr<Mix> mix = ParseMix(spec);
    ASSERT_FALSE(mix.ok()) << "\"" << spec << "\"";
    EXPECT_EQ(mix.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(mix.status().message()), HasSubstr("empty"));
  }
}

TEST(BenchMixTest, MalformedPairsRejected) {
  for (const char* spec : {"place", "place=70,", ",place=70", "place=70,,pay=1", "=5"}) {
    const absl::StatusOr<Mix> mix = ParseMix(spec);
    EXPECT_FALSE(mix.ok()) << spec;
    EXPECT_EQ(mix.status().code(), absl::StatusCode::kInvalidArgument) << spec;
  }
}

TEST(BenchMixTest, RepeatedKeyRejected) {
  const absl::StatusOr<Mix> mix = ParseMix("place=1,pay=1,place=2");
  ASSERT_FALSE(mix.ok());
  EXPECT_EQ(mix.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(mix.status().message()), HasSubstr("twice"));
}

TEST(BenchMixTest, FormatMixIsCanonicalAndRoundTrips) {
  const absl::StatusOr<Mix> mix = ParseMix(" list=10 , pay=0, place=70 ");
  ASSERT_TRUE(mix.ok()) << mix.status();
  EXPECT_EQ(FormatMix(*mix), "place=70,list=10");
  const absl::StatusOr<Mix> again = ParseMix(FormatMix(*mix));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->weights, mix->weights);
}

TEST(BenchMixTest, MethodNamesAndKeys) {
  EXPECT_EQ(MethodName(Method::kPlaceHold), "PlaceHold");
  EXPECT_EQ(MethodName(Method::kPay), "Pay");
  EXPECT_EQ(MethodName(Method::kListHolds), "ListHolds");
  EXPECT_EQ(MethodMixKey(Method::kPlaceHold), "place");
  EXPECT_EQ(MethodMixKey(Method::kPay), "pay");
  EXPECT_EQ(MethodMixKey(Method::kListHolds), "list");
  EXPECT_EQ(MethodName(Method::kCancelHold), "CancelHold");
  EXPECT_EQ(MethodMixKey(Method::kCancelHold), "cancel");
  EXPECT_EQ(MethodName(Method::kExtendHold), "ExtendHold");
  EXPECT_EQ(MethodMixKey(Method::kExtendHold), "extend");
  EXPECT_EQ(MethodName(Method::kGetHold), "GetHold");
  EXPECT_EQ(MethodMixKey(Method::kGetHold), "get");
  EXPECT_EQ(MethodName(Method::kReleaseHolds), "ReleaseHolds");
  EXPECT_EQ(MethodMixKey(Method::kReleaseHolds), "release");
  EXPECT_EQ(MethodName(Method::kCount), "Unknown");
  EXPECT_EQ(MethodMixKey(Method::kCount), "unknown");
}

// ---------------------------------------------------------------------------------------------
// PickMethod: deterministic, so iterate every draw in [0, Total()).

std::array<int64_t, kNumMethods> CountPicks(const Mix& mix) {
  std::array<int64_t, kNumMethods> counts{};
  for (int64_t draw = 0; draw < mix.Total(); ++draw) ++counts[Index(PickMethod(mix, draw))];
  return counts;
}

TEST(BenchPickMethodTest, WholeRangeFollowsWeightsExactly) {
  const Mix mix{{70, 20, 10}};
  EXPECT_THAT(CountPicks(mix), ElementsAre(70, 20, 10, 0, 0, 0, 0));
}

TEST(BenchPickMethodTest, DrawsAreContiguousInMethodOrder) {
  const Mix mix{{3, 2, 1}};
  EXPECT_EQ(PickMethod(mix, 0), Method::kPlaceHold);
  EXPECT_EQ(PickMethod(mix, 2), Method::kPlaceHold);
  EXPECT_EQ(PickMethod(mix, 3), Method::kPay);
  EXPECT_EQ(PickMethod(mix, 4), Method::kPay);
  EXPECT_EQ(PickMethod(mix, 5), Method::kListHolds);
}

TEST(BenchPickMethodTest, ZeroWeightMethodsNeverPicked) {
  const Mix mix{{0, 5, 0}};
  EXPECT_THAT(CountPicks(mix), ElementsAre(0, 5, 0, 0, 0, 0, 0));
  const Mix ends{{4, 0, 6}};
  EXPECT_THAT(CountPicks(ends), ElementsAre(4, 0, 6, 0, 0, 0, 0));
}

TEST(BenchPickMethodTest, CancelOwnsTheLastDraws) {
  const Mix mix{{1, 1, 1, 2}};
  EXPECT_THAT(CountPicks(mix), ElementsAre(1, 1, 1, 2, 0, 0, 0));
  EXPECT_EQ(PickMethod(mix, 2), Method::kListHolds);
  EXPECT_EQ(PickMethod(mix, 3), Method::kCancelHold);
  EXPECT_EQ(PickMethod(mix, 4), Method::kCancelHold);
  EXPECT_EQ(PickMethod(Mix{{5, 0, 0, 5}}, 10), Method::kCancelHold);
}

TEST(BenchPickMethodTest, ExtendAndGetOwnTheDrawsAfterCancel) {
  const Mix mix{{1, 1, 1, 1, 2, 3}};
  EXPECT_THAT(CountPicks(mix), ElementsAre(1, 1, 1, 1, 2, 3, 0));
  EXPECT_EQ(PickMethod(mix, 3), Method::kCancelHold);
  EXPECT_EQ(PickMethod(mix, 4), Method::kExtendHold);
  EXPECT_EQ(PickMethod(mix, 5), Method::kExtendHold);
  EXPECT_EQ(PickMethod(mix, 6), Method::kGetHold);
  EXPECT_EQ(PickMethod(mix, 8), Method::kGetHold);
}

TEST(BenchPickMethodTest, ParsedMixLargeWeights) {
  const absl::StatusOr<Mix> mix = ParseMix("place=7000,pay=2000,list=1000");
  ASSERT_TRUE(mix.ok()) << mix.status();
  EXPECT_THAT(CountPicks(*mix), ElementsAre(7000, 2000, 1000, 0, 0, 0, 0));
}

TEST(BenchPickMethodTest, OutOfRangeDrawPicksLastWeightedMethod) {
  // Documented precondition is draw < Total(); beyond it the function stays within the mix.
  EXPECT_EQ(PickMethod(Mix{{5, 5, 0}}, 10), Method::kPay);
  EXPECT_EQ(PickMethod(Mix{{5, 0, 0}}, 100), Method::kPlaceHold);
}

// ---------------------------------------------------------------------------------------------
// HoldPool

TEST(BenchHoldPoolTest, EmptyPopsNullopt) {
  HoldPool pool(4);
  EXPECT_EQ(pool.size(), 0);
  EXPECT_EQ(pool.Pop(), std::nullopt);
}

TEST(BenchHoldPoolTest, PopIsLifo) {
  HoldPool pool(10);
  pool.Push({1, 10});
  pool.Push({2, 20});
  pool.Push({3, 30});
  EXPECT_EQ(pool.size(), 3);
  EXPECT_EQ(pool.Pop(), (PoolEntry{3, 30}));
  EXPECT_EQ(pool.Pop(), (PoolEntry{2, 20}));
  pool.Push({4, 40});
  EXPECT_EQ(pool.Pop(), (PoolEntry{4, 40}));
  EXPECT_EQ(pool.Pop(), (PoolEntry{1, 10}));
  EXPECT_EQ(pool.Pop(), std::nullopt);
  EXPECT_EQ(pool.size(), 0);
}

TEST(BenchHoldPoolTest, FullPoolOverwritesOldest) {
  HoldPool pool(3);
  for (int64_t i = 1; i <= 5; ++i) pool.Push({i, i * 100});
  EXPECT_EQ(pool.size(), 3);
  EXPECT_EQ(pool.Pop(), (PoolEntry{5, 500}));
  EXPECT_EQ(pool.Pop(), (PoolEntry{4, 400}));
  EXPECT_EQ(pool.Pop(), (PoolEntry{3, 300}));
  EXPECT_EQ(pool.Pop(), std::nullopt);
}

TEST(BenchHoldPoolTest, WrapsAroundRepeatedly) {
  HoldPool pool(3);
  for (int64_t i = 1; i <= 7; ++i) pool.Push({i, i});  // Holds 5, 6, 7.
  EXPECT_EQ(pool.Pop(), (PoolEntry{7, 7}));            // Holds 5, 6.
  pool.Push({8, 8});                                   // Holds 5, 6, 8.
  pool.Push({9, 9});                                   // Full: drops 5; holds 6, 8, 9.
  EXPECT_EQ(pool.size(), 3);
  EXPECT_EQ(pool.Pop(), (PoolEntry{9, 9}));
  EXPECT_EQ(pool.Pop(), (PoolEntry{8, 8}));
  EXPECT_EQ(pool.Pop(), (PoolEntry{6, 6}));
  EXPECT_EQ(pool.Pop(), std::nullopt);
}

TEST(BenchHoldPoolTest, CapacityOne) {
  HoldPool pool(1);
  pool.Push({1, 1});
  pool.Push({2, 2});
  EXPECT_EQ(pool.size(), 1);
  EXPECT_EQ(pool.Pop(), (PoolEntry{2, 2}));
  EXPECT_EQ(pool.Pop(), std::nullopt);
}

TEST(BenchHoldPoolTest, SampleLeavesTheEntryAndCountsBackFromTheNewest) {
  HoldPool pool(10);
  EXPECT_EQ(pool.Sample(0), std::nullopt);
  pool.Push({1, 10});
  pool.Push({2, 20});
  pool.Push({3, 30});
  EXPECT_EQ(pool.Sample(0), (PoolEntry{3, 30}));
  EXPECT_EQ(pool.Sample(1), (PoolEntry{2, 20}));
  EXPECT_EQ(pool.Sample(2), (PoolEntry{1, 10}));
  EXPECT_EQ(pool.Sample(3), (PoolEntry{3, 30}));  // modulo the entries there are
  EXPECT_EQ(pool.size(), 3);                      // nothing removed
  EXPECT_EQ(pool.Pop(), (PoolEntry{3, 30}));
  EXPECT_EQ(pool.Sample(0), (PoolEntry{2, 20}));
}

TEST(BenchHoldPoolTest, SampleAfterWrapAround) {
  HoldPool pool(3);
  for (int64_t i = 1; i <= 5; ++i) pool.Push({i, i});  // Holds 3, 4, 5; the ring has wrapped.
  EXPECT_EQ(pool.Sample(0), (PoolEntry{5, 5}));
  EXPECT_EQ(pool.Sample(1), (PoolEntry{4, 4}));
  EXPECT_EQ(pool.Sample(2), (PoolEntry{3, 3}));
  EXPECT_EQ(pool.Sample(5), (PoolEntry{3, 3}));
}

TEST(BenchHoldPoolTest, SampleDrawsFromTheNewestWindowOnly) {
  HoldPool pool(kSampleWindow * 2);
  for (int64_t i = 0; i < kSampleWindow * 2; ++i) pool.Push({0, i});
  // The newest is kSampleWindow * 2 - 1; the window ends kSampleWindow entries back.
  EXPECT_EQ(pool.Sample(0)->order_sequence, kSampleWindow * 2 - 1);
  EXPECT_EQ(pool.Sample(static_cast<uint64_t>(kSampleWindow - 1))->order_sequence, kSampleWindow);
  EXPECT_EQ(pool.Sample(static_cast<uint64_t>(kSampleWindow))->order_sequence,
            kSampleWindow * 2 - 1);
  EXPECT_TRUE(pool.Sample(~uint64_t{0}).has_value());
}

TEST(BenchHoldPoolTest, ConcurrentPushPopKeepsCount) {
  HoldPool pool(1'000'000);
  constexpr int kThreads = 4;
  constexpr int kPerThread = 5000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&pool, t] {
      for (int i = 0; i < kPerThread; ++i) pool.Push({t, i});
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(pool.size(), kThreads * kPerThread);
  int popped = 0;
  while (pool.Pop().has_value()) ++popped;
  EXPECT_EQ(popped, kThreads * kPerThread);
}

// ---------------------------------------------------------------------------------------------
// UserPicker, ParseDistribution, UserId, OrderId

TEST(BenchUserPickerTest, UniformStaysInRangeAndCoversIt) {
  constexpr int64_t kUsers = 10;
  const UserPicker picker(kUsers, Distribution::kUniform, 1.1);
  std::array<int64_t, kUsers> counts{};
  for (int i = 0; i < 20000; ++i) {
    const int64_t user = picker.Draw();
    ASSERT_GE(user, 0);
    ASSERT_LT(user, kUsers);
    ++counts[user];
  }
  // Expected 2000 each (standard deviation ~42): very loose bounds.
  for (int64_t user = 0; user < kUsers; ++user) {
    EXPECT_GT(counts[user], 1000) << user;
    EXPECT_LT(counts[user], 3000) << user;
  }
}

TEST(BenchUserPickerTest, UniformSingleUser) {
  const UserPicker picker(1, Distribution::kUniform, 1.1);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(picker.Draw(), 0);
}

TEST(BenchUserPickerTest, ZipfStaysInRangeAndFavoursIndexZero) {
  constexpr int64_t kUsers = 100;
  constexpr int kDraws = 20000;
  const UserPicker picker(kUsers, Distribution::kZipf, 1.1);
  std::array<int64_t, kUsers> counts{};
  for (int i = 0; i < kDraws; ++i) {
    const int64_t user = picker.Draw();
    ASSERT_GE(user, 0);
    ASSERT_LT(user, kUsers);
    ++counts[user];
  }
  // P(0) is about 0.23 here (uniform would be 0.01), P(1) about 0.11: expected ~4700 vs ~2200,
  // each with a standard deviation under 70.
  EXPECT_GT(counts[0], kDraws / 10);
  EXPECT_GT(counts[0], counts[1]);
  EXPECT_EQ(*std::max_element(counts.begin(), counts.end()), counts[0]);
  EXPECT_GT(counts[0], 10 * counts[kUsers - 1]);
}

TEST(BenchUserPickerTest, ZipfTwoUsers) {
  const UserPicker picker(2, Distribution::kZipf, 2.0);
  int zeros = 0;
  for (int i = 0; i < 10000; ++i) {
    const int64_t user = picker.Draw();
    ASSERT_TRUE(user == 0 || user == 1) << user;
    zeros += user == 0 ? 1 : 0;
  }
  // P(0) = 1 / (1 + 2^-2) = 0.8.
  EXPECT_GT(zeros, 6000);
}

TEST(BenchUserPickerTest, ParseDistribution) {
  EXPECT_EQ(ParseDistribution("uniform").value_or(Distribution::kZipf), Distribution::kUniform);
  EXPECT_EQ(ParseDistribution("zipf").value_or(Distribution::kUniform), Distribution::kZipf);
  for (const char* bad : {"", "Zipf", "UNIFORM", " zipf", "normal"}) {
    const absl::StatusOr<Distribution> d = ParseDistribution(bad);
    ASSERT_FALSE(d.ok()) << bad;
    EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(d.status().message()), StartsWith("--distribution"));
  }
  EXPECT_EQ(DistributionName(Distribution::kUniform), "uniform");
  EXPECT_EQ(DistributionName(Distribution::kZipf), "zipf");
}

TEST(BenchUserPickerTest, UserAndOrderIds) {
  EXPECT_EQ(UserId("u", 42), "u42");
  EXPECT_EQ(UserId("", 0), "0");
  EXPECT_EQ(OrderId(0xbeef, 17), "b0000beef-17");
  EXPECT_EQ(OrderId(0xffffffffu, 0), "bffffffff-0");
  EXPECT_NE(OrderId(1, 5), OrderId(2, 5));
}

TEST(BenchUserPickerTest, MissingOrderIdsNeverNameAPlacedOrder) {
  EXPECT_EQ(MissingOrderId(0xbeef, 3), "b0000beef-missing-3");
  EXPECT_EQ(MissingOrderId(0xffffffffu, 0), "bffffffff-missing-0");
  EXPECT_NE(MissingOrderId(0xbeef, 3), OrderId(0xbeef, 3));
  EXPECT_NE(MissingOrderId(1, 5), MissingOrderId(2, 5));
}

// ---------------------------------------------------------------------------------------------
// PlaceShape / PlaceShaper: the scoped mix

TEST(BenchPlaceShapeTest, DefaultIsUnscopedAndLeavesTheRequestAlone) {
  const PlaceShape shape;
  EXPECT_FALSE(shape.IsSet());
  EXPECT_TRUE(ValidatePlaceShape(shape).ok());
  EXPECT_EQ(FormatPlaceShape(shape), "unscoped");

  const PlaceShaper shaper(shape);
  EXPECT_EQ(shaper.DrawScope(), 0);
  orderhold::v1::PlaceHoldRequest request;
  request.set_user_id("u1");
  request.set_order_id("o1");
  const std::string before = request.SerializeAsString();
  shaper.Apply(shaper.DrawScope(), &request);
  // Byte for byte today's request: no scope, no quantity, no scope_limits.
  EXPECT_EQ(request.SerializeAsString(), before);
  EXPECT_FALSE(request.has_scope_limits());
}

TEST(BenchPlaceShapeTest, ScopedRequestCarriesScopeQuantityAndLimits) {
  const PlaceShape shape{.scopes = 4, .quantity = 2, .scope_max_holds = 2, .scope_max_units = 8};
  EXPECT_TRUE(shape.IsSet());
  ASSERT_TRUE(ValidatePlaceShape(shape).ok()) << ValidatePlaceShape(shape);
  EXPECT_EQ(FormatPlaceShape(shape), "scopes=4,quantity=2,scope_max_holds=2,scope_max_units=8");

  const PlaceShaper shaper(shape);
  orderhold::v1::PlaceHoldRequest request;
  shaper.Apply(3, &request);
  EXPECT_EQ(request.scope(), "event:3");
  EXPECT_EQ(request.quantity(), 2u);
  ASSERT_TRUE(request.has_scope_limits());
  EXPECT_EQ(request.scope_limits().max_holds(), 2u);
  EXPECT_EQ(request.scope_limits().max_units(), 8u);
}

TEST(BenchPlaceShapeTest, EachPartAlone) {
  orderhold::v1::PlaceHoldRequest scoped;
  PlaceShaper(PlaceShape{.scopes = 1}).Apply(0, &scoped);
  EXPECT_EQ(scoped.scope(), "event:0");
  EXPECT_EQ(scoped.quantity(), 0u);  // unset: the server counts 1
  EXPECT_FALSE(scoped.has_scope_limits());

  orderhold::v1::PlaceHoldRequest units;
  PlaceShaper(PlaceShape{.quantity = 5}).Apply(0, &units);
  EXPECT_EQ(units.scope(), "");
  EXPECT_EQ(units.quantity(), 5u);
  EXPECT_EQ(FormatPlaceShape(PlaceShape{.quantity = 5}), "quantity=5");

  // One limit given: scope_limits is sent, the other level 0 = no limit.
  orderhold::v1::PlaceHoldRequest limited;
  PlaceShaper(PlaceShape{.scopes = 2, .scope_max_units = 8}).Apply(1, &limited);
  EXPECT_EQ(limited.scope(), "event:1");
  ASSERT_TRUE(limited.has_scope_limits());
  EXPECT_EQ(limited.scope_limits().max_holds(), 0u);
  EXPECT_EQ(limited.scope_limits().max_units(), 8u);
}

TEST(BenchPlaceShapeTest, DrawScopeStaysInRangeAndCoversIt) {
  const PlaceShaper shaper(PlaceShape{.scopes = 5});
  std::array<int, 5> seen{};
  for (int i = 0; i < 10'000; ++i) {
    const int64_t scope = shaper.DrawScope();
    ASSERT_GE(scope, 0);
    ASSERT_LT(scope, 5);
    ++seen[scope];
  }
  // 2,000 expected each; 1,500 is more than 12 standard deviations away.
  for (int n : seen) EXPECT_GT(n, 1'500);
  EXPECT_EQ(PlaceShaper(PlaceShape{.scopes = 1}).DrawScope(), 0);
}

TEST(BenchPlaceShapeTest, ScopeNames) {
  EXPECT_EQ(ScopeName(0), "event:0");
  EXPECT_EQ(ScopeName(41), "event:41");
}

TEST(BenchPlaceShapeTest, ValidationNamesTheFlag) {
  const auto rejected = [](const PlaceShape& shape, const std::string& flag) {
    const absl::Status status = ValidatePlaceShape(shape);
    EXPECT_TRUE(absl::IsInvalidArgument(status)) << flag << ": " << status;
    EXPECT_THAT(std::string(status.message()), StartsWith(flag)) << status;
  };
  rejected(PlaceShape{.scopes = -1}, "--scopes");
  rejected(PlaceShape{.scopes = kMaxScopes + 1}, "--scopes");
  rejected(PlaceShape{.quantity = -1}, "--quantity");
  rejected(PlaceShape{.quantity = 1'000'000'001}, "--quantity");
  rejected(PlaceShape{.scopes = 1, .scope_max_holds = -1}, "--scope_max_holds");
  rejected(PlaceShape{.scopes = 1, .scope_max_holds = 10'001}, "--scope_max_holds");
  rejected(PlaceShape{.scopes = 1, .scope_max_units = 1'000'000'001}, "--scope_max_units");
  // Scope limits without scopes would be refused by the server on every call.
  rejected(PlaceShape{.scope_max_holds = 2}, "--scope_max_holds");
  rejected(PlaceShape{.scope_max_units = 8}, "--scope_max_units");
  // A quantity above the scope's unit limit could never be granted (unset quantity counts 1).
  rejected(PlaceShape{.scopes = 1, .quantity = 9, .scope_max_units = 8}, "--quantity");
  EXPECT_TRUE(
      ValidatePlaceShape(PlaceShape{.scopes = 1, .quantity = 8, .scope_max_units = 8}).ok());
  EXPECT_TRUE(ValidatePlaceShape(PlaceShape{.scopes = 1, .scope_max_units = 1}).ok());
  EXPECT_TRUE(ValidatePlaceShape(PlaceShape{.scopes = kMaxScopes}).ok());
}

}  // namespace
}  // namespace orderhold::client::bench
