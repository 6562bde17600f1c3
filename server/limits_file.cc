#include "server/limits_file.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/util/json_util.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "server/common/files.h"
#include "server/common/status_macros.h"
#include "server/limits_file.pb.h"

namespace orderhold {
namespace {

// Deeper nesting is refused before protobuf sees it: the schema has three levels, and this bounds
// the recursion of JsonDocument::Append (yaml-cpp bounds its own).
constexpr int kMaxDepth = 32;

constexpr absl::string_view kWantedShape =
    "want a mapping with \"default\" and/or \"rules\" ({} for no limits)";

// "<name>:<line>: <path>: <what>", or without the path for the whole document.
absl::Status FileError(absl::string_view name, int line, absl::string_view path,
                       absl::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat(name, ":", line, ": ", path, path.empty() ? "" : ": ", what));
}

// The path of field `key` of the value at `path`: "rules[1]" + "max_holds" ->
// "rules[1].max_holds". The same form as protobuf's JSON parser and ScopeRules::Create use.
std::string FieldPath(absl::string_view path, absl::string_view key) {
  return path.empty() ? std::string(key) : absl::StrCat(path, ".", key);
}

// `path` without its last step ("rules[1].max_holds" -> "rules[1]" -> "rules" -> "").
absl::string_view ParentPath(absl::string_view path) {
  if (absl::EndsWith(path, "]")) {
    const size_t open = path.rfind('[');
    if (open != absl::string_view::npos) return path.substr(0, open);
  }
  const size_t dot = path.rfind('.');
  return dot == absl::string_view::npos ? absl::string_view() : path.substr(0, dot);
}

// True when `text` is a JSON number ("-1", "2.5", "1e3"): such plain YAML scalars go to protobuf
// as numbers, so that it judges them as numbers ("2.5" is not a count, "-1" is negative).
bool IsJsonNumber(absl::string_view text) {
  size_t i = 0;
  auto digits = [&] {
    const size_t start = i;
    while (i < text.size() && absl::ascii_isdigit(static_cast<unsigned char>(text[i]))) ++i;
    return i > start;
  };
  if (i < text.size() && text[i] == '-') ++i;
  if (i < text.size() && text[i] == '0') {
    ++i;
  } else if (!digits()) {
    return false;
  }
  if (i < text.size() && text[i] == '.') {
    ++i;
    if (!digits()) return false;
  }
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    if (i < text.size() && (text[i] == '+' || text[i] == '-')) ++i;
    if (!digits()) return false;
  }
  return i == text.size();
}

// `text` as a JSON string literal. The text is valid UTF-8 (checked on the whole file first).
void AppendJsonString(absl::string_view text, std::string* out) {
  out->push_back('"');
  for (const char c : text) {
    if (c == '"' || c == '\\') {
      out->push_back('\\');
      out->push_back(c);
    } else if (static_cast<unsigned char>(c) < 0x20) {
      absl::StrAppendFormat(out, "\\u%04x", static_cast<unsigned char>(c));
    } else {
      out->push_back(c);
    }
  }
  out->push_back('"');
}

// A YAML document as JSON text, with the line each of its values came from, by field path
// ("rules[1].max_holds"), to put protobuf's and ScopeRules' errors back on the file's lines.
// Scalars are typed as YAML 1.2's core schema types them: a quoted or !!str scalar is a string;
// a plain one is true/false, a number (JSON's syntax), or else a string; null is refused. Other
// tags, non-scalar mapping keys and keys given twice are refused: JSON cannot say them or
// protobuf would take the last one silently.
class JsonDocument {
 public:
  // INVALID_ARGUMENT (a FileError) for what the class comment refuses.
  static absl::StatusOr<JsonDocument> FromYaml(const YAML::Node& root, absl::string_view name) {
    JsonDocument document;
    ORDERHOLD_RETURN_IF_ERROR(document.Append(root, "", NodeLine(root, 1), 0, name));
    return document;
  }

  const std::string& json() const { return json_; }

  // The line of `path`, or of the nearest value around it that the document has (a field that
  // is missing is reported where its parent is).
  int LineOf(absl::string_view path) const {
    while (true) {
      if (auto it = lines_.find(path); it != lines_.end()) return it->second;
      if (path.empty()) return 1;
      path = ParentPath(path);
    }
  }

