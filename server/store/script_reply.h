// Reading a store script's reply by the names its header gives (server/store/lua/scripts.cmake):
// the generated Parse(reply, &<Name>Reply) of lua_scripts.h walks the reply with a ReplyReader,
// one call per element in the header's order, and answers its status. Internal to server/store/
// (lua_scripts.h and the store's .cc files). Not thread-safe per object; each parse makes its own.
#ifndef ORDERHOLD_SERVER_STORE_SCRIPT_REPLY_H_
#define ORDERHOLD_SERVER_STORE_SCRIPT_REPLY_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "server/redis/redis_reply.h"

namespace orderhold::store::lua {

// Walks one reply. The first element that does not have its declared type (or a reply of another
// shape or length) sets status() to INTERNAL "unexpected Redis reply to <script>: <why>", and the
// reads after it change nothing; the fields read before it keep their values.
class ReplyReader {
 public:
  enum class Shape {
    kScalar,        // a RETURN: the reply itself is the one value
    kArray,         // an array of exactly `fixed` elements
    kArrayAndTail,  // an array of `fixed` elements or more; Rest() takes the others
  };

  // `reply` must outlive the reader (a temporary does not compile); `script`: the name in the
  // error (a string literal: kept as a view).
  ReplyReader(redis::RedisReply&& reply, absl::string_view script, size_t fixed,
              Shape shape) = delete;
  ReplyReader(const redis::RedisReply& reply, absl::string_view script, size_t fixed, Shape shape)
      : reply_(reply), script_(script), shape_(shape) {
    if (shape == Shape::kScalar) return;
    if (reply.type != redis::RedisReply::Type::kArray) {
      Fail("not an array");
    } else if (shape == Shape::kArray ? reply.elements.size() != fixed
                                      : reply.elements.size() < fixed) {
      Fail(absl::StrCat(reply.elements.size(), " elements, wanted ",
                        shape == Shape::kArray ? "" : "at least ", fixed));
    }
  }

  // A Lua number (Redis returns it as an integer, truncated), or a string of a decimal integer or
  // of a number (a sorted set's score, "1732000000000"; truncated toward zero).
  void Int(absl::string_view name, int64_t* out) {
    const redis::RedisReply* element = Next(name);
    if (element == nullptr) return;
    if (element->type == redis::RedisReply::Type::kInteger) {
      *out = element->integer;
      return;
    }
    if (element->type == redis::RedisReply::Type::kString) {
      if (absl::SimpleAtoi(element->str, out)) return;
      double value = 0;
      if (absl::SimpleAtod(element->str, &value)) {
        *out = static_cast<int64_t>(value);
        return;
      }
    }
    Fail(absl::StrCat(name, " is not a number"));
  }
  // A string (a view into the reply).
  void Str(absl::string_view name, absl::string_view* out) {
    const redis::RedisReply* element = Next(name);
    if (element == nullptr) return;
    if (element->type != redis::RedisReply::Type::kString) {
      Fail(absl::StrCat(name, " is not a string"));
      return;
    }
    *out = element->str;
  }
  // A nested array: its elements.
  void Array(absl::string_view name, absl::Span<const redis::RedisReply>* out) {
    const redis::RedisReply* element = Next(name);
    if (element == nullptr) return;
    if (element->type != redis::RedisReply::Type::kArray) {
      Fail(absl::StrCat(name, " is not an array"));
      return;
    }
    *out = element->elements;
  }
  // Any element.
  void Any(absl::string_view name, const redis::RedisReply** out) {
    const redis::RedisReply* element = Next(name);
    if (element != nullptr) *out = element;
  }
  // Every element not read yet (kArrayAndTail).
  void Rest(absl::string_view /*name*/, absl::Span<const redis::RedisReply>* out) {
    if (!status_.ok()) return;
    *out = absl::MakeConstSpan(reply_.elements).subspan(next_);
    next_ = reply_.elements.size();
  }

  const absl::Status& status() const { return status_; }

 private:
  // The next element, or nullptr after a failure.
  const redis::RedisReply* Next(absl::string_view name) {
    if (!status_.ok()) return nullptr;
    if (shape_ == Shape::kScalar) return &reply_;
    if (next_ >= reply_.elements.size()) {  // unreachable after the constructor's count check
      Fail(absl::StrCat(name, " is missing"));
      return nullptr;
    }
    return &reply_.elements[next_++];
  }
  void Fail(absl::string_view why) {
    status_ = absl::InternalError(absl::StrCat("unexpected Redis reply to ", script_, ": ", why));
  }

  const redis::RedisReply& reply_;
  absl::string_view script_;
  Shape shape_;
  size_t next_ = 0;
  absl::Status status_;
};

}  // namespace orderhold::store::lua

#endif  // ORDERHOLD_SERVER_STORE_SCRIPT_REPLY_H_
