#include "server/redis/redis_client.h"

#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/container/inlined_vector.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/common/log.h"
#include "server/common/status_macros.h"

namespace orderhold::redis {
namespace {

// How often an idle I/O thread looks whether the topology changed, to close a connection to the
// old primary that has nothing to send. Once a change is seen no new batch or lend uses such a
// connection (each checks first), whatever this is: it only bounds how long an idle one stays
// open. Each look is a wake-up (~25-30 us of CPU on a VM): an idle server with the default pools
// (4 request connections and the reaper's) made 232 context switches a second at 100 ms, 186 at
// 1 s.
constexpr absl::Duration kIdleCheck = absl::Seconds(1);

// The status for a reply that is an error, else the reply. With `cluster_replies`, the errors a
// cluster client acts upon (redirects, TRYAGAIN, CLUSTERDOWN) stay replies.
absl::StatusOr<RedisReply> ReplyOrError(RedisReply reply, bool cluster_replies) {
  if (reply.type != RedisReply::Type::kError) return reply;
  if (cluster_replies) {
    const RedisErrorKind kind = ClassifyRedisError(reply.str);
    if (kind == RedisErrorKind::kMoved || kind == RedisErrorKind::kAsk ||
        kind == RedisErrorKind::kTryAgain) {
      return reply;
    }
  }
  return RedisErrorStatus(reply.str);
}

}  // namespace

// One connection, the topology generation it was made at, the SHAs of the scripts loaded on it,
// and whether it calls them as functions (FCALL). Used by one I/O thread only.
class RedisClient::Connection {
 public:
  // `functions_refused`: the client's flag that a refused FUNCTION LOAD was logged.
  Connection(RedisClient& client, const RedisClientOptions& options,
             std::atomic<bool>& functions_refused)
      : options_(options), functions_refused_(functions_refused), client_(client) {}

  bool connected() const { return connection_ != nullptr; }
  void Drop() { connection_.reset(); }
  RedisConnection& get() { return *connection_; }
  // Made before the topology's last change: it may talk to the old primary.
  bool Stale() const { return generation_ != options_.topology->generation(); }

  // Asks the topology for the primary, connects, and in one round trip AUTHs, SELECTs, checks
  // ROLE and loads the function library and every script, all by `deadline`.
  absl::Status Connect(absl::Time deadline) {
    connection_.reset();
    RedisTopology& topology = *options_.topology;
    const uint64_t generation = topology.generation();
    ORDERHOLD_ASSIGN_OR_RETURN(HostPort primary, topology.NodeFor(RedisTopology::kAnySlot));
    ORDERHOLD_ASSIGN_OR_RETURN(
        std::unique_ptr<RedisConnection> connection,
        RedisConnection::Connect(primary, options_.node.tls.get(), deadline));
    ORDERHOLD_RETURN_IF_ERROR(Handshake(*connection, primary, deadline));
    ORDERHOLD_ASSIGN_OR_RETURN(const uint64_t accepted,
                               Confirm(*connection, primary, generation, deadline));
    connection_ = std::move(connection);
    generation_ = accepted;
    return absl::OkStatus();
  }

  // FCALL (when the node took the library) or EVALSHA for script commands (EVAL with the body
  // when `with_body`), the command itself otherwise.
  void Append(const RedisCommand& command, bool with_body) {
    if (command.asking) connection_->Append({"ASKING"});
    if (command.script < 0) {
      connection_->Append({}, command.args);
      return;
    }
    absl::string_view verb = "EVALSHA";
    absl::string_view script = shas_[command.script];
    if (with_body) {
      verb = "EVAL";
      script = options_.scripts[command.script];
    } else if (fcall_) {
      verb = "FCALL";
      script = options_.functions[command.script];
    }
    connection_->Append({verb, script}, command.args);
  }

  // The node lost the library (FUNCTION FLUSH or DELETE): EVALSHA until the connection is made
  // again (its handshake loads the library anew).
  void StopFcall() { fcall_ = false; }

