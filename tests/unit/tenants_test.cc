// Tenants: the stored form of a tenant's ids (server/domain/tenant.h), the --tenants file and which
// tenant a caller acts in (server/grpc/tenants.h).
#include "server/grpc/tenants.h"

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_replace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "prometheus/registry.h"
#include "server/domain/event_service.h"
#include "server/domain/hold.h"
#include "server/domain/tenant.h"
#include "tests/testing/status_matchers.h"

namespace orderhold::grpc_api {
namespace {

using ::orderhold::testing::IsOk;
using ::orderhold::testing::IsOkAndHolds;
using ::orderhold::testing::StatusIs;
using ::testing::HasSubstr;

constexpr absl::StatusCode kInvalid = absl::StatusCode::kInvalidArgument;
constexpr absl::StatusCode kDenied = absl::StatusCode::kPermissionDenied;

TEST(TenantIdsTest, QualifiedIdsRoundTripAndNoIdACallerSendsSpellsOne) {
  ASSERT_OK_AND_ASSIGN(std::string user, domain::QualifyId("user_id", "acme", "alice"));
  EXPECT_EQ(user, std::string("acme\x1f"
                              "alice"));
  EXPECT_EQ(domain::TenantOfId(user), "acme");
  EXPECT_EQ(domain::LocalId(user), "alice");
  EXPECT_EQ(domain::TenantOfId("alice"), "");
  EXPECT_EQ(domain::LocalId("alice"), "alice");
  // The domain accepts the stored form; a caller can never send it.
  EXPECT_THAT(domain::ValidateId("user_id", user), IsOk());
  EXPECT_THAT(domain::QualifyId("user_id", "", user), StatusIs(kInvalid, HasSubstr("control")));
  EXPECT_THAT(domain::QualifyId("user_id", "acme", user), StatusIs(kInvalid, HasSubstr("user_id")));
  EXPECT_THAT(domain::ValidateId("user_id", std::string("Bad Tenant\x1f"
                                                        "alice")),
              StatusIs(kInvalid, HasSubstr("tenant name")));
  // A 128-byte id stays valid in its tenant's form.
  ASSERT_OK_AND_ASSIGN(std::string longest,
                       domain::QualifyId("user_id", "acme", std::string(128, 'x')));
  EXPECT_THAT(domain::ValidateId("user_id", longest), IsOk());
  // Unscoped stays unscoped; a scope is qualified as a user is.
  EXPECT_THAT(domain::QualifyScope("acme", ""), IsOkAndHolds(std::string()));
  EXPECT_THAT(domain::QualifyScope("acme", "event:E1"), IsOkAndHolds(std::string("acme\x1f"
                                                                                 "event:E1")));
  // Groups: "<tenant>:<group>", which no caller's group name can spell.
  ASSERT_OK_AND_ASSIGN(std::string group, domain::QualifyGroup("acme", "orders"));
  EXPECT_EQ(group, "acme:orders");
  EXPECT_EQ(domain::LocalGroup(group), "orders");
  EXPECT_THAT(domain::ValidateGroup(group), IsOk());
  EXPECT_THAT(domain::QualifyGroup("", "acme:orders"),
              StatusIs(kInvalid, HasSubstr("consumer_group")));
  EXPECT_EQ(domain::QualifyGroup("", "orders").value_or(""), "orders");
}

TEST(TenantIdsTest, TenantNamesAreDnsLabels) {
  for (const char* good : {"acme", "a", "t-1", "0day"}) {
    EXPECT_THAT(domain::ValidateTenantName("name", good), IsOk()) << good;
  }
  for (const std::string& bad : {std::string(""), std::string("Acme"), std::string("-a"),
                                 std::string("a_b"), std::string("a:b"), std::string(64, 'a')}) {
    EXPECT_THAT(domain::ValidateTenantName("name", bad), StatusIs(kInvalid, HasSubstr("name")))
        << bad;
  }
}

constexpr char kExample[] = R"({
  "tenants": [
    {"name": "acme", "principals": ["spiffe://example/acme", "dns:acme.example.com"],
     "max_holds": 4, "max_units": 0, "max_watches": 20, "max_consumer_groups": 5},
    {"name": "beta", "principals": ["CN=beta,O=Example"]}
  ],
  "operators": ["spiffe://example/operator"]
})";

