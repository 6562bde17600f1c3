// The server parses requests with the mirrors of server/grpc/lenient_requests.proto: they must
// stay wire-compatible with the public API (same numbers and names; string ids become bytes,
// enums int32).
#include "gtest/gtest.h"
#include "orderhold/v1/orderhold.pb.h"
#include "server/grpc/lenient_requests.pb.h"

namespace orderhold {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;

void ExpectMirror(const Descriptor* api, const Descriptor* mirror) {
  // The server names the message in errors by the mirror's name ("request: not a valid
  // orderhold.v1.<name>").
  EXPECT_EQ(mirror->name(), api->name());
  ASSERT_EQ(api->field_count(), mirror->field_count()) << api->full_name();
  for (int i = 0; i < api->field_count(); ++i) {
    const FieldDescriptor* field = api->field(i);
    const FieldDescriptor* twin = mirror->FindFieldByNumber(field->number());
    ASSERT_NE(twin, nullptr) << field->full_name();
    EXPECT_EQ(twin->name(), field->name());
    EXPECT_EQ(twin->label(), field->label());
    EXPECT_EQ(twin->is_packed(), field->is_packed()) << field->full_name();
    if (field->type() == FieldDescriptor::TYPE_STRING) {
      EXPECT_EQ(twin->type(), FieldDescriptor::TYPE_BYTES) << field->full_name();
    } else if (field->type() == FieldDescriptor::TYPE_ENUM) {
      // The same varint on the wire; the server checks the values itself (conversions.h).
      EXPECT_EQ(twin->type(), FieldDescriptor::TYPE_INT32) << field->full_name();
    } else {
      EXPECT_EQ(twin->type(), field->type()) << field->full_name();
      if (field->message_type() != nullptr) {
        if (field->message_type()->file()->package() == "google.protobuf") {
          EXPECT_EQ(twin->message_type()->full_name(), field->message_type()->full_name());
        } else {
          // The API's own messages (ScopeLimits) and map entries (labels: a repeated entry
          // message with key = 1, value = 2 on the wire) have mirrors of their own.
          ExpectMirror(field->message_type(), twin->message_type());
        }
      }
    }
  }
}

TEST(LenientRequestsTest, MirrorsMatchTheApi) {
  ExpectMirror(v1::PlaceHoldRequest::descriptor(), internal::PlaceHoldRequest::descriptor());
  ExpectMirror(v1::PayRequest::descriptor(), internal::PayRequest::descriptor());
  ExpectMirror(v1::ListHoldsRequest::descriptor(), internal::ListHoldsRequest::descriptor());
  ExpectMirror(v1::CancelHoldRequest::descriptor(), internal::CancelHoldRequest::descriptor());
  ExpectMirror(v1::WatchHoldEventsRequest::descriptor(),
               internal::WatchHoldEventsRequest::descriptor());
  ExpectMirror(v1::AckHoldEventsRequest::descriptor(),
               internal::AckHoldEventsRequest::descriptor());
  ExpectMirror(v1::ExtendHoldRequest::descriptor(), internal::ExtendHoldRequest::descriptor());
  ExpectMirror(v1::GetHoldRequest::descriptor(), internal::GetHoldRequest::descriptor());
  ExpectMirror(v1::ReleaseHoldsRequest::descriptor(), internal::ReleaseHoldsRequest::descriptor());
}

// A new rpc needs a mirror too: the server parses every request with one.
TEST(LenientRequestsTest, EveryRpcOfTheServiceHasAMirror) {
  const google::protobuf::ServiceDescriptor* service =
      v1::PlaceHoldRequest::descriptor()->file()->FindServiceByName("OrderHold");
  ASSERT_NE(service, nullptr);
  const google::protobuf::FileDescriptor* mirrors =
      internal::PlaceHoldRequest::descriptor()->file();
  for (int i = 0; i < service->method_count(); ++i) {
    const Descriptor* request = service->method(i)->input_type();
    const Descriptor* mirror = mirrors->FindMessageTypeByName(request->name());
    ASSERT_NE(mirror, nullptr) << request->full_name() << " has no mirror";
    ExpectMirror(request, mirror);
  }
}

TEST(LenientRequestsTest, ApiBytesParseIntoTheMirror) {
  v1::PlaceHoldRequest request;
  request.set_user_id("alice");
  request.set_order_id("票-1");
  request.mutable_ttl()->set_seconds(45);
  internal::PlaceHoldRequest mirror;
  ASSERT_TRUE(mirror.ParseFromString(request.SerializeAsString()));
  EXPECT_EQ(mirror.user_id(), "alice");
  EXPECT_EQ(mirror.order_id(), "票-1");
  EXPECT_EQ(mirror.ttl().seconds(), 45);
}

}  // namespace
}  // namespace orderhold