 private:
  // On a new connection to `primary`, in one round trip: AUTH, SELECT, CLIENT SETNAME, ROLE (when
  // the topology asks for it), FUNCTION LOAD of the library (when there is one: fcall_ says
  // whether the node took it) and SCRIPT LOAD of every script (their SHAs into shas_), all by
  // `deadline`. UNAVAILABLE naming the step Redis refused, or the I/O error (with a hint to use
  // rediss:// when a plain connection was dropped before any answer).
  absl::Status Handshake(RedisConnection& connection, const HostPort& primary,
                         absl::Time deadline) {
    const NodeOptions& node_options = options_.node;
    ORDERHOLD_ASSIGN_OR_RETURN(const HandshakeSteps steps, AppendHandshake(connection));
    // Redis drops a plain client on its TLS port without a word: the first bytes are no TLS
    // hello, so it closes the connection (reset by peer) before answering anything. Only this
    // step knows the connection is fresh and nothing was answered yet, so the hint lives here.
    bool answered = false;
    const auto hint = [&](absl::Status status) {
      if (answered || options_.node.tls != nullptr || !absl::IsUnavailable(status) ||
          absl::StrContains(status.message(), "rediss://")) {
        return status;
      }
      return absl::UnavailableError(
          absl::StrCat(status.message(),
                       " (dropped before Redis answered anything: if the port speaks TLS, use "
                       "rediss://)"));
    };
    const auto read = [&]() -> absl::StatusOr<RedisReply> {
      absl::StatusOr<RedisReply> reply = connection.Read(deadline);
      if (!reply.ok()) return hint(reply.status());
      answered = true;
      return reply;
    };
    ORDERHOLD_RETURN_IF_ERROR(hint(connection.Flush(deadline)));
    const std::string node = primary.ToString();
    if (steps.auth) {
      ORDERHOLD_ASSIGN_OR_RETURN(RedisReply reply, read());
      if (reply.type == RedisReply::Type::kError) {
        return absl::UnavailableError(
            absl::StrCat("redis: AUTH", node_options.user.empty() ? "" : " as ", node_options.user,
                         " at ", node, " failed: ", reply.str));
      }
    }
    if (steps.select) {
      ORDERHOLD_ASSIGN_OR_RETURN(RedisReply reply, read());
      if (reply.type == RedisReply::Type::kError) {
        return absl::UnavailableError(
            absl::StrCat("redis: SELECT ", options_.db, " at ", node, " failed: ", reply.str));
      }
    }
    if (steps.name) {
      // An error (an ACL without +client|setname) does not matter: the name is for CLIENT LIST.
      ORDERHOLD_RETURN_IF_ERROR(read().status());
    }
    if (steps.role) {
      ORDERHOLD_ASSIGN_OR_RETURN(RedisReply reply, read());
      // An error (an ACL without +role) skips the check: READONLY still catches a replica.
      if (options_.topology->verify_role() && reply.type == RedisReply::Type::kArray &&
          !reply.elements.empty() && reply.elements[0].str != "master") {
        options_.topology->ReportNotPrimary(primary);
        return absl::UnavailableError(absl::StrCat("redis: ", node, " is not the primary (ROLE ",
                                                   reply.elements[0].str, "); re-resolving"));
      }
      if (client_.WantsReplicaCount()) client_.TakeRole(reply, node);
    }
    fcall_ = false;
    if (steps.functions) {
      ORDERHOLD_ASSIGN_OR_RETURN(RedisReply reply, read());
      TakeFunctionLoadReply(reply, node);
    }
    shas_.resize(options_.scripts.size());
    for (std::string& sha : shas_) {
      ORDERHOLD_ASSIGN_OR_RETURN(RedisReply reply, read());
      if (reply.type == RedisReply::Type::kError) {
        return absl::UnavailableError(
            absl::StrCat("redis: SCRIPT LOAD at ", node, " failed: ", reply.str));
      }
      sha = std::move(reply.str);
    }
    return absl::OkStatus();
  }

  // What a handshake sent, in order: each step's reply is read in the same order (then one reply
  // per SCRIPT LOAD).
  struct HandshakeSteps {
    bool auth = false;       // AUTH: the node's credentials are set
    bool select = false;     // SELECT: a database other than 0
    bool name = false;       // CLIENT SETNAME: a client name is set
    bool role = false;       // ROLE: the topology asks for the node's role to be checked
    bool functions = false;  // FUNCTION LOAD: there is a function library
  };