TEST(TenantsFileTest, ParsesTheExampleShape) {
  ASSERT_OK_AND_ASSIGN(TenantsFile file, TenantsFile::Parse(kExample));
  ASSERT_EQ(file.tenants.size(), 2u);
  EXPECT_EQ(file.tenants[0].name, "acme");
  EXPECT_THAT(file.tenants[0].principals,
              ::testing::ElementsAre("uri:spiffe://example/acme", "dns:acme.example.com"));
  EXPECT_EQ(file.tenants[0].limits.max_holds, 4);
  EXPECT_EQ(file.tenants[0].limits.max_units, 0);
  EXPECT_EQ(file.tenants[0].limits.max_watches, 20);
  EXPECT_EQ(file.tenants[0].limits.max_consumer_groups, 5);
  EXPECT_THAT(file.tenants[1].principals, ::testing::ElementsAre("subject:CN=beta,O=Example"));
  EXPECT_EQ(file.tenants[1].limits, domain::TenantLimits{});
  EXPECT_THAT(file.operators, ::testing::ElementsAre("uri:spiffe://example/operator"));
}

TEST(TenantsFileTest, EveryShapeItDoesNotUnderstandIsRefusedNamingThePlace) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {R"({"tenants": [{"name": "a", "principals": [null]}]})", "null"},
      {R"({"tenants": [{"name": "a", "principals": ["x"]}], "operators": null})", "null"},
      {R"({"tenants": null})", "null"},
      {R"({"tenants": [{"name": "a", "principals": ["x"], "name": "b"}]})", "name"},
      {R"({"tenants": [{"name": "a", "principals": ["x"], "max_hold": 3}]})", "max_hold"},
      {R"({"tenants": [{"name": "a", "principals": []}]})", "principals"},
      {R"({"tenants": [{"name": "a", "principals": [["x"]]}]})", "principals[0]"},
      {R"({"tenants": [{"name": "a", "principals": "x"}]})", "principals"},
      {R"({"tenants": [{"name": "a"}]})", "principals"},
      {R"({"tenants": [{"principals": ["x"]}]})", "name"},
      {R"({"tenants": [{"name": "A", "principals": ["x"]}]})", "tenant name"},
      {R"({"tenants": [{"name": "a", "principals": ["x"], "max_holds": 0}]})", "max_holds"},
      {R"({"tenants": [{"name": "a", "principals": ["x"], "max_holds": 2.5}]})", "max_holds"},
      {R"({"tenants": [{"name": "a", "principals": ["x"], "max_holds": "3"}]})", "max_holds"},
      {R"({"tenants": [{"name": "a", "principals": ["x"], "max_units": -1}]})", "max_units"},
      {R"({"tenants": [{"name": "a", "principals": ["x"], "max_watches": 0}]})", "max_watches"},
      {R"({"tenants": [{"name": "a", "principals": ["x"]}, {"name": "a", "principals": ["y"]}]})",
       "twice"},
      {R"({"tenants": [{"name": "a", "principals": ["x"]}, {"name": "b", "principals": ["dns:x"]}]})",
       "already named"},
      {R"({"tenants": [{"name": "a", "principals": ["spiffe://e/o"]}], "operators": ["uri:spiffe://e/o"]})",
       "already named"},
      {R"({"tenants": [{"name": "a", "principals": ["uri:"]}]})", "without a value"},
      {R"({"tenants": [], "extra": 1})", "extra"},
      {R"([])", "object"},
      {R"({"tenants": [{"name": "a", "principals": ["x"]}]} trailing)", ""},
  };
  for (const auto& [text, names] : bad) {
    EXPECT_THAT(TenantsFile::Parse(text), StatusIs(kInvalid, HasSubstr(names))) << text;
  }
  EXPECT_THAT(TenantsFile::Parse(R"({"tenants": [], "operators": ["spiffe://e/o"]})"), IsOk());
}

AuthzRequest Peer(std::vector<std::string> uris, std::vector<std::string> dns = {},
                  std::string subject = "") {
  AuthzRequest peer;
  peer.authenticated = true;
  peer.uri_sans = std::move(uris);
  peer.dns_sans = std::move(dns);
  peer.subject = std::move(subject);
  return peer;
}

class TenantsResolveTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // One directory per case: ctest runs each case in its own process, side by side, and a case
    // reading the file while another rewrites it read it half written.
    dir_ = ::testing::TempDir() + "/tenants-resolve-" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::create_directories(dir_);
    std::ofstream(dir_ + "/t.json") << kExample;
    TenantsOptions options;
    options.file = dir_ + "/t.json";
    ASSERT_OK_AND_ASSIGN(tenants_, Tenants::Start(options, metrics_));
  }
  prometheus::Registry registry_;
  metrics::Metrics metrics_{registry_};
  std::string dir_;
  std::unique_ptr<Tenants> tenants_;
};

