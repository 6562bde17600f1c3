#include "server/store/redis_client.h"

#include <hiredis/hiredis.h>
#include <poll.h>
#include <pthread.h>

#include <algorithm>
#include <csignal>
#include <optional>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/common/status_macros.h"

namespace orderhold::store {
namespace {

struct ContextDeleter {
  void operator()(redisContext* context) const { redisFree(context); }
};
struct ReplyDeleter {
  void operator()(redisReply* reply) const { freeReplyObject(reply); }
};
using ContextPtr = std::unique_ptr<redisContext, ContextDeleter>;
using ReplyPtr = std::unique_ptr<redisReply, ReplyDeleter>;

RedisReply Convert(const redisReply& reply) {
  RedisReply out;
  switch (reply.type) {
    case REDIS_REPLY_INTEGER:
      out.type = RedisReply::Type::kInteger;
      out.integer = reply.integer;
      break;
    case REDIS_REPLY_STRING:
      out.type = RedisReply::Type::kString;
      out.str.assign(reply.str, reply.len);
      break;
    case REDIS_REPLY_STATUS:
      out.type = RedisReply::Type::kStatus;
      out.str.assign(reply.str, reply.len);
      break;
    case REDIS_REPLY_ARRAY:
      out.type = RedisReply::Type::kArray;
      out.elements.reserve(reply.elements);
      for (size_t i = 0; i < reply.elements; ++i)
        out.elements.push_back(Convert(*reply.element[i]));
      break;
    default:
      out.type = RedisReply::Type::kNil;
  }
  return out;
}

// The ONE place where Redis failures become statuses. UNAVAILABLE for all of them: whatever Redis
// answered (LOADING, READONLY after a failover, OOM, BUSY, a script error), this request was not
// served and the caller may retry elsewhere or later; INTERNAL would suggest a bug of ours.
absl::Status ErrorReplyStatus(const redisReply& reply) {
  return absl::UnavailableError(absl::StrCat("redis: ", absl::string_view(reply.str, reply.len)));
}

absl::Status IoErrorStatus(const redisContext* context, absl::string_view what) {
  if (context == nullptr) return absl::UnavailableError(absl::StrCat("redis: ", what, " failed"));
  return absl::UnavailableError(absl::StrCat("redis: ", what, ": ", context->errstr));
}

}  // namespace

// One hiredis context and the SHAs of the scripts loaded on it. Used by one I/O thread only.
class RedisClient::Connection {
 public:
  explicit Connection(const RedisClientOptions& options) : options_(options) {}

  bool connected() const { return context_ != nullptr; }
  void Drop() { context_.reset(); }

  // True when the socket of this idle connection (every reply it was owed has been read) is
  // readable: Redis closed it (restart, CLIENT KILL, idle timeout) or sent what nobody asked for.
  // Either way the connection is unusable, and since nothing has been written yet, replacing it
  // before the next batch is safe. It cannot catch a close that happens after this check; a
  // batch written into that gets an I/O error and fails, as before, because its outcome is
  // unknown.
  bool PeerClosed() const {
    pollfd fd{context_->fd, POLLIN, 0};
    return poll(&fd, 1, /*timeout=*/0) != 0;  // readable, hung up, or poll itself failed
  }

  // Connects, authenticates, selects the database and loads every script, within `timeout`
  // per step.
  absl::Status Connect(absl::Duration timeout) {
    context_.reset();
    const RedisEndpoint& endpoint = options_.endpoint;
    ContextPtr context(redisConnectWithTimeout(endpoint.hosts.front().host.c_str(),
                                               endpoint.hosts.front().port,
                                               absl::ToTimeval(timeout)));
    if (context == nullptr || context->err) {
      return IoErrorStatus(context.get(),
                           absl::StrCat("connect to ", endpoint.hosts.front().ToString()));
    }
    context_ = std::move(context);
    SetTimeout(timeout);
    absl::Status status = Setup();
    if (!status.ok()) context_.reset();
    return status;
  }

  void SetTimeout(absl::Duration timeout) {
    redisSetTimeout(context_.get(), absl::ToTimeval(timeout));
  }

  // Runs one command synchronously. Error replies become statuses; an I/O error drops the
  // connection.
  absl::StatusOr<RedisReply> Run(const std::vector<std::string>& args) {
    ORDERHOLD_RETURN_IF_ERROR(Append(args));
    return Read();
  }

