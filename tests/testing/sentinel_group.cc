#include "tests/testing/sentinel_group.h"

#include <algorithm>
#include <map>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "server/common/status_macros.h"

namespace orderhold::testing {
namespace {

constexpr int kSentinels = 3;
constexpr int kQuorum = 2;
constexpr absl::Duration kPollInterval = absl::Milliseconds(50);

using Fields = std::map<std::string, std::string, std::less<>>;

// RedisServer::Command() renders `SENTINEL MASTER` (one flat field/value array) and `SENTINEL
// REPLICAS` (an array of them) as one value per line; every instance's fields start with "name".
std::vector<Fields> ParseInstances(absl::string_view rendered) {
  std::vector<Fields> instances;
  std::vector<absl::string_view> lines = absl::StrSplit(rendered, '\n');
  for (size_t i = 0; i + 1 < lines.size(); i += 2) {
    if (lines[i] == "name" || instances.empty()) instances.emplace_back();
    instances.back()[std::string(lines[i])] = std::string(lines[i + 1]);
  }
  return instances;
}

std::string Field(const Fields& fields, absl::string_view key) {
  auto it = fields.find(key);
  return it == fields.end() ? "(missing)" : it->second;
}

// INFO replication says the replica's link to its primary is up.
absl::StatusOr<bool> LinkUp(RedisServer& node) {
  ORDERHOLD_ASSIGN_OR_RETURN(std::string info, node.Command({"INFO", "replication"}));
  return absl::StrContains(info, "master_link_status:up");
}

// Polls `check` (OK = done) every kPollInterval until it is OK or `timeout` passes; then
// DEADLINE_EXCEEDED with `what` and the last status.
template <typename Check>
absl::Status PollUntil(Check check, absl::Duration timeout, absl::string_view what) {
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    absl::Status status = check();
    if (status.ok()) return status;
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          what, " not within ", absl::FormatDuration(timeout), "; last: ", status.ToString()));
    }
    absl::SleepFor(kPollInterval);
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<SentinelGroup>> SentinelGroup::Start(SentinelGroupOptions options) {
  if (options.replicas < 1) {
    return absl::InvalidArgumentError("SentinelGroupOptions::replicas must be >= 1");
  }
  if (options.master_name.empty() || options.app_user.empty() || options.app_password.empty() ||
      options.admin_password.empty()) {
    return absl::InvalidArgumentError(
        "SentinelGroupOptions: master_name, app_user, app_password and admin_password must be set");
  }
  std::unique_ptr<SentinelGroup> group(new SentinelGroup(std::move(options)));
  const SentinelGroupOptions& opts = group->options_;

  RedisServerOptions data{
      .appendonly = opts.appendonly,
      .extra_config = opts.data_extra_config,
      .command_timeout = opts.command_timeout,
      .admin_password = opts.admin_password,
      .acl_users = {absl::StrCat(opts.app_user, " on >", opts.app_password, " ",
                                 opts.app_acl_rules)},
  };
  ORDERHOLD_ASSIGN_OR_RETURN(std::unique_ptr<RedisServer> primary, RedisServer::Start(data));
  data.replicaof = absl::StrCat("127.0.0.1:", primary->port());
  group->nodes_.push_back(std::move(primary));
  for (int i = 0; i < opts.replicas; ++i) {
    ORDERHOLD_ASSIGN_OR_RETURN(std::unique_ptr<RedisServer> replica, RedisServer::Start(data));
    group->nodes_.push_back(std::move(replica));
  }
  // Replicas first: a sentinel's first INFO of the primary then lists them all.
  const absl::Time deadline = absl::Now() + opts.ready_timeout;
  ORDERHOLD_RETURN_IF_ERROR(PollUntil(
      [&]() -> absl::Status {
        for (int i = 1; i < group->node_count(); ++i) {
          ORDERHOLD_ASSIGN_OR_RETURN(bool up, LinkUp(group->node(i)));
          if (!up) return absl::FailedPreconditionError(absl::StrCat("replica ", i, " link down"));
        }
        return absl::OkStatus();
      },
      opts.ready_timeout, "replication links up"));

  const std::string& name = opts.master_name;
  const std::string sentinel_config =
      absl::StrCat("sentinel monitor ", name, " 127.0.0.1 ", group->node(0).port(), " ", kQuorum,
                   "\n", "sentinel auth-pass ", name, " ", opts.admin_password, "\n",
                   "sentinel down-after-milliseconds ", name, " ",
                   absl::ToInt64Milliseconds(opts.down_after), "\n", "sentinel failover-timeout ",
                   name, " ", absl::ToInt64Milliseconds(opts.failover_timeout), "\n",
                   "sentinel parallel-syncs ", name, " 1\n");
  RedisServerOptions sentinel{
      .extra_config = sentinel_config,
      .command_timeout = opts.command_timeout,
      .admin_password = opts.sentinel_password,
      .acl_users = opts.sentinel_acl_users,
      .sentinel = true,
  };
  for (int i = 0; i < kSentinels; ++i) {
    ORDERHOLD_ASSIGN_OR_RETURN(std::unique_ptr<RedisServer> s, RedisServer::Start(sentinel));
    group->sentinels_.push_back(std::move(s));
    ORDERHOLD_RETURN_IF_ERROR(group->ApplySentinelDebug(i));
  }
  ORDERHOLD_RETURN_IF_ERROR(PollUntil([&] { return group->CheckReady(); },
                                      std::max(deadline - absl::Now(), absl::ZeroDuration()),
                                      "sentinel group ready"));
  return group;
}

