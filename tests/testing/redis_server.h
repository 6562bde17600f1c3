// RedisServer: a private, throwaway redis-server for tests.
//
// Each instance runs its own redis-server as a foreground child process, bound to 127.0.0.1 on a
// free port, with its own temporary data directory. Tests therefore never share keys with each
// other or with a Redis the developer happens to run, and never depend on a fixed port. Fault tests
// use Stop()/Restart() (Redis goes away — connects are refused — and comes back on the same port,
// with its data when appendonly is on) and Pause()/Resume() (Redis hangs: connects succeed,
// commands get no answer).
//
//   absl::StatusOr<std::unique_ptr<RedisServer>> redis = RedisServer::Start();
//   ASSERT_TRUE(redis.ok()) << redis.status();
//   store_options.client.endpoint.hosts = {{"127.0.0.1", (*redis)->port()}};
//   config.redis_url = (*redis)->url();                     // "redis://127.0.0.1:41234"
//   EXPECT_EQ((*redis)->Command({"SET", "k", "v"}).value(), "OK");
//   ASSERT_TRUE((*redis)->Stop().ok());                     // now connects are refused
//   ASSERT_TRUE((*redis)->Restart().ok());                  // same port, same dir
//
// Process hygiene. The child gets PR_SET_PDEATHSIG=SIGKILL, so it dies with the test process even
// if that process crashes. Linux ties that signal to the *thread* that forked, so call Start() and
// Restart() from a thread that outlives the server (the test's main thread, normally). The
// destructor SIGKILLs the child, reaps it and deletes the data directory.
//
// Errors (absl codes):
//   NOT_FOUND           no redis-server on PATH nor at /usr/bin/redis-server.
//   UNAVAILABLE         redis-server exited before answering PING (e.g. Restart() found its port
//                       taken), or Command() could not connect / lost the connection.
//   DEADLINE_EXCEEDED   PING did not answer within start_timeout; Command() got no reply within
//                       command_timeout (e.g. while paused); Stop() needed SIGKILL.
//   FAILED_PRECONDITION Pause()/Resume()/Command() while the server is stopped.
//   INVALID_ARGUMENT    Command() with no arguments.
//   INTERNAL            a system call failed; Redis answered Command() with an error reply (the
//                       message is Redis' own, e.g. "WRONGTYPE Operation against a key ...");
//                       redis-server exited with a non-zero status on Stop().
// Messages about the process include the tail of its log (stdout+stderr, kept in the data dir).
//
// Thread-safety: thread-compatible. One instance must not be used from two threads at once without
// external locking (Command() shares one cached hiredis connection). Distinct instances are
// independent. The code under test may of course talk to the server from any number of threads.
#ifndef ORDERHOLD_TESTS_TESTING_REDIS_SERVER_H_
#define ORDERHOLD_TESTS_TESTING_REDIS_SERVER_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

struct redisContext;  // hiredis; kept out of this header.

namespace orderhold::testing {

struct RedisServerOptions {
  // Enable the append-only file (Redis' default appendfsync everysec). Stop() is a graceful
  // shutdown that flushes and fsyncs it, so data written before Stop() is back after Restart().
  // Off (default): no persistence at all (`save ""` too), data dies with the process.
  bool appendonly = false;
  // Extra redis.conf lines, e.g. "maxmemory 1mb\nmaxmemory-policy noeviction". Written to a config
  // file that redis-server reads first; the fixture's own settings (port, bind, dir, save,
  // appendonly, daemonize, protected-mode, loglevel) are command-line arguments and override it.
  // A bad line makes Start() fail with UNAVAILABLE and Redis' message. (The "= {}" keeps GCC 12's
  // -Wmissing-field-initializers quiet for designated initializers like {.appendonly = true}.)
  std::string extra_config = {};
  // How long Start() and Restart() wait for PING to answer PONG (AOF loading included).
  absl::Duration start_timeout = absl::Seconds(5);
  // Send and receive timeout of each Command(). A paused server makes Command() fail after this.
  absl::Duration command_timeout = absl::Seconds(2);
};

class RedisServer {
 public:
  // Starts redis-server on a free 127.0.0.1 port with a fresh data directory (mkdtemp under
  // $TMPDIR, else /tmp) and returns once PING answers PONG. If another process grabs the chosen
  // port between picking and binding, retries with a new port (a few times).
  static absl::StatusOr<std::unique_ptr<RedisServer>> Start(RedisServerOptions opts = {});

  // SIGKILLs the child if it still runs (no graceful shutdown: the data dir goes anyway), reaps it,
  // and removes the data directory recursively.
  ~RedisServer();

  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  // The TCP port on 127.0.0.1; fixed for the lifetime of the object (Restart() reuses it).
  int port() const { return port_; }
  // "redis://127.0.0.1:<port>".
  std::string url() const;
  // The data directory (holds appendonlydir/, redis.conf, redis.log). Removed by the destructor.
  const std::string& data_dir() const { return dir_; }
  // True between a successful Start()/Restart() and Stop() (also while paused).
  bool running() const { return pid_ > 0; }

  // Graceful stop: SIGTERM (Redis 7 then flushes and fsyncs the AOF and exits), waits for the exit
  // (up to 10 s, then SIGKILL and DEADLINE_EXCEEDED), then until connects to the port are refused.
  // Works while paused. Idempotent: OK when already stopped.
  absl::Status Stop();

  // Stop() if running, then starts redis-server again on the same port and data directory and
  // waits for PING. UNAVAILABLE if the port has been taken meanwhile (no other port is tried).
  absl::Status Restart();

  // SIGSTOP: the process is frozen (confirmed via waitpid) — the kernel still completes TCP
  // connects, but nothing is read or answered, like a hung Redis. Idempotent.
  absl::Status Pause();
  // SIGCONT. Commands sent while paused are then processed (they may take effect after their
  // sender gave up). Idempotent.
  absl::Status Resume();

  // Runs one command (redisCommandArgv, binary-safe) on a cached connection, reconnecting after
  // errors, and renders the reply: integer -> decimal, string/status -> text, nil -> "(nil)",
  // array -> elements joined by "\n" (nested arrays flattened, error elements as "(error) msg").
  // An error reply -> INTERNAL with Redis' message. Test helper only: one round trip at a time.
  absl::StatusOr<std::string> Command(const std::vector<std::string>& args);

 private:
  struct ContextDeleter {
    void operator()(redisContext* c) const;
  };

  RedisServer(RedisServerOptions opts, std::string binary, std::string dir);

  // Forks and execs redis-server on port_ (does not wait). Records the log size at launch.
  absl::Status Launch();
  // Polls PING until PONG, the child exits (UNAVAILABLE) or start_timeout passes (kills the child,
  // DEADLINE_EXCEEDED).
  absl::Status WaitUntilReady();
  // Launch() + WaitUntilReady().
  absl::Status LaunchAndWait();
  // SIGKILL + reap; no-op when not running.
  void Kill();
  // Log output written since the last Launch() (its tail).
  std::string LogSinceLaunch() const;
  std::string config_path() const;
  std::string log_path() const;

  RedisServerOptions opts_;
  std::string binary_;
  std::string dir_;
  int port_ = 0;
  pid_t pid_ = -1;
  bool paused_ = false;
  long log_offset_ = 0;  // size of redis.log when the current process was launched
  std::unique_ptr<redisContext, ContextDeleter> conn_;  // Command()'s cached connection
};

}  // namespace orderhold::testing

#endif  // ORDERHOLD_TESTS_TESTING_REDIS_SERVER_H_