  // Appends a handshake's commands to `connection` without sending them: AUTH, SELECT, CLIENT
  // SETNAME, ROLE and FUNCTION LOAD as the options ask, then SCRIPT LOAD of every script. Returns
  // which of the optional steps it appended, or NodeAuthCommand's error (an unreadable password
  // file).
  absl::StatusOr<HandshakeSteps> AppendHandshake(RedisConnection& connection) const {
    const NodeOptions& node_options = options_.node;
    ORDERHOLD_ASSIGN_OR_RETURN(const std::vector<std::string> auth,
                               NodeAuthCommand(node_options, "redis"));
    const HandshakeSteps steps{
        .auth = !auth.empty(),
        .select = options_.db != 0,
        .name = !node_options.client_name.empty(),
        .role = options_.topology->verify_role() || client_.WantsReplicaCount(),
        .functions = !options_.function_library.empty()};
    if (steps.auth) connection.Append(auth);
    if (steps.select) connection.Append({"SELECT", absl::StrCat(options_.db)});
    if (steps.name) connection.Append({"CLIENT", "SETNAME", node_options.client_name});
    if (steps.role) connection.Append({"ROLE"});
    if (steps.functions) connection.Append({"FUNCTION", "LOAD", options_.function_library});
    for (const std::string& script : options_.scripts)
      connection.Append({"SCRIPT", "LOAD", script});
    return steps;
  }

  // Takes FUNCTION LOAD's `reply` from `node` into fcall_: the scripts are called by FCALL when
  // the library loaded, or was already there; else by EVALSHA, and the failure is logged (a
  // refusal once per client, any other failure once per connection).
  void TakeFunctionLoadReply(const RedisReply& reply, const std::string& node) {
    // The library's name is a hash of its code: one of that name is this code, loaded by
    // another connection or another replica of the same release.
    fcall_ =
        reply.type != RedisReply::Type::kError || (absl::StartsWith(reply.str, "ERR Library '") &&
                                                   absl::EndsWith(reply.str, "' already exists"));
    if (fcall_) return;
    // Refused for good (the ACL, a Redis without FUNCTION): said once per client. Any other
    // failure (OOM, a library Redis cannot compile) is said for each connection it affects.
    const bool refused = absl::StartsWith(reply.str, "NOPERM") ||
                         absl::StrContains(reply.str, "unknown command") ||
                         absl::StrContains(reply.str, "unknown subcommand");
    if (!refused) {
      LogWarning("redis: FUNCTION LOAD at ", node, " failed (", reply.str,
                 "): this connection calls the scripts by EVALSHA until it is made again");
    } else if (!functions_refused_.exchange(true)) {
      LogWarning("redis: FUNCTION LOAD at ", node, " refused (", reply.str,
                 "): calling the scripts by EVALSHA (give the ACL +function|load and +fcall "
                 "to use Redis Functions)");
    }
  }

  // Asks the topology again once the node answered, and lets it accept the connection; returns
  // the generation the connection counts as made at. UNAVAILABLE when the primary moved while
  // connecting, or the topology refuses the connection (StandaloneTopology::AcceptConnection).
  absl::StatusOr<uint64_t> Confirm(RedisConnection& connection, const HostPort& primary,
                                   uint64_t generation, absl::Time deadline) {
    const std::string node = primary.ToString();
    // Re-resolve now that the node answered: a connect that started before a failover can
    // complete after it (a hung primary that resumes answers as master for seconds).
    ORDERHOLD_ASSIGN_OR_RETURN(const HostPort now_primary,
                               options_.topology->Refresh(RedisTopology::kAnySlot, deadline));
    if (now_primary != primary) {
      return absl::UnavailableError(absl::StrCat("redis: the primary moved from ", node, " to ",
                                                 now_primary.ToString(), " while connecting"));
    }
    // Standalone: a connection that reached another address (the DNS name moved) drops every
    // one made before it; one made across a failover is refused (StandaloneTopology).
    uint64_t accepted = generation;
    ORDERHOLD_RETURN_IF_ERROR(
        options_.topology->AcceptConnection(primary, connection.peer(), &accepted));
    return accepted;
  }

  const RedisClientOptions& options_;
  std::atomic<bool>& functions_refused_;
  RedisClient& client_;
  std::unique_ptr<RedisConnection> connection_;
  uint64_t generation_ = 0;
  std::vector<std::string> shas_;
  bool fcall_ = false;
};

// One I/O thread's loop and state: its connection and the batch under way. The steps of a turn:
// TakeBatch (wait for commands), Split (expired ones answer DEADLINE_EXCEEDED), Start (connect if
// needed, write), Complete (read, NOSCRIPT retry, WAIT, failures), Answer (every callback once).
// While the thread is parked in TakeBatch, Submit may lend its connection and state to the
// submitting thread (Lend, RunInline), which gives them back when its round trip is done or has
// waited `inline_wait` (then this thread completes it): one owner at a time, handed over under
// the client's mutex.
class RedisClient::IoThread {
 public:
  explicit IoThread(RedisClient& client)
      : client_(client),
        options_(client.options_),
        connection_(client, client.options_, client.functions_refused_) {}

