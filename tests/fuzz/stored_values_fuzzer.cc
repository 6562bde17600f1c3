// Fuzzes the decoding of what OrderHold stores in Redis and reads back: a hold's details value and
// its life record (hold_details_codec.h) and a public event id (event_log.h's ParseEventId). A
// value written by another release, or damaged by hand, must be refused (nullopt / a status), never
// crash. Details that decode also round-trip: re-encoded, they decode to the same details.
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "server/store/event_log.h"
#include "server/store/hold_details_codec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace orderhold::store;  // NOLINT: a fuzz entry point
  const absl::string_view value(reinterpret_cast<const char*>(data), size);
  if (auto decoded = DecodeDetails(value); decoded.has_value()) {
    const std::string again =
        absl::StrCat(decoded->expire_ms, ":", absl::ToUnixMillis(*decoded->details.place_time), ":",
                     EncodeDetailsTail(decoded->details));
    auto twice = DecodeDetails(again);
    if (!twice.has_value() || twice->expire_ms != decoded->expire_ms ||
        !(twice->details == decoded->details)) {
      __builtin_trap();  // the codec is not canonical: a finding
    }
  }
  (void)DecodeLife(value);
  (void)ParseEventId(value, 64);
  return 0;
}