 private:
  // The 1-based line of `node`, or `fallback` when yaml-cpp has no mark for it.
  static int NodeLine(const YAML::Node& node, int fallback) {
    const YAML::Mark mark = node.Mark();
    return mark.is_null() || mark.line < 0 ? fallback : mark.line + 1;
  }

  absl::Status Append(const YAML::Node& node, const std::string& path, int line, int depth,
                      absl::string_view name) {
    lines_.emplace(path, line);
    if (depth > kMaxDepth) {
      return FileError(name, line, path, absl::StrCat("nested deeper than ", kMaxDepth, " levels"));
    }
    switch (node.Type()) {
      case YAML::NodeType::Scalar:
        return AppendScalar(node, path, line, name);
      case YAML::NodeType::Sequence: {
        json_.push_back('[');
        for (size_t i = 0; i < node.size(); ++i) {
          if (i > 0) json_.push_back(',');
          const YAML::Node item = node[i];
          ORDERHOLD_RETURN_IF_ERROR(
              Append(item, absl::StrCat(path, "[", i, "]"), NodeLine(item, line), depth + 1, name));
        }
        json_.push_back(']');
        return absl::OkStatus();
      }
      case YAML::NodeType::Map: {
        json_.push_back('{');
        absl::flat_hash_map<std::string, int> key_lines;  // this mapping's keys so far
        bool first = true;
        for (const auto& entry : node) {
          const int key_line = NodeLine(entry.first, line);
          if (!entry.first.IsScalar()) {
            return FileError(name, key_line, path, "a mapping key must be plain text");
          }
          const std::string& key = entry.first.Scalar();
          const std::string field = FieldPath(path, key);
          if (auto [it, inserted] = key_lines.emplace(key, key_line); !inserted) {
            return FileError(name, key_line, field,
                             absl::StrCat("given twice (first on line ", it->second, ")"));
          }
          if (!first) json_.push_back(',');
          first = false;
          AppendJsonString(key, &json_);
          json_.push_back(':');
          ORDERHOLD_RETURN_IF_ERROR(Append(entry.second, field, key_line, depth + 1, name));
        }
        json_.push_back('}');
        return absl::OkStatus();
      }
      case YAML::NodeType::Null:
      case YAML::NodeType::Undefined:
        break;
    }
    return FileError(name, line, path, "has no value (leave the field out instead)");
  }

  absl::Status AppendScalar(const YAML::Node& node, const std::string& path, int line,
                            absl::string_view name) {
    const std::string& tag = node.Tag();
    const std::string& text = node.Scalar();
    if (tag == "!" || tag == "tag:yaml.org,2002:str") {  // "!": quoted, or a block scalar
      AppendJsonString(text, &json_);
    } else if (tag != "?") {  // "?": plain, untagged
      return FileError(name, line, path,
                       absl::StrCat("YAML tag ", tag, " is not supported (only !!str)"));
    } else if (text == "~" || text == "null" || text == "Null" || text == "NULL") {
      return FileError(name, line, path, "has no value (leave the field out instead)");
    } else if (text == "true" || text == "True" || text == "TRUE") {
      json_.append("true");
    } else if (text == "false" || text == "False" || text == "FALSE") {
      json_.append("false");
    } else if (IsJsonNumber(text)) {
      json_.append(text);
    } else {
      AppendJsonString(text, &json_);
    }
    return absl::OkStatus();
  }

  std::string json_;
  absl::flat_hash_map<std::string, int> lines_;
};

// The message type of the value at `path` of a LimitsFile ("rules[1]" -> Rule), or null when
// the path leaves the schema.
const google::protobuf::Descriptor* MessageAt(absl::string_view path) {
  const google::protobuf::Descriptor* message = config::LimitsFile::descriptor();
  if (path.empty()) return message;
  for (absl::string_view step : absl::StrSplit(path, '.')) {
    step = step.substr(0, step.find('['));
    const google::protobuf::FieldDescriptor* field = message->FindFieldByName(std::string(step));
    if (field == nullptr || field->message_type() == nullptr) return nullptr;
    message = field->message_type();
  }
  return message;
}

// The field at `path` ("rules[1].max_holds"), or null when the path leaves the schema.
const google::protobuf::FieldDescriptor* FieldAt(absl::string_view path) {
  if (path.empty()) return nullptr;
  const google::protobuf::Descriptor* parent = MessageAt(ParentPath(path));
  if (parent == nullptr) return nullptr;
  absl::string_view last = path.substr(ParentPath(path).size());
  absl::ConsumePrefix(&last, ".");
  return parent->FindFieldByName(std::string(last.substr(0, last.find('['))));
}

