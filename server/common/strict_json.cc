#include "server/common/strict_json.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace orderhold {
namespace {

using nlohmann::json;

// Builds the document from nlohmann's SAX events; the first event it refuses stops the parse
// (a handler returning false ends sax_parse there) and leaves its reason in error().
class StrictHandler final : public nlohmann::json_sax<json> {
 public:
  explicit StrictHandler(int max_depth) : max_depth_(max_depth) {}

  bool null() override {
    return Fail(absl::StrCat(Where(),
                             "null is not allowed (an unset value: write the field "
                             "with a value, or leave the field out)"));
  }
  bool boolean(bool value) override { return Put(json(value)) != nullptr; }
  bool number_integer(number_integer_t value) override { return Put(json(value)) != nullptr; }
  bool number_unsigned(number_unsigned_t value) override { return Put(json(value)) != nullptr; }
  bool number_float(number_float_t value, const string_t& /*text*/) override {
    return Put(json(value)) != nullptr;
  }
  bool string(string_t& value) override { return Put(json(std::move(value))) != nullptr; }
  bool binary(binary_t& /*value*/) override { return Fail("binary values are not JSON"); }

  bool start_object(std::size_t /*elements*/) override { return Open(json::object()); }
  bool key(string_t& key) override {
    Frame& frame = stack_.back();
    if (frame.value->contains(key)) {
      return Fail(absl::StrCat(JsonPath(Path(stack_.size() - 1), key),
                               ": duplicate key (each key may appear once in an object)"));
    }
    // A placeholder, so that a later repeat of the key is seen; the value replaces it.
    frame.slot = &(*frame.value)[key];
    frame.key = std::move(key);
    return true;
  }
  bool end_object() override {
    stack_.pop_back();
    return true;
  }
  bool start_array(std::size_t /*elements*/) override { return Open(json::array()); }
  bool end_array() override {
    stack_.pop_back();
    return true;
  }

  bool parse_error(std::size_t position, const std::string& /*last_token*/,
                   const nlohmann::detail::exception& ex) override {
    // nlohmann's message without its "[json.exception.parse_error.101] " tag.
    absl::string_view what = ex.what();
    if (const size_t at = what.find("] "); absl::StartsWith(what, "[json.") && at != what.npos) {
      what.remove_prefix(at + 2);
    }
    return Fail(absl::StrCat("not JSON at byte ", position, ": ", what));
  }

  json& root() { return root_; }
  const std::string& error() const { return error_; }

 private:
  struct Frame {
    json* value;           // the object or list being filled
    json* slot = nullptr;  // an object's: the place of the value of `key`
    std::string key;
  };

  bool Fail(std::string why) {
    if (error_.empty()) error_ = std::move(why);
    return false;
  }

  // The place of the value arriving now: "allow_rules[0].name: " ("" at the top).
  std::string Where() const {
    const std::string path = Path(stack_.size());
    return path.empty() ? std::string() : absl::StrCat(path, ": ");
  }
  // The place of the value arriving in the frame `depth` - 1 (the top for 0).
  std::string Path(size_t depth) const {
    std::string path;
    for (size_t i = 0; i < depth; ++i) {
      const Frame& frame = stack_[i];
      if (!frame.value->is_array()) {
        path = JsonPath(path, frame.key);
        continue;
      }
      // Below the top, a list's child is open and already its last element; at the top, the
      // value arriving will be the next.
      const size_t size = frame.value->size();
      path = JsonPath(path, i + 1 < stack_.size() ? size - 1 : size);
    }
    return path;
  }

  // Stores `value` where the document expects the next value; where it now is.
  json* Put(json value) {
    if (stack_.empty()) {
      root_ = std::move(value);
      return &root_;
    }
    Frame& frame = stack_.back();
    if (frame.value->is_array()) {
      frame.value->push_back(std::move(value));
      return &frame.value->back();
    }
    *frame.slot = std::move(value);
    return frame.slot;
  }

  bool Open(json container) {
    if (static_cast<int>(stack_.size()) >= max_depth_) {
      return Fail(absl::StrCat(Where(), "nested deeper than ", max_depth_, " levels"));
    }
    // The container is the last element of its list or its key's slot, and stays there (and at
    // that address) until it closes: nothing is added to its parent meanwhile.
    json* placed = Put(std::move(container));
    stack_.push_back(Frame{.value = placed, .slot = nullptr, .key = {}});
    return true;
  }

  const int max_depth_;
  json root_;
  std::vector<Frame> stack_;
  std::string error_;
};

}  // namespace

absl::StatusOr<json> ParseStrictJson(absl::string_view text, const StrictJsonOptions& options) {
  if (text.size() > options.max_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("the text is ", text.size(), " bytes, over the ",
                                                   options.max_bytes, " allowed"));
  }
  StrictHandler handler(options.max_depth);
  if (!json::sax_parse(text.begin(), text.end(), &handler, json::input_format_t::json,
                       /*strict=*/true, /*ignore_comments=*/false)) {
    return absl::InvalidArgumentError(handler.error().empty() ? std::string("not JSON")
                                                              : handler.error());
  }
  return std::move(handler.root());
}

std::string JsonPath(absl::string_view parent, absl::string_view key) {
  return parent.empty() ? std::string(key) : absl::StrCat(parent, ".", key);
}

std::string JsonPath(absl::string_view parent, size_t index) {
  return absl::StrCat(parent, "[", index, "]");
}

const char* JsonTypeName(const json& value) {
  switch (value.type()) {
    case json::value_t::object:
      return "an object";
    case json::value_t::array:
      return "a list";
    case json::value_t::string:
      return "a string";
    case json::value_t::boolean:
      return "a boolean";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
    case json::value_t::number_float:
      return "a number";
    case json::value_t::null:
      return "null";
    default:
      return "not JSON";
  }
}

}  // namespace orderhold