  void Run() {
    // A write to a socket Redis closed must come back as EPIPE, not kill the process.
    sigset_t sigpipe;
    sigemptyset(&sigpipe);
    sigaddset(&sigpipe, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &sigpipe, nullptr);
    bool resume = false;
    while (TakeBatch(&resume)) {
      if (!resume) {
        // The primary changed: nothing more goes to the old one.
        if (connection_.connected() && connection_.Stale()) Drop(ReconnectReason::kFailover);
        if (batch_.empty()) continue;
        Start(/*check_idle=*/true);
      }
      Answer(Complete());
    }
  }

  // Under the client's mutex: whether the thread waits for work with nothing in flight (not
  // lent, no batch handed back).
  bool Idle() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(client_.mu_) {
    return parked_ && !lent_ && !handed_back_;
  }

  // Under the client's mutex: takes this thread's connection for a submitting thread when the
  // thread is parked with a connection that is made, current and not handed back; true when lent
  // (the caller must then call RunInline).
  bool Lend() ABSL_EXCLUSIVE_LOCKS_REQUIRED(client_.mu_) {
    if (!parked_ || lent_ || handed_back_ || !connection_.connected() || connection_.Stale()) {
      return false;
    }
    lent_ = true;
    return true;
  }

  // On the submitting thread, after Lend: runs `pending`'s round trip and answers it here, or,
  // when the reply is not there within inline_wait, hands the written command back to this I/O
  // thread to complete. A connection Redis closed while idle is dropped and the command queued
  // instead (reconnecting is the I/O thread's).
  void RunInline(Pending pending) {
    batch_.clear();
    batch_.push_back(std::move(pending));
    if (connection_.get().PeerClosed()) {
      Drop(ReconnectReason::kPeerClosed);
      Return(/*handed_back=*/false, &batch_);
      return;
    }
    Start(/*check_idle=*/false);
    if (written_) {
      const absl::Time until = std::min(deadline_, absl::Now() + options_.inline_wait);
      const absl::StatusOr<bool> readable = connection_.get().WaitReadable(until);
      if (!readable.ok() || !*readable) {
        Return(/*handed_back=*/true, nullptr);
        return;
      }
    }
    // The callbacks run once the connection is back: one that submits again (a cluster
    // redirect) may then use it, instead of queueing behind its own caller.
    Answers answers = TakeAnswers(Complete());
    Return(/*handed_back=*/false, nullptr);
    Deliver(std::move(answers));
  }

 private:
  struct Answered {
    ReplyCallback done;
    absl::StatusOr<RedisReply> result;
  };
  // One answer in place: an inline round trip (one command) allocates nothing for it.
  using Answers = absl::InlinedVector<Answered, 1>;

  // Gives a lent connection back: `handed_back` when a written batch is left for this thread to
  // complete; `requeue` commands go back to the queue, or, if the client began shutting down
  // meanwhile (its destructor already failed the queue), fail with NotSentError here.
  void Return(bool handed_back, std::vector<Pending>* requeue) {
    std::vector<Pending> refused;
    {
      absl::MutexLock lock(&client_.mu_);
      if (requeue != nullptr) {
        for (Pending& pending : *requeue) {
          if (client_.stopping_) {
            refused.push_back(std::move(pending));
          } else {
            client_.queue_.push_front(std::move(pending));
          }
        }
        requeue->clear();
      }
      handed_back_ = handed_back;
      lent_ = false;
    }
    for (Pending& pending : refused) {
      client_.CountError();
      std::move(pending.done)(NotSentError("redis client shutting down"));
    }
  }

  // Waits for queued commands (or a stale connection to drop, or a batch handed back) and takes
  // up to max_pipeline of them into batch_; `resume` says a handed-back batch is to be completed
  // instead. False once the client is stopping (its destructor fails what is queued).
  bool TakeBatch(bool* resume) {
    absl::MutexLock lock(&client_.mu_);
    // Never touches the connection while it is lent: the borrower owns it then.
    const auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(client_.mu_) {
      return !lent_ && (handed_back_ || client_.stopping_ || !client_.queue_.empty() ||
                        (connection_.connected() && connection_.Stale()));
    };
    parked_ = true;
    while (!client_.mu_.AwaitWithTimeout(absl::Condition(&ready), kIdleCheck)) {
    }
    parked_ = false;
    *resume = handed_back_;
    if (handed_back_) {
      handed_back_ = false;
      return true;
    }
    batch_.clear();
    if (client_.stopping_) return false;
    while (!client_.queue_.empty() && batch_.size() < static_cast<size_t>(options_.max_pipeline)) {
      batch_.push_back(std::move(client_.queue_.front()));
      client_.queue_.pop_front();
    }
    return true;
  }