// An error of protobuf's JSON parser, as a field path and words for the person editing the file.
struct JsonError {
  std::string path;
  std::string what;
};

// What protobuf 3.21's JSON parser says when it rejects a document (google/protobuf/util/
// json_util.cc, StatusErrorListener; it keeps the last error it meets). Its messages come in three
// forms, where <loc> is the path of the enclosing value ("rules[1]"), in parentheses when not
// empty:
//   "(<loc>): invalid value <value> for type <type>"  a value of the wrong type; <value> as JSON
//                                                      (strings quoted); <type> TYPE_UINT32,
//                                                      TYPE_STRING or the URL of a message type
//   "[(<loc>) ]<name>: <reason>"                       field <name>: "Cannot find field." (unknown)
//                                                      or "Proto field is not repeating, cannot
//                                                      start list."
//   ": Root element must be a message."                the document is not a mapping
// An object where a number belongs reads "(<loc>): invalid value Starting an object on a scalar
// field for type <name>". A message in none of these forms (another protobuf version) is passed
// on whole, at the document's line. tests/unit/limits_file_test.cc pins each form.
JsonError ExplainJsonError(absl::string_view message) {
  constexpr absl::string_view kInvalidValue = "): invalid value ";
  constexpr absl::string_view kForType = " for type ";
  constexpr absl::string_view kUnknownField = ": Cannot find field.";
  constexpr absl::string_view kNotRepeated = ": Proto field is not repeating, cannot start list.";
  if (message == ": Root element must be a message.") {
    return {"", absl::StrCat("the document is not a mapping: ", kWantedShape)};
  }
  if (absl::StartsWith(message, "(")) {
    const size_t value_at = message.find(kInvalidValue);
    const size_t type_at = message.rfind(kForType);
    if (value_at != absl::string_view::npos && type_at != absl::string_view::npos &&
        type_at > value_at) {
      const std::string loc(message.substr(1, value_at - 1));
      const size_t value_start = value_at + kInvalidValue.size();
      const absl::string_view value = message.substr(value_start, type_at - value_start);
      const absl::string_view type = message.substr(type_at + kForType.size());
      if (value == "Starting an object on a scalar field") {
        return {FieldPath(loc, type), "expected a single value, got a mapping"};
      }
      if (type == "TYPE_UINT32") {
        // Digits only: a count above uint32, said as ScopeRules says one above the domain's bound.
        const google::protobuf::FieldDescriptor* field = FieldAt(loc);
        if (field != nullptr && !value.empty() &&
            std::all_of(value.begin(), value.end(), [](char c) {
              return absl::ascii_isdigit(static_cast<unsigned char>(c));
            })) {
          const int64_t bound = field->name() == "max_holds"   ? domain::kMaxScopeHolds
                                : field->name() == "max_units" ? domain::kMaxUnits
                                                               : domain::kMaxScopeTotal;
          return {loc, absl::StrCat("must be 0-", bound, " (0: no limit), got ", value)};
        }
        return {loc, absl::StrCat("expected an unsigned integer, got ", value)};
      }
      if (type == "TYPE_STRING") {
        return {loc, absl::StrCat("expected a string, got ", value, " (quote it)")};
      }
      if (absl::StartsWith(type, "type.googleapis.com/")) {
        const google::protobuf::FieldDescriptor* field = FieldAt(loc);
        const bool list = field != nullptr && field->is_repeated() && !absl::EndsWith(loc, "]");
        return {loc, absl::StrCat(list ? "expected a list of mappings" : "expected a mapping",
                                  ", got ", value)};
      }
      return {loc, absl::StrCat("invalid value ", value, " for type ", type)};
    }
  }
  const bool unknown = absl::EndsWith(message, kUnknownField);
  const bool list = absl::EndsWith(message, kNotRepeated);
  if (unknown || list) {
    absl::string_view head =
        message.substr(0, message.size() - (unknown ? kUnknownField : kNotRepeated).size());
    std::string loc;
    if (absl::StartsWith(head, "(")) {
      if (const size_t close = head.find(") "); close != absl::string_view::npos) {
        loc = std::string(head.substr(1, close - 1));
        head.remove_prefix(close + 2);
      }
    }
    std::string path = FieldPath(loc, head);
    if (list) {
      const google::protobuf::FieldDescriptor* field = FieldAt(path);
      const bool mapping = field != nullptr && field->message_type() != nullptr;
      return {std::move(path),
              mapping ? "expected a mapping, got a list" : "expected a single value, got a list"};
    }
    std::string what = "unknown field";
    if (const google::protobuf::Descriptor* parent = MessageAt(loc); parent != nullptr) {
      std::vector<std::string> names;
      for (int i = 0; i < parent->field_count(); ++i) names.push_back(parent->field(i)->name());
      absl::StrAppend(&what, " (known here: ", absl::StrJoin(names, ", "), ")");
    }
    return {std::move(path), std::move(what)};
  }
  return {"", std::string(message)};
}

