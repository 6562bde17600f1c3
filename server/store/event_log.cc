#include "server/store/event_log.h"

#include <cstdint>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace orderhold::store {

std::string FormatEventId(int partition, absl::string_view stream_id) {
  return absl::StrCat(partition, "/", stream_id);
}

absl::StatusOr<std::pair<int, std::string>> ParseEventId(absl::string_view event_id,
                                                         int partition_count) {
  auto invalid = [&] {
    return absl::InvalidArgumentError(absl::StrCat(
        "event_ids: \"", absl::CHexEscape(event_id.substr(0, 64)),
        "\" is not an event id (expected \"<partition>/<ms>-<seq>\" as sent in HoldEvent)"));
  };
  std::vector<absl::string_view> parts = absl::StrSplit(event_id, '/');
  if (parts.size() != 2) return invalid();
  int partition = 0;
  if (!absl::SimpleAtoi(parts[0], &partition) || partition < 0 || partition >= partition_count)
    return invalid();
  std::vector<absl::string_view> id = absl::StrSplit(parts[1], '-');
  uint64_t ms = 0, seq = 0;
  if (id.size() != 2 || id[0].empty() || id[1].empty() ||
      id[0].find_first_not_of("0123456789") != absl::string_view::npos ||
      id[1].find_first_not_of("0123456789") != absl::string_view::npos ||
      !absl::SimpleAtoi(id[0], &ms) || !absl::SimpleAtoi(id[1], &seq)) {
    return invalid();
  }
  return std::make_pair(partition, std::string(parts[1]));
}

}  // namespace orderhold::store