SentinelGroup::~SentinelGroup() {
  sentinels_.clear();  // first: no failover while the data nodes go away
  nodes_.clear();
}

absl::Status SentinelGroup::CheckReady() {
  const std::string& name = options_.master_name;
  for (int i = 0; i < sentinel_count(); ++i) {
    const std::string who = absl::StrCat("sentinel ", i, " (port ", sentinel_port(i), ")");
    ORDERHOLD_ASSIGN_OR_RETURN(std::string master,
                               SentinelCommand(i, {"SENTINEL", "MASTER", name}));
    std::vector<Fields> m = ParseInstances(master);
    if (m.size() != 1 || Field(m[0], "flags") != "master" ||
        Field(m[0], "num-other-sentinels") != absl::StrCat(kSentinels - 1) ||
        Field(m[0], "num-slaves") != absl::StrCat(options_.replicas)) {
      return absl::FailedPreconditionError(absl::StrCat(
          who, " sees the primary with flags=", m.empty() ? "?" : Field(m[0], "flags"),
          " num-other-sentinels=", m.empty() ? "?" : Field(m[0], "num-other-sentinels"),
          " num-slaves=", m.empty() ? "?" : Field(m[0], "num-slaves")));
    }
    ORDERHOLD_ASSIGN_OR_RETURN(std::string replicas,
                               SentinelCommand(i, {"SENTINEL", "REPLICAS", name}));
    for (const Fields& r : ParseInstances(replicas)) {
      if (Field(r, "flags") != "slave" || Field(r, "master-link-status") != "ok") {
        return absl::FailedPreconditionError(
            absl::StrCat(who, " sees replica ", Field(r, "name"), " with flags=", Field(r, "flags"),
                         " master-link-status=", Field(r, "master-link-status")));
      }
    }
    absl::StatusOr<std::string> quorum = SentinelCommand(i, {"SENTINEL", "CKQUORUM", name});
    if (!quorum.ok() || !absl::StartsWith(*quorum, "OK")) {
      return absl::FailedPreconditionError(
          absl::StrCat(who, " CKQUORUM: ", quorum.ok() ? *quorum : quorum.status().ToString()));
    }
  }
  return absl::OkStatus();
}

int SentinelGroup::NodeIndexForPort(int port) const {
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (nodes_[i]->port() == port) return static_cast<int>(i);
  }
  return -1;
}

std::string SentinelGroup::SentinelUrl() const {
  std::vector<std::string> hosts;
  for (const auto& s : sentinels_) hosts.push_back(absl::StrCat("127.0.0.1:", s->port()));
  return absl::StrCat("redis://", options_.app_user, ":", options_.app_password, "@",
                      absl::StrJoin(hosts, ","));
}

absl::StatusOr<std::string> SentinelGroup::SentinelCommand(int i,
                                                           const std::vector<std::string>& args) {
  return sentinel(i).Command(args);
}

absl::StatusOr<int> SentinelGroup::PrimaryPort() {
  absl::Status last = absl::UnavailableError("no sentinel is running");
  for (int i = 0; i < sentinel_count(); ++i) {
    if (!sentinel(i).running()) continue;
    absl::StatusOr<std::string> addr =
        SentinelCommand(i, {"SENTINEL", "GET-MASTER-ADDR-BY-NAME", options_.master_name});
    if (!addr.ok()) {
      last = addr.status();
      continue;
    }
    std::vector<absl::string_view> parts = absl::StrSplit(*addr, '\n');
    int port = 0;
    if (parts.size() != 2 || !absl::SimpleAtoi(parts[1], &port)) {
      return absl::NotFoundError(absl::StrCat("sentinel ", i, " does not know master '",
                                              options_.master_name, "': ", *addr));
    }
    return port;
  }
  return last;
}

