// Group owners as typed identities (server/domain/group_owner.h): a bare owner of an earlier
// release is read by its shape, and the spellings a registry may hold for a caller.
#include "server/domain/group_owner.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace orderhold::domain {
namespace {

using ::testing::ElementsAre;

TEST(GroupOwnerTest, TypedOwnersStayAndBareOnesAreReadByTheirShape) {
  EXPECT_EQ(TypedOwner("uri:spiffe://x/a"), "uri:spiffe://x/a");
  EXPECT_EQ(TypedOwner("dns:a.example"), "dns:a.example");
  EXPECT_EQ(TypedOwner("subject:CN=a,O=b"), "subject:CN=a,O=b");
  EXPECT_EQ(TypedOwner("spiffe://x/a"), "uri:spiffe://x/a");  // a scheme: a URI
  EXPECT_EQ(TypedOwner("CN=a,O=b"), "subject:CN=a,O=b");      // '=' and no ':': a subject
  EXPECT_EQ(TypedOwner("a.example"), "dns:a.example");
  EXPECT_EQ(TypedOwner(""), "");
}

TEST(GroupOwnerTest, OwnsWhenTheTypedOwnerIsTheCaller) {
  EXPECT_TRUE(IsOwner("spiffe://x/a", "uri:spiffe://x/a"));
  EXPECT_FALSE(IsOwner("spiffe://x/a", "dns:spiffe://x/a"));
  EXPECT_FALSE(IsOwner("uri:spiffe://x/a", "uri:spiffe://x/b"));
  EXPECT_TRUE(IsOwner("", ""));
}

TEST(GroupOwnerTest, SpellingsAddTheBareValueOnlyWhereItReadsBackAsTheCaller) {
  EXPECT_THAT(OwnerSpellings("uri:spiffe://x/a"), ElementsAre("uri:spiffe://x/a", "spiffe://x/a"));
  EXPECT_THAT(OwnerSpellings("dns:a.example"), ElementsAre("dns:a.example", "a.example"));
  EXPECT_THAT(OwnerSpellings("subject:CN=a"), ElementsAre("subject:CN=a", "CN=a"));
  // A DNS SAN spelling a URI: its bare value would read as a URI, so it is not its spelling.
  EXPECT_THAT(OwnerSpellings("dns:spiffe://x/a"), ElementsAre("dns:spiffe://x/a"));
  EXPECT_THAT(OwnerSpellings(""), ElementsAre(""));
}

}  // namespace
}  // namespace orderhold::domain