  // Answers the commands whose deadline already passed (they are never sent) and puts the
  // others' indices in live_ (its room is kept from batch to batch: no allocation per call),
  // with the latest of their deadlines.
  void Split(absl::Time* latest_deadline) {
    results_.assign(batch_.size(), std::nullopt);
    const absl::Time now = absl::Now();
    *latest_deadline = now;
    live_.clear();
    for (size_t i = 0; i < batch_.size(); ++i) {
      if (batch_[i].deadline <= now) {
        results_[i] = absl::DeadlineExceededError("deadline passed before the Redis call was sent");
      } else {
        *latest_deadline = std::max(*latest_deadline, batch_[i].deadline);
        live_.push_back(i);
      }
    }
  }

  // Splits the batch, connects when needed (replacing a connection Redis closed while it sat
  // idle when `check_idle`) and writes the live commands: written_ says they are on the wire;
  // otherwise status_ holds the failure (or OK when nothing was live).
  void Start(bool check_idle) {
    Split(&latest_deadline_);
    written_ = false;
    status_ = absl::OkStatus();
    if (live_.empty()) return;
    const absl::Time now = absl::Now();
    // A connection Redis closed while it sat idle (a restart) is replaced before anything is
    // written to it, instead of failing this batch and opening the fail-fast window.
    if (check_idle && connection_.connected() && connection_.get().PeerClosed()) {
      Drop(ReconnectReason::kPeerClosed);
    }
    // The client's own bound for this step: past it, Redis has failed to connect or answer.
    own_bound_ = now + options_.node.connect_timeout;
    if (!connection_.connected()) {
      // Never wait on a connect past every caller's deadline.
      status_ = connection_.Connect(std::min(latest_deadline_, own_bound_));
      if (!status_.ok()) return;
      options_.failure_log->Transition(status_, connection_.get().address().ToString());
    }
    wait_count_ = client_.WaitCount();
    const absl::Duration round_trip =
        options_.command_timeout + (wait_count_ > 0 ? options_.wait_timeout : absl::ZeroDuration());
    own_bound_ = now + round_trip;
    deadline_ = std::min(latest_deadline_, own_bound_);
    status_ = Write(live_, /*with_body=*/false, &wait_);
    if (!status_.ok()) {
      Drop(ReconnectReason::kIoError);
      return;
    }
    written_ = true;
  }

  // Reads what Start wrote, retries NOSCRIPT, and turns a failure into the status every command
  // left without a result gets. A failure is returned as UNAVAILABLE after opening the fail-fast
  // window (MarkDown).
  absl::Status Complete() {
    absl::Status status = status_;
    if (written_) {
      written_ = false;
      // NOSCRIPT: the script cache was emptied (restart, failover, SCRIPT FLUSH). Retry once,
      // after the pipeline is drained so replies stay in order, with EVAL of the body: it
      // reloads the script into the cache (same SHA) and runs it in one command, so another
      // flush cannot slip between a SCRIPT LOAD and the retry. "Function not found" (FUNCTION
      // FLUSH or DELETE) is retried the same way, and the connection goes on by EVALSHA.
      std::vector<size_t> noscript;
      status = Read(live_, /*with_body=*/false, wait_, &noscript);
      if (status.ok() && !noscript.empty() && connection_.connected()) {
        connection_.StopFcall();
        bool wait = false;
        std::vector<size_t> unused;
        status = Write(noscript, /*with_body=*/true, &wait);
        if (status.ok()) status = Read(noscript, /*with_body=*/true, wait, &unused);
      }
      if (!status.ok()) Drop(ReconnectReason::kIoError);
    }
    if (status.ok()) return status;
    // Every caller of the batch gave up before the client's own bound: their deadlines ran out,
    // Redis has not failed (it may be a round trip slower than a caller's deadline). The
    // connection is dropped (its replies would be out of step) but no fail-fast window opens:
    // one caller's short deadline must not fail everyone else's calls (found by
    // tests/e2e/network_faults_e2e_test.cc). Answer makes these DEADLINE_EXCEEDED.
    if (absl::IsDeadlineExceeded(status) && latest_deadline_ < own_bound_) return status;
    // Redis failed to answer within the round trip's bound: the caller's deadline decides in
    // Answer whether that is DEADLINE_EXCEEDED; otherwise Redis is unavailable.
    if (!absl::IsUnavailable(status)) status = absl::UnavailableError(status.message());
    client_.MarkDown(status);
    return status;
  }