TEST_F(TenantsResolveTest, ACallerActsInItsTenantAndOperatorsInTheOneTheyName) {
  using Tenant = std::pair<std::string, bool>;
  auto resolve = [&](const AuthzRequest& peer, std::vector<std::string> header = {}) {
    absl::StatusOr<CallTenant> tenant = tenants_->Resolve(peer, header);
    return tenant.ok() ? absl::StatusOr<Tenant>(Tenant{tenant->tenant, tenant->is_operator})
                       : absl::StatusOr<Tenant>(tenant.status());
  };
  EXPECT_THAT(resolve(Peer({"spiffe://example/acme"})), IsOkAndHolds(Tenant{"acme", false}));
  EXPECT_THAT(resolve(Peer({}, {"acme.example.com"})), IsOkAndHolds(Tenant{"acme", false}));
  EXPECT_THAT(resolve(Peer({}, {}, "CN=beta,O=Example")), IsOkAndHolds(Tenant{"beta", false}));
  EXPECT_THAT(resolve(Peer({"spiffe://example/acme"}), {"acme"}),
              IsOkAndHolds(Tenant{"acme", false}));
  // Typed: a DNS SAN spelling acme's SPIFFE ID is not acme's principal.
  EXPECT_THAT(resolve(Peer({}, {"spiffe://example/acme"})), StatusIs(kDenied));
  AuthzRequest unauthenticated = Peer({"spiffe://example/acme"});
  unauthenticated.authenticated = false;
  EXPECT_THAT(resolve(unauthenticated), StatusIs(kDenied, HasSubstr("no tenant")));
  EXPECT_THAT(resolve(Peer({"spiffe://example/acme"}), {"beta"}),
              StatusIs(kDenied, HasSubstr("own tenant")));
  EXPECT_THAT(resolve(Peer({"spiffe://example/acme"}, {}, "CN=beta,O=Example")),
              StatusIs(kDenied, HasSubstr("more than one tenant")));
  EXPECT_THAT(resolve(Peer({"spiffe://example/acme", "spiffe://example/operator"})),
              StatusIs(kDenied, HasSubstr("operator")));
  EXPECT_THAT(resolve(Peer({"spiffe://example/stranger"})), StatusIs(kDenied));
  // Operators.
  EXPECT_THAT(resolve(Peer({"spiffe://example/operator"})), IsOkAndHolds(Tenant{"", true}));
  EXPECT_THAT(resolve(Peer({"spiffe://example/operator"}), {"beta"}),
              IsOkAndHolds(Tenant{"beta", true}));
  EXPECT_THAT(resolve(Peer({"spiffe://example/operator"}), {"gamma"}),
              StatusIs(kInvalid, HasSubstr("orderhold-tenant")));
  EXPECT_THAT(resolve(Peer({"spiffe://example/operator"}), {"acme", "beta"}),
              StatusIs(kInvalid, HasSubstr("once")));
  EXPECT_TRUE(tenants_->table().IsOperator("uri:spiffe://example/operator"));
  EXPECT_EQ(tenants_->table().For("acme").max_holds, 4);
  EXPECT_EQ(tenants_->table().For("beta"), domain::TenantLimits{});
}

TEST_F(TenantsResolveTest, AReloadAppliesAGoodFileAndKeepsTheOldOneOverABadOne) {
  std::ofstream(dir_ + "/t.json") << R"({"tenants": [{"name": "acme", "principals": [null]}]})";
  EXPECT_THAT(tenants_->Reload(), StatusIs(kInvalid, HasSubstr("null")));
  EXPECT_TRUE(tenants_->Resolve(Peer({"spiffe://example/acme"}), {}).ok());
  EXPECT_EQ(metrics_.tenants_reloads(false).Value(), 1);
  std::ofstream(dir_ + "/t.json")
      << R"({"tenants": [{"name": "gamma", "principals": ["spiffe://example/acme"]}]})";
  EXPECT_THAT(tenants_->Reload(), IsOk());
  ASSERT_OK_AND_ASSIGN(CallTenant moved, tenants_->Resolve(Peer({"spiffe://example/acme"}), {}));
  EXPECT_EQ(moved.tenant, "gamma");
  EXPECT_FALSE(tenants_->table().IsOperator("uri:spiffe://example/operator"));
  EXPECT_EQ(metrics_.tenants_reloads(true).Value(), 1);
}

}  // namespace
}  // namespace orderhold::grpc_api