// The 1-based line and column of byte `offset` of `text`.
std::pair<int, int> LineAndColumn(absl::string_view text, size_t offset) {
  const absl::string_view before = text.substr(0, offset);
  const size_t line_start = before.rfind('\n');
  const int column =
      static_cast<int>(line_start == absl::string_view::npos ? offset + 1 : offset - line_start);
  return {static_cast<int>(std::count(before.begin(), before.end(), '\n')) + 1, column};
}

}  // namespace

namespace {

// Where a document starts: its start (a "---" line, or its first character) and its first node.
struct DocumentStart {
  YAML::Mark document;
  std::optional<YAML::Mark> node;
  std::optional<YAML::Mark> alias;  // the document's first alias (*name), if any
};

// Where the documents of `yaml` start, at most two (a second one is an error, and the first two
// are all anyone needs). Not YAML::LoadAll: yaml-cpp 0.7 never returns from it when a flow
// collection is followed by more text at the top level (`{"max_holds": 1},`: a JSON file with a
// trailing comma): its parser answers an empty document at the same place on every call, and
// LoadAll collects them until memory runs out (found by tests/fuzz/limits_file_fuzzer.cc). Throws
// YAML::ParserException on a syntax error, as LoadAll does.
std::vector<DocumentStart> FirstDocuments(const std::string& yaml) {
  class Starts final : public YAML::EventHandler {
   public:
    DocumentStart start;
    void OnDocumentStart(const YAML::Mark& m) override { start.document = m; }
    void OnDocumentEnd() override {}
    void OnNull(const YAML::Mark& m, YAML::anchor_t) override { Node(m); }
    void OnAlias(const YAML::Mark& m, YAML::anchor_t) override {
      Node(m);
      if (!start.alias.has_value()) start.alias = m;
    }
    void OnScalar(const YAML::Mark& m, const std::string&, YAML::anchor_t,
                  const std::string&) override {
      Node(m);
    }
    void OnSequenceStart(const YAML::Mark& m, const std::string&, YAML::anchor_t,
                         YAML::EmitterStyle::value) override {
      Node(m);
    }
    void OnSequenceEnd() override {}
    void OnMapStart(const YAML::Mark& m, const std::string&, YAML::anchor_t,
                    YAML::EmitterStyle::value) override {
      Node(m);
    }
    void OnMapEnd() override {}

   private:
    void Node(const YAML::Mark& m) {
      if (!start.node.has_value()) start.node = m;
    }
  };
  std::istringstream in(yaml);
  YAML::Parser parser(in);
  std::vector<DocumentStart> starts;
  while (starts.size() < 2) {
    Starts handler;
    if (!parser.HandleNextDocument(handler)) break;
    starts.push_back(handler.start);
  }
  return starts;
}

// The file's one YAML (or JSON) document as JSON with line numbers, or a FileError: a syntax
// error, no document or a second one, or an alias (*name: an alias can expand a few hundred bytes
// into gigabytes, and a limits file needs none).
absl::StatusOr<JsonDocument> ReadYamlDocument(absl::string_view text, absl::string_view name) {
  // yaml-cpp reports errors by throwing: caught here, at the edge.
  try {
    const std::string yaml(text);
    const std::vector<DocumentStart> documents = FirstDocuments(yaml);
    if (documents.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, ": the file is empty (only comments): ", kWantedShape));
    }
    if (documents.size() > 1) {
      const DocumentStart& second = documents[1];
      const YAML::Mark& at = second.node.value_or(second.document);
      const size_t offset = std::min<size_t>(std::max(second.document.pos, 0), text.size());
      if (absl::StartsWith(text.substr(offset), "---")) {
        return FileError(name, at.line + 1, "",
                         "a second YAML document (after ---): the file holds one");
      }
      return FileError(name, at.line + 1, "",
                       absl::StrCat("text after the end of the document at column ", at.column + 1,
                                    " (a trailing comma?)"));
    }
    if (const std::optional<YAML::Mark>& alias = documents[0].alias; alias.has_value()) {
      return FileError(name, alias->line + 1, "",
                       absl::StrCat("a YAML alias (*name) at column ", alias->column + 1,
                                    ": the limits file takes none (write the values out)"));
    }
    return JsonDocument::FromYaml(YAML::Load(yaml), name);
  } catch (const YAML::ParserException& e) {
    return FileError(name, e.mark.line + 1, "",
                     absl::StrCat("YAML syntax error at column ", e.mark.column + 1, ": ", e.msg));
  } catch (const YAML::Exception& e) {
    return FileError(name, e.mark.is_null() ? 1 : e.mark.line + 1, "", e.msg);
  }
}