absl::StatusOr<int> SentinelGroup::PrimaryNode() {
  ORDERHOLD_ASSIGN_OR_RETURN(int port, PrimaryPort());
  int node = NodeIndexForPort(port);
  if (node < 0) return absl::NotFoundError(absl::StrCat("primary port ", port, " is not ours"));
  return node;
}

absl::Status SentinelGroup::Failover() {
  absl::Status last = absl::UnavailableError("no sentinel is running");
  for (int i = 0; i < sentinel_count(); ++i) {
    if (!sentinel(i).running()) continue;
    absl::StatusOr<std::string> reply =
        SentinelCommand(i, {"SENTINEL", "FAILOVER", options_.master_name});
    if (reply.ok()) return absl::OkStatus();
    last = reply.status();
    // An error reply is the sentinel's answer ("NOGOODSLAVE", "INPROG"); only an unreachable
    // sentinel is worth skipping.
    if (absl::IsInternal(last)) return last;
  }
  return last;
}

absl::Status SentinelGroup::WaitForPrimary(int port, absl::Duration timeout) {
  return PollUntil(
      [&]() -> absl::Status {
        std::vector<std::string> seen;
        bool all = true;
        for (int i = 0; i < sentinel_count(); ++i) {
          if (!sentinel(i).running()) continue;
          absl::StatusOr<std::string> addr =
              SentinelCommand(i, {"SENTINEL", "GET-MASTER-ADDR-BY-NAME", options_.master_name});
          std::string got =
              addr.ok() ? absl::StrReplaceAll(*addr, {{"\n", ":"}}) : addr.status().ToString();
          all = all && got == absl::StrCat("127.0.0.1:", port);
          seen.push_back(absl::StrCat("sentinel ", i, ": ", got));
        }
        if (all && !seen.empty()) return absl::OkStatus();
        return absl::FailedPreconditionError(absl::StrJoin(seen, "; "));
      },
      timeout, absl::StrCat("all sentinels reporting primary 127.0.0.1:", port));
}

absl::Status SentinelGroup::WaitForRole(int node, absl::string_view role, absl::Duration timeout) {
  if (node < 0 || node >= node_count()) {
    return absl::InvalidArgumentError(absl::StrCat("WaitForRole(): no data node ", node));
  }
  if (role != "master" && role != "slave") {
    return absl::InvalidArgumentError(
        absl::StrCat("WaitForRole(): role must be master or slave, got '", role, "'"));
  }
  RedisServer& n = this->node(node);
  return PollUntil(
      [&]() -> absl::Status {
        ORDERHOLD_ASSIGN_OR_RETURN(std::string reply, n.Command({"ROLE"}));
        const std::string actual = reply.substr(0, reply.find('\n'));
        if (actual != role) {
          return absl::FailedPreconditionError(absl::StrCat("ROLE is ", actual));
        }
        if (role == "slave") {
          ORDERHOLD_ASSIGN_OR_RETURN(bool up, LinkUp(n));
          if (!up) return absl::FailedPreconditionError("slave, link not up yet");
        }
        return absl::OkStatus();
      },
      timeout, absl::StrCat("node ", node, " (port ", n.port(), ") becoming ", role));
}

absl::Status SentinelGroup::StopSentinel(int i) { return sentinel(i).Stop(); }

absl::Status SentinelGroup::RestartSentinel(int i) {
  ORDERHOLD_RETURN_IF_ERROR(sentinel(i).Restart());
  return ApplySentinelDebug(i);
}

absl::Status SentinelGroup::ApplySentinelDebug(int i) {
  if (options_.sentinel_debug.empty()) return absl::OkStatus();
  std::vector<std::string> args = {"SENTINEL", "DEBUG"};
  args.insert(args.end(), options_.sentinel_debug.begin(), options_.sentinel_debug.end());
  return SentinelCommand(i, args).status();
}

absl::StatusOr<int> SentinelGroup::KillSentinelPubsubClients(int i) {
  ORDERHOLD_ASSIGN_OR_RETURN(std::string killed,
                             SentinelCommand(i, {"CLIENT", "KILL", "TYPE", "pubsub"}));
  int n = 0;
  if (!absl::SimpleAtoi(killed, &n)) {
    return absl::InternalError(absl::StrCat("CLIENT KILL answered '", killed, "'"));
  }
  return n;
}

}  // namespace orderhold::testing
