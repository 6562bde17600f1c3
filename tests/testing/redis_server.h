// RedisServer: a private, throwaway redis-server for tests.
//
// Each instance runs its own redis-server as a foreground child process, bound to 127.0.0.1 (or
// RedisServerOptions::host) on a free port, with its own temporary data directory. Tests therefore
// never share keys with each other or with a Redis the developer happens to run, and never depend
// on a fixed port. Fault tests use Stop()/Restart() (Redis goes away — connects are refused — and
// comes back on the same port, with its data when appendonly is on) and Pause()/Resume() (Redis
// hangs: connects succeed, commands get no answer).
//
//   absl::StatusOr<std::unique_ptr<RedisServer>> redis = RedisServer::Start();
//   ASSERT_TRUE(redis.ok()) << redis.status();
//   store_options.client.topology =
//   std::make_shared<redis::StandaloneTopology>(redis::HostPort{"127.0.0.1", (*redis)->port()});
//   config.redis_url = ParsedRedisUrl((*redis)->url());     // "redis://127.0.0.1:41234"
//   EXPECT_EQ((*redis)->Command({"SET", "k", "v"}).value(), "OK");
//   ASSERT_TRUE((*redis)->Stop().ok());                     // now connects are refused
//   ASSERT_TRUE((*redis)->Restart().ok());                  // same port, same dir
//
// Topologies. Options turn on what replication, Sentinel and TLS tests need: an admin password
// (requirepass + masterauth; the fixture's own PING/Command() AUTH with it), ACL users for the code
// under test, `replicaof`, TLS on a second port, and a Sentinel flavour (`sentinel = true`).
// SentinelGroup (sentinel_group.h) builds a primary, replicas and three sentinels from them;
// RedisCluster (redis_cluster.h) builds a Redis Cluster from `cluster` nodes; TlsCerts
// (tls_certs.h) makes the certificates for `tls`. Crash() is a SIGKILL that keeps the data
// directory, so Restart() brings the node back from its AOF as after a real crash.
//
//   RedisServerOptions o{.appendonly = true, .admin_password = "adminpw",
//                        .acl_users = {"orderhold on >ohpw ~orderhold:* &* +@all"}};
//   o.tls = RedisTlsOptions{.cert_file = certs->server_cert(), .key_file = certs->server_key(),
//                           .ca_cert_file = certs->ca_cert()};
//   auto redis = RedisServer::Start(o);
//   config.redis_url = ParsedRedisUrl(
//       "rediss://orderhold:ohpw@127.0.0.1:" + std::to_string((*redis)->tls_port()));
//
// Config files. The options above are written to `redis.conf` in the data directory once, at
// Start(), after `extra_config` (a later line wins). Redis may rewrite that file (Sentinel sends
// CONFIG REWRITE with every REPLICAOF it orders), and Restart() reads it again, so a node that
// Sentinel re-pointed restarts as Sentinel left it, as a real deployment would.
//
// Process hygiene. The child gets PR_SET_PDEATHSIG=SIGKILL, so it dies with the test process even
// if that process crashes. Linux ties that signal to the *thread* that forked, so call Start() and
// Restart() from a thread that outlives the server (the test's main thread, normally). The
// destructor SIGKILLs the child, reaps it and deletes the data directory.
//
// Errors (absl codes):
//   NOT_FOUND           no redis-server on PATH nor at /usr/bin/redis-server.
//   INVALID_ARGUMENT    Start() with a malformed `replicaof`, an empty TLS file name or a bad
//                       `tls.auth_clients`.
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
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

struct redisContext;  // hiredis; kept out of this header.