  // Writes the commands `indices` of the batch (EVAL with the body when `with_body`, plus WAIT
  // when one of them writes: `*wait`). A failed write returns its status.
  absl::Status Write(const std::vector<size_t>& indices, bool with_body, bool* wait) {
    *wait = false;
    for (size_t i : indices) {
      connection_.Append(batch_[i].command, with_body);
      *wait = *wait || (wait_count_ > 0 && batch_[i].command.writes);
    }
    if (*wait) {
      connection_.get().Append({"WAIT", absl::StrCat(wait_count_),
                                absl::StrCat(absl::ToInt64Milliseconds(options_.wait_timeout))});
    }
    // The replica count, refreshed at most every replica_check_interval (RedisClientOptions).
    role_ = !with_body && client_.WantsReplicaCount() && client_.RoleDue();
    if (role_) connection_.get().Append({"ROLE"});
    return connection_.get().Flush(deadline_);
  }

  // Reads the replies of what Write wrote into results_. Commands that got NOSCRIPT are left
  // without a result and returned in `noscript`. A failed read returns its status (the commands
  // without a result then fail with it).
  absl::Status Read(const std::vector<size_t>& indices, bool with_body, bool wait,
                    std::vector<size_t>* noscript) {
    bool not_primary = false;
    for (size_t i : indices) {
      std::optional<RedisReply> asking_error;
      if (batch_[i].command.asking) {
        ORDERHOLD_ASSIGN_OR_RETURN(RedisReply asking, connection_.get().Read(deadline_));
        if (asking.type == RedisReply::Type::kError) asking_error = std::move(asking);
      }
      ORDERHOLD_ASSIGN_OR_RETURN(RedisReply reply, connection_.get().Read(deadline_));
      // Without ASKING's effect the command's own answer (a MOVED) would mislead.
      if (asking_error.has_value()) reply = *std::move(asking_error);
      if (reply.type == RedisReply::Type::kError) {
        const RedisErrorKind kind = ClassifyRedisError(reply.str);
        if (kind == RedisErrorKind::kNoScript && batch_[i].command.script >= 0 && !with_body) {
          noscript->push_back(i);
          continue;
        }
        not_primary = not_primary || kind == RedisErrorKind::kNotPrimary;
      }
      results_[i] = ReplyOrError(std::move(reply), options_.cluster_replies);
    }
    if (wait) {
      if (absl::Status waited = ReadWait(indices); !waited.ok()) {
        // WAIT's answer never came (the connection failed, or the round trip's bound passed):
        // the writes ran, but nothing says they reached a replica. They fail with the batch
        // (UNAVAILABLE: outcome unknown), never answered OK: an acknowledged write lost in the
        // failover that follows would be a grant nobody recorded (found by
        // tests/e2e/scope_faults_e2e_test.cc's primary kills).
        for (size_t i : indices) {
          if (batch_[i].command.writes && results_[i].has_value() && results_[i]->ok()) {
            results_[i].reset();
          }
        }
        return waited;
      }
    }
    if (role_) {
      role_ = false;
      ORDERHOLD_ASSIGN_OR_RETURN(RedisReply role, connection_.get().Read(deadline_));
      client_.TakeRole(role, connection_.get().address().ToString());
    }
    if (not_primary) {
      options_.topology->ReportNotPrimary(connection_.get().address());
      Drop(ReconnectReason::kNotPrimary);
    }
    return absl::OkStatus();
  }

  // Reads WAIT's answer: fewer replicas than wait_replicas turn each successful write of
  // `indices` into UNAVAILABLE "not yet replicated" (it ran: the caller's retry finds it done).
  absl::Status ReadWait(const std::vector<size_t>& indices) {
    ORDERHOLD_ASSIGN_OR_RETURN(RedisReply reply, connection_.get().Read(deadline_));
    if (reply.type == RedisReply::Type::kInteger && reply.integer >= wait_count_) {
      return absl::OkStatus();
    }
    const absl::Status unreplicated = NotReplicatedError(absl::StrCat(
        "redis: the write is not yet replicated (WAIT ", wait_count_, " ",
        absl::FormatDuration(options_.wait_timeout), ": ",
        reply.type == RedisReply::Type::kInteger ? absl::StrCat(reply.integer, " acknowledged")
                                                 : reply.str,
        "); retry the same call"));
    for (size_t i : indices) {
      if (batch_[i].command.writes && results_[i].has_value() && results_[i]->ok()) {
        results_[i] = unreplicated;
      }
    }
    return absl::OkStatus();
  }