// The rules of a parsed file, or why they do not make rules (a field's error, on its line of
// `document`).
absl::StatusOr<domain::ScopeRules> RulesOf(const config::LimitsFile& file,
                                           const JsonDocument& document, absl::string_view name) {
  const domain::ScopeLimits default_limits{file.default_().max_holds(),
                                           file.default_().max_units()};
  std::vector<domain::ScopeRule> rules;
  rules.reserve(file.rules_size());
  for (const config::Rule& rule : file.rules()) {
    rules.push_back({rule.prefix(),
                     {rule.max_holds(), rule.max_units()},
                     {rule.total_max_holds(), rule.total_max_units()},
                     rule.capacity_units()});
  }
  const domain::ScopeTotals default_totals{file.default_().total_max_holds(),
                                           file.default_().total_max_units()};
  absl::StatusOr<domain::ScopeRules> scope_rules = domain::ScopeRules::Create(
      default_limits, std::move(rules), default_totals, file.default_().capacity_units());
  if (!scope_rules.ok()) {
    // "rules[2].prefix: ..." -> that field's line.
    const absl::string_view message = scope_rules.status().message();
    const size_t colon = message.find(": ");
    const absl::string_view path =
        colon == absl::string_view::npos ? absl::string_view() : message.substr(0, colon);
    return FileError(name, document.LineOf(path), path,
                     path.empty() ? message : message.substr(colon + 2));
  }
  return scope_rules;
}

}  // namespace

absl::StatusOr<domain::ScopeRules> ParseLimitsFile(absl::string_view text,
                                                   absl::string_view name_for_errors) {
  const absl::string_view name = name_for_errors;
  if (text.size() > kMaxLimitsFileBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": over ", kMaxLimitsFileBytes, " bytes (not a limits file?)"));
  }
  if (absl::StripAsciiWhitespace(text).empty()) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": the file is empty: ", kWantedShape));
  }
  // YAML wants UTF-8, and protobuf's JSON parser refuses anything else with a message that gives
  // no line: check first.
  if (const size_t valid = domain::Utf8ValidPrefix(text); valid < text.size()) {
    const auto [line, column] = LineAndColumn(text, valid);
    return FileError(name, line, "",
                     absl::StrFormat("not valid UTF-8 (byte 0x%02x at column %d)",
                                     static_cast<unsigned char>(text[valid]), column));
  }

  ORDERHOLD_ASSIGN_OR_RETURN(JsonDocument document, ReadYamlDocument(text, name));
  config::LimitsFile file;
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;  // a typo ("max_hold") must not mean "no limit"
  if (const auto status =
          google::protobuf::util::JsonStringToMessage(document.json(), &file, options);
      !status.ok()) {
    const JsonError error =
        ExplainJsonError(absl::string_view(status.message().data(), status.message().size()));
    return FileError(name, document.LineOf(error.path), error.path, error.what);
  }

  return RulesOf(file, document, name);
}

absl::StatusOr<domain::ScopeRules> LoadLimitsFile(const std::string& path) {
  // One byte more than allowed: ParseLimitsFile says "over ... bytes".
  ORDERHOLD_ASSIGN_OR_RETURN(std::string text, ReadSmallFile(path, kMaxLimitsFileBytes + 1));
  return ParseLimitsFile(text, path);
}

}  // namespace orderhold