namespace orderhold::testing {

// TLS for RedisServerOptions::tls (Redis' tls-* settings; see
// https://redis.io/docs/management/security/encryption/). All paths are PEM files, e.g. from
// TlsCerts (tls_certs.h).
struct RedisTlsOptions {
  // tls-cert-file / tls-key-file: the server's certificate and key. Redis also presents them as its
  // client certificate when it connects out over TLS (tls-replication).
  std::string cert_file;
  std::string key_file;
  // tls-ca-cert-file: the CA that client certificates (tls-auth-clients) and, for a replica with
  // `replication`, the primary's certificate must chain to.
  std::string ca_cert_file;
  // tls-auth-clients: "yes" (a client certificate is required: mutual TLS), "no" (none asked), or
  // "optional" (verified when given). The default is "no", unlike Redis' own default "yes".
  std::string auth_clients = "no";
  // tls-replication yes: a replica connects to its primary over TLS, so its `replicaof` must name
  // the primary's tls_port(); a Sentinel then talks TLS to the instances it monitors. Off: plain.
  bool replication = false;
};

struct RedisServerOptions {
  // The loopback address Redis binds (`bind`), an IPv4 literal: any of 127.0.0.0/8 on Linux, so
  // two servers can share one port on two addresses, as two hosts behind one DNS name would.
  std::string host = "127.0.0.1";
  // The port; 0 (default): a free one picked at Start(). A fixed port that is taken fails Start()
  // with UNAVAILABLE ("Address already in use"); no other port is tried.
  int port = 0;
  // Enable the append-only file (Redis' default appendfsync everysec). Stop() is a graceful
  // shutdown that flushes and fsyncs it, so data written before Stop() is back after Restart().
  // Off (default): no persistence at all (`save ""` too), data dies with the process.
  bool appendonly = false;
  // Extra redis.conf lines, e.g. "maxmemory 1mb\nmaxmemory-policy noeviction". Written to a config
  // file that redis-server reads first (after the fixture's one default for data nodes,
  // `repl-diskless-sync-delay 0`, which saves a replica's first sync Redis' 5 s wait); the
  // fixture's own settings (port, bind, dir, save, appendonly, daemonize, protected-mode, loglevel)
  // are command-line arguments and override it. A bad line makes Start() fail with UNAVAILABLE and
  // Redis' message. (The "= {}" keeps GCC 12's -Wmissing-field-initializers quiet for designated
  // initializers like {.appendonly = true}.)
  std::string extra_config = {};
  // How long Start() and Restart() wait for PING to answer PONG (AOF loading included).
  absl::Duration start_timeout = absl::Seconds(5);
  // Send and receive timeout of each Command(). A paused server makes Command() fail after this.
  absl::Duration command_timeout = absl::Seconds(2);

  // requirepass and masterauth: the `default` user needs this password, and a replica uses it to
  // authenticate to its primary. The fixture's own PING and Command() AUTH with it. Empty
  // (default): no password, as before.
  std::string admin_password = {};
  // ACL users for the code under test, one rule list per user without the leading "user", e.g.
  // "orderhold on >ohpw ~orderhold:* &* +@all". Written as `user ...` lines to the config file
  // (redis-server's --user on the command line would need each rule as its own argument).
  std::vector<std::string> acl_users = {};
  // "host:port" of the primary to replicate (`replicaof host port` in the config file, so a
  // REPLICAOF that Sentinel orders later survives Restart()). Empty: a primary.
  std::string replicaof = {};
  // When set, Redis also listens for TLS on tls_port(), a second free port. The plain port() stays
  // open and is what the fixture itself uses (hiredis 0.14 has no TLS); point the code under test
  // at tls_port().
  std::optional<RedisTlsOptions> tls = {};
  // Run as Redis Sentinel (`redis-server <conf> --sentinel`) instead of a data node.
  // `extra_config` then holds the `sentinel ...` directives; `admin_password` becomes the
  // sentinel's requirepass (clients and the other sentinels AUTH with it); `acl_users` are the
  // sentinel's own users; `appendonly` and `replicaof` are ignored. The config file must stay
  // writable: Sentinel rewrites it. Prefer SentinelGroup, which sets all of this up.
  bool sentinel = false;
  // Run as a Redis Cluster node: `cluster-enabled yes` and `cluster-config-file nodes.conf` (in
  // the data directory, so Restart() comes back with the node's id, epochs and peers), with the
  // cluster bus on cluster_port(), a second free port (`--cluster-port`; Redis' default, port +
  // 10000, may be taken). Other cluster settings (cluster-node-timeout, ...) go in extra_config.
  // The node starts alone, owning no slot: RedisCluster (redis_cluster.h) forms the cluster.
  bool cluster = false;
};

class RedisServer {
 public:
  // Starts redis-server on a free port of RedisServerOptions::host (or its fixed port) with a fresh
  // data directory (mkdtemp under $TMPDIR, else /tmp) and returns once PING answers PONG. If
  // another process grabs the chosen port between picking and binding, retries with a new port (a
  // few times).
  static absl::StatusOr<std::unique_ptr<RedisServer>> Start(RedisServerOptions opts = {});

