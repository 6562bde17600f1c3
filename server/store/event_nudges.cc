#include "server/store/event_nudges.h"

#include <utility>

#include "server/common/status_macros.h"
#include "server/store/keys.h"

namespace orderhold::store {

namespace {

absl::Status Validate(const EventNudgeOptions& options) {
  if (options.topology == nullptr) {
    return absl::InvalidArgumentError("event nudges: a topology is required");
  }
  if (options.channels == NudgeChannels::kEvents ? !options.on_nudge
                                                 : !options.on_due || !options.on_group) {
    return absl::InvalidArgumentError(
        "event nudges: on_nudge (event channels), or on_due and on_group (reaper channels), are "
        "required");
  }
  return ValidateKeyPrefix(options.key_prefix);
}

}  // namespace

absl::StatusOr<std::unique_ptr<EventNudgeSubscriber>> EventNudgeSubscriber::Start(
    EventNudgeOptions options) {
  ORDERHOLD_RETURN_IF_ERROR(Validate(options));
  redis::ShardedSubscriberOptions subscriber;
  subscriber.topology = std::move(options.topology);
  subscriber.node = std::move(options.node);
  const KeySchema keys(options.key_prefix);
  const bool events = options.channels == NudgeChannels::kEvents;
  for (int p = 0; p < KeySchema::kPartitionCount; ++p) {
    // channel index == partition
    subscriber.channels.push_back(events ? keys.NudgeChannel(p) : keys.ReaperChannel(p));
  }
  if (events) {
    // A nudge and a new subscription mean the same: read that partition once.
    subscriber.on_message = [on_nudge = options.on_nudge](int partition, const std::string&) {
      on_nudge(partition);
    };
    subscriber.on_subscribed = std::move(options.on_nudge);
    subscriber.name = "redis event nudges";
  } else {
    // "due": a hold may be due earlier than the reaper knew; "group": a group was created. A new
    // subscription may have lost both.
    subscriber.on_message = [on_due = options.on_due, on_group = options.on_group](
                                int partition, const std::string& payload) {
      if (payload == "due") {
        on_due(partition);
      } else if (payload == "group") {
        on_group(partition);
      }
    };
    subscriber.on_subscribed = [on_due = std::move(options.on_due),
                                on_group = std::move(options.on_group)](int partition) {
      on_due(partition);
      on_group(partition);
    };
    subscriber.name = "redis reaper nudges";
  }
  subscriber.timings = options.timings;
  subscriber.refused_hint =
      events ? "the app user needs the channel pattern &<key_prefix>:* and +ssubscribe; event "
               "deliveries fall back to the safety sweep"
             : "the app user needs the channel pattern &<key_prefix>:* and +ssubscribe; the "
               "reaper looks at every partition every tick";
  subscriber.connect_failure_log = std::move(options.connect_failure_log);
  subscriber.messages = options.nudges;
  subscriber.subscriptions = options.resubscribes;
  ORDERHOLD_ASSIGN_OR_RETURN(std::unique_ptr<redis::ShardedSubscriber> started,
                             redis::ShardedSubscriber::Start(std::move(subscriber)));
  return std::unique_ptr<EventNudgeSubscriber>(new EventNudgeSubscriber(std::move(started)));
}

absl::StatusOr<std::unique_ptr<OnDemandEventNudges>> OnDemandEventNudges::Start(
    EventNudgeOptions options, std::function<bool()> wanted, absl::Duration linger,
    absl::Duration check_every) {
  ORDERHOLD_RETURN_IF_ERROR(Validate(options));
  if (!wanted) return absl::InvalidArgumentError("event nudges: `wanted` is required");
  return std::unique_ptr<OnDemandEventNudges>(
      new OnDemandEventNudges(std::move(options), std::move(wanted), linger, check_every));
}

OnDemandEventNudges::OnDemandEventNudges(EventNudgeOptions options, std::function<bool()> wanted,
                                         absl::Duration linger, absl::Duration check_every)
    : options_(std::move(options)),
      wanted_(std::move(wanted)),
      linger_(linger),
      check_every_(check_every),
      thread_([this] { Loop(); }) {}

OnDemandEventNudges::~OnDemandEventNudges() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
  absl::MutexLock lock(&mu_);
  subscriber_.reset();
}

bool OnDemandEventNudges::running() const {
  absl::MutexLock lock(&mu_);
  return subscriber_ != nullptr;
}

void OnDemandEventNudges::Loop() {
  absl::Time unwanted_since = absl::InfiniteFuture();  // while running and not wanted
  absl::MutexLock lock(&mu_);
  while (!mu_.AwaitWithTimeout(absl::Condition(&stopping_), check_every_)) {
    const bool wanted = wanted_();
    if (wanted && subscriber_ == nullptr) {
      absl::StatusOr<std::unique_ptr<EventNudgeSubscriber>> started =
          EventNudgeSubscriber::Start(options_);
      // Validated at Start; a refusal here leaves the watches to the safety sweep.
      if (started.ok()) subscriber_ = *std::move(started);
    }
    if (wanted || subscriber_ == nullptr) {
      unwanted_since = absl::InfiniteFuture();
    } else if (unwanted_since == absl::InfiniteFuture()) {
      unwanted_since = absl::Now();
    } else if (absl::Now() - unwanted_since >= linger_) {
      subscriber_.reset();  // stops its threads (~100 ms) under mu_: only running() waits
      unwanted_since = absl::InfiniteFuture();
    }
  }
}

}  // namespace orderhold::store