  absl::Status Append(const std::vector<std::string>& args) {
    std::vector<const char*> argv;
    std::vector<size_t> lengths;
    argv.reserve(args.size());
    lengths.reserve(args.size());
    for (const std::string& arg : args) {
      argv.push_back(arg.data());
      lengths.push_back(arg.size());
    }
    if (redisAppendCommandArgv(context_.get(), static_cast<int>(argv.size()), argv.data(),
                               lengths.data()) != REDIS_OK) {
      absl::Status status = IoErrorStatus(context_.get(), "write");
      Drop();
      return status;
    }
    return absl::OkStatus();
  }

  // EVALSHA for script commands (EVAL with the body when `with_body`), the command itself
  // otherwise.
  absl::Status Append(const RedisCommand& command, bool with_body = false) {
    if (command.script < 0) return Append(command.args);
    std::vector<std::string> args;
    args.reserve(command.args.size() + 2);
    args.push_back(with_body ? "EVAL" : "EVALSHA");
    args.push_back(with_body ? options_.scripts[command.script] : shas_[command.script]);
    args.insert(args.end(), command.args.begin(), command.args.end());
    return Append(args);
  }

  // Reads the next reply. UNAVAILABLE for an error reply (connection kept) or an I/O error
  // (connection dropped). `is_noscript` is set for a NOSCRIPT error reply.
  absl::StatusOr<RedisReply> Read(bool* is_noscript = nullptr) {
    if (!connected()) return absl::UnavailableError("redis: connection lost");
    void* raw = nullptr;
    if (redisGetReply(context_.get(), &raw) != REDIS_OK || raw == nullptr) {
      absl::Status status = IoErrorStatus(context_.get(), "read");
      Drop();
      return status;
    }
    ReplyPtr reply(static_cast<redisReply*>(raw));
    if (reply->type == REDIS_REPLY_ERROR) {
      if (is_noscript != nullptr) {
        *is_noscript = absl::StartsWith(absl::string_view(reply->str, reply->len), "NOSCRIPT");
      }
      return ErrorReplyStatus(*reply);
    }
    return Convert(*reply);
  }

  // SCRIPT LOAD of one script: records its SHA.
  absl::Status LoadScript(int script) {
    const std::vector<std::string> load = {"SCRIPT", "LOAD", options_.scripts[script]};
    ORDERHOLD_ASSIGN_OR_RETURN(RedisReply sha, Run(load));
    shas_[script] = std::move(sha.str);
    return absl::OkStatus();
  }

 private:
  absl::Status Setup() {
    const RedisEndpoint& endpoint = options_.endpoint;
    if (!endpoint.password.empty()) {
      std::vector<std::string> auth = {"AUTH"};
      if (!endpoint.user.empty()) auth.push_back(endpoint.user);
      auth.push_back(endpoint.password);
      ORDERHOLD_RETURN_IF_ERROR(Run(auth).status());
    }
    if (endpoint.db != 0) {
      const std::vector<std::string> select = {"SELECT", absl::StrCat(endpoint.db)};
      ORDERHOLD_RETURN_IF_ERROR(Run(select).status());
    }
    shas_.resize(options_.scripts.size());
    for (size_t i = 0; i < options_.scripts.size(); ++i) {
      ORDERHOLD_RETURN_IF_ERROR(LoadScript(static_cast<int>(i)));
    }
    return absl::OkStatus();
  }

  const RedisClientOptions& options_;
  ContextPtr context_;
  std::vector<std::string> shas_;
};

absl::StatusOr<std::unique_ptr<RedisClient>> RedisClient::Create(RedisClientOptions options) {
  if (options.connections < 1 || options.max_pipeline < 1 || options.max_queue < 1) {
    return absl::InvalidArgumentError(
        "redis client: connections, max_pipeline and max_queue must be >= 1");
  }
  if (options.command_timeout <= absl::ZeroDuration() ||
      options.connect_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("redis client: timeouts must be > 0");
  }
  std::unique_ptr<RedisClient> client(new RedisClient(std::move(options)));
  for (int i = 0; i < client->options_.connections; ++i) {
    client->threads_.emplace_back([raw = client.get()] { raw->IoLoop(); });
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
    std::move(pending.done)(absl::UnavailableError("redis client shutting down"));
  }
  for (std::thread& thread : threads_) thread.join();
}

void RedisClient::CountError() {
  if (options_.errors != nullptr) options_.errors->Increment();
}

void RedisClient::Submit(RedisCommand command, absl::Time deadline, ReplyCallback done) {
  absl::Status refusal;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) {
      refusal = absl::UnavailableError("redis client shutting down");
    } else if (absl::Now() < down_until_) {
      refusal = down_status_;
    } else if (queue_.size() >= options_.max_queue) {
      refusal = absl::UnavailableError("redis client overloaded: too many queued commands");
    } else {
      queue_.push_back(Pending{std::move(command), deadline, std::move(done)});
      return;
    }
  }
  CountError();
  std::move(done)(std::move(refusal));
}

