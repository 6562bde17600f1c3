#include "server/store/event_nudges.h"

#include <utility>

#include "server/common/status_macros.h"
#include "server/store/keys.h"

namespace orderhold::store {

absl::StatusOr<std::unique_ptr<EventNudgeSubscriber>> EventNudgeSubscriber::Start(
    EventNudgeOptions options) {
  if (options.topology == nullptr || !options.on_nudge) {
    return absl::InvalidArgumentError("event nudges: topology and on_nudge are required");
  }
  ORDERHOLD_RETURN_IF_ERROR(ValidateKeyPrefix(options.key_prefix));
  redis::ShardedSubscriberOptions subscriber;
  subscriber.topology = std::move(options.topology);
  subscriber.node = std::move(options.node);
  const KeySchema keys(options.key_prefix);
  for (int p = 0; p < KeySchema::kPartitionCount; ++p) {
    subscriber.channels.push_back(keys.NudgeChannel(p));  // channel index == partition
  }
  // An empty message: events were appended (read that partition once); "due": a hold may be due
  // earlier than the reaper knew. A new subscription means both (what was published before it
  // is lost).
  subscriber.on_message = [on_nudge = options.on_nudge, on_due = options.on_due](
                              int partition, const std::string& payload) {
    if (payload.empty()) {
      on_nudge(partition);
    } else if (payload == "due" && on_due) {
      on_due(partition);
    }
  };
  subscriber.on_subscribed = [on_nudge = std::move(options.on_nudge),
                              on_due = std::move(options.on_due)](int partition) {
    on_nudge(partition);
    if (on_due) on_due(partition);
  };
  subscriber.name = "redis event nudges";
  subscriber.timings = options.timings;
  subscriber.refused_hint =
      "the app user needs the channel pattern &<key_prefix>:* and +ssubscribe; event deliveries "
      "fall back to the safety sweep";
  subscriber.connect_failure_log = std::move(options.connect_failure_log);
  subscriber.messages = options.nudges;
  subscriber.subscriptions = options.resubscribes;
  ORDERHOLD_ASSIGN_OR_RETURN(std::unique_ptr<redis::ShardedSubscriber> started,
                             redis::ShardedSubscriber::Start(std::move(subscriber)));
  return std::unique_ptr<EventNudgeSubscriber>(new EventNudgeSubscriber(std::move(started)));
}

}  // namespace orderhold::store