  // SIGKILLs the child if it still runs (no graceful shutdown: the data dir goes anyway), reaps it,
  // and removes the data directory recursively.
  ~RedisServer();

  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  // The TCP port on host(); fixed for the lifetime of the object (Restart() reuses it).
  int port() const { return port_; }
  // The TLS port on host() when RedisServerOptions::tls is set, else 0. Fixed like port().
  int tls_port() const { return tls_port_; }
  // The cluster bus port on host() when RedisServerOptions::cluster is set, else 0. Fixed like
  // port().
  int cluster_port() const { return cluster_port_; }
  // RedisServerOptions::host, where every port of this server listens.
  const std::string& host() const { return opts_.host; }
  // "redis://<host>:<port>" (no credentials).
  std::string url() const;
  // "rediss://<host>:<tls_port>" (no credentials), or "" without TLS. TlsCerts' server
  // certificate names both IP:127.0.0.1 and DNS:localhost; a client that checks only DNS names
  // needs its server name set to "localhost".
  std::string tls_url() const;
  // The redis-server process id while running, else -1 (for tests that signal it themselves;
  // prefer Pause()/Crash()).
  pid_t pid() const { return pid_; }
  // The data directory (holds appendonlydir/, redis.conf, redis.log). Removed by the destructor.
  const std::string& data_dir() const { return dir_; }
  // True between a successful Start()/Restart() and Stop() (also while paused).
  bool running() const { return pid_ > 0; }
  // True between Pause() and Resume() (or Stop()/Crash()): Command() would time out.
  bool paused() const { return paused_; }

  // Graceful stop: SIGTERM (Redis 7 then flushes and fsyncs the AOF and exits), waits for the exit
  // (up to 10 s, then SIGKILL and DEADLINE_EXCEEDED), then until connects to the port are refused.
  // Works while paused. Idempotent: OK when already stopped.
  absl::Status Stop();

  // Stop() if running, then starts redis-server again on the same port(s) and data directory and
  // waits for PING. UNAVAILABLE if a port has been taken meanwhile (no other port is tried).
  absl::Status Restart();

  // SIGKILL, as a crash or `kill -9`: no shutdown and no final fsync, but the data directory
  // stays; returns once the process is reaped and connects to its port(s) are refused. Restart()
  // then brings it back from its AOF, which holds every write Redis answered (Redis writes the AOF
  // before replying; the everysec fsync matters only when the machine itself crashes). Works while
  // paused. Idempotent: OK when already stopped.
  absl::Status Crash();

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
  // With admin_password set, the connection AUTHs with it first.
  absl::StatusOr<std::string> Command(const std::vector<std::string>& args);

  // Every key of the data set and the SHA-1 of its DUMP, sorted ("key=sha1 ..."), leaving out keys
  // holding ":replicas" or ":lease" (the reaper's heartbeat and leases, rewritten every tick): two
  // equal digests mean the calls between them changed no data.
  absl::StatusOr<std::string> DataDigest();

  // Like Command() but on a fresh connection that first sends `AUTH user password` (`AUTH
  // password` when `user` is empty; no AUTH when both are), then is closed. For checking what an
  // ACL user may do. A rejected AUTH is INTERNAL with Redis' message ("WRONGPASS ...").
  absl::StatusOr<std::string> CommandAs(absl::string_view user, absl::string_view password,
                                        const std::vector<std::string>& args);

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
  // After the process is gone: polls until connects to port_ (and tls_port_, cluster_port_) are
  // refused.
  absl::Status WaitPortsClosed();
  // Log output written since the last Launch() (its tail).
  std::string LogSinceLaunch() const;
  std::string config_path() const;
  std::string log_path() const;

  RedisServerOptions opts_;
  std::string binary_;
  std::string dir_;
  int port_ = 0;
  int tls_port_ = 0;      // 0: no TLS
  int cluster_port_ = 0;  // 0: not a cluster node
  pid_t pid_ = -1;
  bool paused_ = false;
  long log_offset_ = 0;  // size of redis.log when the current process was launched
  std::unique_ptr<redisContext, ContextDeleter> conn_;  // Command()'s cached connection
};

}  // namespace orderhold::testing

#endif  // ORDERHOLD_TESTS_TESTING_REDIS_SERVER_H_