void RedisClient::MarkDown(const absl::Status& failure) {
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

void RedisClient::IoLoop() {
  // A write to a socket Redis closed must come back as EPIPE, not kill the process.
  sigset_t sigpipe;
  sigemptyset(&sigpipe);
  sigaddset(&sigpipe, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &sigpipe, nullptr);

  Connection connection(options_);
  std::vector<Pending> batch;
  std::vector<std::optional<absl::StatusOr<RedisReply>>> results;
  std::vector<size_t> noscript;
  while (true) {
    batch.clear();
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](RedisClient* self) ABSL_EXCLUSIVE_LOCKS_REQUIRED(self->mu_) {
            return self->stopping_ || !self->queue_.empty();
          },
          this));
      if (stopping_) return;  // the destructor fails what is queued
      while (!queue_.empty() && batch.size() < static_cast<size_t>(options_.max_pipeline)) {
        batch.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
    }

    results.assign(batch.size(), std::nullopt);
    const absl::Time now = absl::Now();
    absl::Time latest_deadline = now;
    for (size_t i = 0; i < batch.size(); ++i) {
      if (batch[i].deadline <= now) {
        results[i] = absl::DeadlineExceededError("deadline passed before the Redis call was sent");
      } else {
        latest_deadline = std::max(latest_deadline, batch[i].deadline);
      }
    }
    absl::Status connection_status = absl::OkStatus();
    // A connection Redis closed while it sat idle (a restart) is replaced before anything is
    // written to it, instead of failing this batch and opening the fail-fast window.
    if (connection.connected() && connection.PeerClosed()) connection.Drop();
    if (latest_deadline > now && !connection.connected()) {
      // Never wait on a connect past every caller's deadline.
      connection_status = connection.Connect(
          std::clamp(latest_deadline - now, absl::Milliseconds(1), options_.connect_timeout));
    }

    // Write every live command, then read every reply: one round trip for the batch.
    std::vector<size_t> sent;
    if (connection_status.ok() && latest_deadline > now) {
      connection.SetTimeout(
          std::clamp(latest_deadline - now, absl::Milliseconds(1), options_.command_timeout));
      for (size_t i = 0; i < batch.size() && connection_status.ok(); ++i) {
        if (results[i].has_value()) continue;
        connection_status = connection.Append(batch[i].command);
        if (connection_status.ok()) sent.push_back(i);
      }
    }
    noscript.clear();
    for (size_t i : sent) {
      bool is_noscript = false;
      absl::StatusOr<RedisReply> reply = connection.Read(&is_noscript);
      if (!connection.connected()) {  // I/O error or timeout: the rest of the batch is lost
        connection_status = reply.status();
        break;
      }
      if (is_noscript && batch[i].command.script >= 0) noscript.push_back(i);
      results[i] = std::move(reply);
    }
    // NOSCRIPT: the script cache was emptied (restart, failover, SCRIPT FLUSH). Retry once, after
    // the pipeline is drained so replies stay in order, with EVAL of the body: it reloads the
    // script into the cache (same SHA) and runs it in one command, so another flush cannot slip
    // between a SCRIPT LOAD and the retry.
    std::vector<size_t> retried;
    for (size_t i : noscript) {
      results[i].reset();  // unless the retry answers, the final loop reports the failure
      if (!connection.connected() || !connection.Append(batch[i].command, true).ok()) continue;
      retried.push_back(i);
    }
    for (size_t i : retried) {
      absl::StatusOr<RedisReply> reply = connection.Read();
      if (!connection.connected()) {
        connection_status = reply.status();
        break;
      }
      results[i] = std::move(reply);
    }
    if (!connection_status.ok() || (!sent.empty() && !connection.connected())) {
      MarkDown(connection_status.ok() ? absl::UnavailableError("redis: connection lost")
                                      : connection_status);
    }
    for (size_t i = 0; i < batch.size(); ++i) {
      if (!results[i].has_value()) {
        const bool late = absl::Now() >= batch[i].deadline;
        results[i] = late ? absl::DeadlineExceededError("deadline passed before Redis answered")
                          : (connection_status.ok() ? absl::UnavailableError("redis: no reply")
                                                    : connection_status);
      }
      if (!results[i]->ok()) CountError();
      std::move(batch[i].done)(std::move(*results[i]));
    }
  }
}

}  // namespace orderhold::store