  // Calls every callback of the batch once: its reply or error; a command left without one gets
  // DEADLINE_EXCEEDED past its deadline, else `failure` (or "no reply").
  void Answer(const absl::Status& failure) { Deliver(TakeAnswers(failure)); }

  // The batch's callbacks with their results (a command left without one gets DEADLINE_EXCEEDED
  // past its deadline, else `failure`, or "no reply"); the batch is emptied.
  Answers TakeAnswers(const absl::Status& failure) {
    Answers answers;
    answers.reserve(batch_.size());
    for (size_t i = 0; i < batch_.size(); ++i) {
      if (!results_[i].has_value()) {
        const bool late = absl::Now() >= batch_[i].deadline;
        results_[i] = late ? absl::DeadlineExceededError("deadline passed before Redis answered")
                           : (failure.ok() ? absl::UnavailableError("redis: no reply") : failure);
      }
      answers.push_back(Answered{std::move(batch_[i].done), std::move(*results_[i])});
    }
    batch_.clear();
    return answers;
  }

  // Calls each callback once, counting the errors.
  void Deliver(Answers answers) {
    for (Answered& answer : answers) {
      if (!answer.result.ok()) client_.CountError();
      std::move(answer.done)(std::move(answer.result));
    }
  }

  void Drop(ReconnectReason reason) {
    connection_.Drop();
    if (options_.on_reconnect) options_.on_reconnect(reason);
  }

  RedisClient& client_;
  const RedisClientOptions& options_;
  // Who owns the state below: this thread, or a submitting thread while lent_.
  bool parked_ ABSL_GUARDED_BY(client_.mu_) = false;       // waiting in TakeBatch
  bool lent_ ABSL_GUARDED_BY(client_.mu_) = false;         // a submitting thread has it
  bool handed_back_ ABSL_GUARDED_BY(client_.mu_) = false;  // a written batch to complete
  Connection connection_;
  std::vector<Pending> batch_;
  std::vector<std::optional<absl::StatusOr<RedisReply>>> results_;
  // The batch under way (Start, Complete): its live commands, their latest deadline, the
  // client's own bound, the round trip's deadline, whether WAIT follows, and the outcome.
  std::vector<size_t> live_;
  int wait_count_ = 0;  // the replicas this batch's WAIT asks for (RedisClient::WaitCount)
  bool role_ = false;   // this batch carries a ROLE (read after WAIT)
  absl::Time latest_deadline_;
  absl::Time own_bound_;
  absl::Time deadline_;
  bool wait_ = false;
  bool written_ = false;
  absl::Status status_;
};

absl::StatusOr<std::unique_ptr<RedisClient>> RedisClient::Create(RedisClientOptions options) {
  if (options.most_replicas == nullptr)
    options.most_replicas = std::make_shared<std::atomic<int>>(0);
  if (options.connections < 1 || options.max_pipeline < 1 || options.max_queue < 1) {
    return absl::InvalidArgumentError(
        "redis client: connections, max_pipeline and max_queue must be >= 1");
  }
  ORDERHOLD_RETURN_IF_ERROR(ValidateNodeOptions(options.node, "redis client"));
  if (options.command_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("redis client: timeouts must be > 0");
  }
  if (options.wait_replicas < RedisClientOptions::kWaitAllReplicas ||
      (options.wait_replicas != 0 && options.wait_timeout <= absl::ZeroDuration())) {
    return absl::InvalidArgumentError(
        "redis client: wait_replicas must be >= 0, with wait_timeout > 0");
  }
  if (options.topology == nullptr) {
    return absl::InvalidArgumentError("redis client: no topology");
  }
  if (options.db < 0) return absl::InvalidArgumentError("redis client: db must be >= 0");
  if (options.failure_log == nullptr) options.failure_log = std::make_shared<RedisFailureLog>();
  if (options.inline_wait < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("redis client: inline_wait must be >= 0");
  }
  if (options.function_library.empty() ? !options.functions.empty()
                                       : options.functions.size() != options.scripts.size()) {
    return absl::InvalidArgumentError(
        "redis client: a function library needs one function name per script, and names a "
        "library");
  }
  std::unique_ptr<RedisClient> client(new RedisClient(std::move(options)));
  for (int i = 0; i < client->options_.connections; ++i) {
    client->io_threads_.push_back(std::make_unique<IoThread>(*client));
  }
  for (const std::unique_ptr<IoThread>& io : client->io_threads_) {
    client->threads_.emplace_back([raw = io.get()] { raw->Run(); });
  }
  return client;
}

RedisClient::RedisClient(RedisClientOptions options) : options_(std::move(options)) {}

RedisClient::~RedisClient() {
  std::deque<Pending> abandoned;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    abandoned.swap(queue_);
  }
  for (Pending& pending : abandoned) {
    std::move(pending.done)(NotSentError("redis client shutting down"));
  }
  for (std::thread& thread : threads_) thread.join();
}

void RedisClient::CountError() {
  if (options_.errors != nullptr) options_.errors->Increment();
}

void RedisClient::Submit(RedisCommand command, absl::Time deadline, ReplyCallback done) {
  absl::Status refusal;
  IoThread* lent = nullptr;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) {
      refusal = NotSentError("redis client shutting down");
    } else if (absl::Now() < down_until_) {
      refusal = down_status_;
    } else if (queue_.size() >= options_.max_queue) {
      refusal = absl::UnavailableError("redis client overloaded: too many queued commands");
    } else {
      // Only a lone call goes inline: with anything in flight the pool is pipelining, and a
      // caller's thread (a gRPC poller) blocked on a round trip would cost throughput (h2load
      // closed loop: 10k instead of 23k calls/s when any idle connection was lent).
      const bool all_idle =
          std::all_of(io_threads_.begin(), io_threads_.end(),
                      [](const std::unique_ptr<IoThread>& io) { return io->Idle(); });
      // A write with WAIT is not run inline: WAIT can take up to wait_timeout when a replica lags,
      // far longer than inline_wait.
      const bool waits = WaitCount() > 0 && command.writes;
      if (command.inline_ok && !waits && options_.inline_wait > absl::ZeroDuration() &&
          queue_.empty() && all_idle) {
        for (const std::unique_ptr<IoThread>& io : io_threads_) {
          if (io->Lend()) {
            lent = io.get();
            break;
          }
        }
      }
      if (lent == nullptr) {
        queue_.push_back(Pending{std::move(command), deadline, std::move(done)});
        return;
      }
    }
  }
  if (lent != nullptr) {
    lent->RunInline(Pending{std::move(command), deadline, std::move(done)});
    return;
  }
  CountError();
  std::move(done)(std::move(refusal));
}

void RedisFailureLog::Transition(const absl::Status& status, absl::string_view node,
                                 absl::string_view recovered) {
  {
    absl::MutexLock lock(&mu_);
    const std::string key = status.ok() ? std::string() : std::string(status.message());
    if (key == logged_) return;
    logged_ = key;
  }
  if (status.ok()) {
    LogInfo(recovered, " ", node);
  } else {
    LogWarning(status.message());
  }
}

void RedisClient::MarkDown(const absl::Status& failure) {
  options_.failure_log->Transition(failure, "");
  std::deque<Pending> failed;
  absl::Status status =
      absl::UnavailableError(absl::StrCat(failure.message(), " (failing fast; next try in ",
                                          absl::FormatDuration(options_.retry_backoff), ")"));
  {
    absl::MutexLock lock(&mu_);
    down_until_ = absl::Now() + options_.retry_backoff;
    down_status_ = status;
    failed.swap(queue_);
  }
  for (Pending& pending : failed) {
    CountError();
    std::move(pending.done)(status);
  }
}

int RedisClient::WaitCount() const {
  if (options_.wait_replicas != RedisClientOptions::kWaitAllReplicas) {
    return options_.wait_replicas;
  }
  return std::max(0, options_.most_replicas->load(std::memory_order_relaxed));
}

bool RedisClient::RoleDue() {
  const int64_t now = absl::GetCurrentTimeNanos();
  int64_t due = next_role_check_ns_.load(std::memory_order_relaxed);
  return now >= due && next_role_check_ns_.compare_exchange_strong(
                           due, now + absl::ToInt64Nanoseconds(options_.replica_check_interval));
}

void RedisClient::TakeRole(const RedisReply& reply, const std::string& primary) {
  // ["master", <offset>, [[ip, port, offset], ...]]: a replica's or an error answer says nothing
  // of the primary's replicas.
  if (reply.type != RedisReply::Type::kArray || reply.elements.size() < 3 ||
      reply.elements[0].str != "master" || reply.elements[2].type != RedisReply::Type::kArray) {
    return;
  }
  const int count = static_cast<int>(reply.elements[2].elements.size());
  int most = options_.most_replicas->load();
  while (count > most && !options_.most_replicas->compare_exchange_weak(most, count)) {
  }
  if (replicas_.exchange(count) != count && options_.on_replicas != nullptr) {
    options_.on_replicas(primary, count);
  }
}

}  // namespace orderhold::redis
