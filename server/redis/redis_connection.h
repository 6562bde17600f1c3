// RedisConnection: one connection to one Redis node over our own socket, plain or TLS (OpenSSL),
// with hiredis kept for what it does well: parsing replies (redisReader). "How to talk to a node";
// which node is the topology's business (redis_topology.h).
//
// Commands are written as RESP arrays of bulk strings (https://redis.io/docs/reference/
// protocol-spec/, "Sending commands to a Redis server") straight into the output buffer, with
// absl's integer formatting for the lengths. hiredis' redisFormatCommandArgv formats each length
// with sprintf into a buffer of its own; with a PlaceHold's 25 arguments, that, the copy of the
// arguments it needed and hiredis' reply objects cost ~27,000 of the server's ~121,000 user-space
// instructions per call (callgrind; tests/bench/README.md "Instructions per call").
//
// Why our own socket: hiredis 0.14 has no TLS, and its blocking context has one socket timeout
// rather than a deadline per call. Here every call takes an absolute deadline and waits with
// poll(2), so no call ever blocks past it.
//
// TLS (rediss://): TLS 1.2+ through OpenSSL; the server's certificate is always verified, against
// --redis_tls_ca_file (or the system's CAs when none is given), for the name
// --redis_tls_server_name, else the host we connected to (an IP literal is checked against the
// certificate's IP SANs). A client certificate is presented when one is configured (Redis'
// `tls-auth-clients yes`). See https://redis.io/docs/management/security/encryption/.
//
// SIGPIPE: writes never raise it (MSG_NOSIGNAL for plain sockets; for TLS the signal is blocked
// and drained around the write, as libcurl does), so a peer that went away is an error, not a
// dead process.
//
// Thread-safety: a RedisConnection is used by one thread at a time; TlsContext (tls_context.h) is
// immutable and shared by all connections.
#ifndef ORDERHOLD_SERVER_REDIS_REDIS_CONNECTION_H_
#define ORDERHOLD_SERVER_REDIS_REDIS_CONNECTION_H_

#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "server/redis/redis_args.h"
#include "server/redis/redis_reply.h"
#include "server/redis/redis_url.h"
#include "server/redis/tls_context.h"

struct ssl_st;  // SSL
struct redisReader;

namespace orderhold::redis {

class RedisConnection {
 public:
  // Resolves `address` (getaddrinfo on every call, so a DNS name that moved during a managed
  // Redis failover is followed), connects, and with `tls` non-null does the TLS handshake and
  // verifies the certificate. Nothing is sent. Errors, all UNAVAILABLE with a message naming the
  // address: resolution failed, refused, the handshake failed ("TLS handshake with h:p failed:
  // certificate verify failed: <OpenSSL's reason> (verified against <trusted()> for <the name>)",
  // or OpenSSL's error with a hint when the port seems to speak plain RESP or the server wants a
  // client certificate); DEADLINE_EXCEEDED when `deadline` passes (when the TLS hello got no
  // answer at all, saying the port may speak plain RESP: a plain Redis never answers one). A
  // server that wants a client certificate it did not get may let a TLS 1.3 handshake succeed and
  // refuse on the first Flush/Read instead: those errors carry the same hint.
  static absl::StatusOr<std::unique_ptr<RedisConnection>> Connect(const HostPort& address,
                                                                  const TlsContext* tls,
                                                                  absl::Time deadline);
  ~RedisConnection();
  RedisConnection(const RedisConnection&) = delete;
  RedisConnection& operator=(const RedisConnection&) = delete;

  // Formats the command `args` (binary-safe: any bytes, empty strings too) into the output
  // buffer; nothing is written yet. `args` must not be empty.
  void Append(absl::Span<const std::string> args);
  // Formats the command `head` followed by a command's packed arguments `tail`
  // (RedisCommand::args) as one command, as Append(head + tail) would: for a prefix such as
  // {"EVALSHA", sha} before a caller's arguments, without copying them.
  void Append(std::initializer_list<absl::string_view> head, const RedisArgs& tail);
  // Writes everything appended. UNAVAILABLE on an I/O error, DEADLINE_EXCEEDED when `deadline`
  // passes first; either way the connection is broken (broken() is true) and must be dropped.
  absl::Status Flush(absl::Time deadline);
  // Reads the next reply; an error reply is a reply (Type::kError), not a status. UNAVAILABLE on
  // EOF, an I/O or protocol error; DEADLINE_EXCEEDED when `deadline` passes. After a failure the
  // connection is broken.
  absl::StatusOr<RedisReply> Read(absl::Time deadline);
  // Read for a connection that waits for what Redis pushes (pub/sub messages): the next reply,
  // or nullopt when none is complete by `deadline`. Unlike Read, a deadline that passes leaves
  // the connection usable (bytes of a partial reply are kept for the next call), so a subscriber
  // can wait in slices and do other work (keepalive, stopping) between them. An already-past
  // deadline only returns what is buffered or can be read without blocking. UNAVAILABLE on EOF,
  // an I/O or protocol error: then the connection is broken.
  absl::StatusOr<std::optional<RedisReply>> TryRead(absl::Time deadline);
  // Append + Flush + Read: one command, one round trip.
  absl::StatusOr<RedisReply> Run(const std::vector<std::string>& args, absl::Time deadline);

  // Waits until a reply may be there to read: true when TLS holds decrypted bytes or the socket
  // turns readable by `deadline` (polled in whole milliseconds, so at least 1 ms unless already
  // readable); false when `deadline` passes first, leaving the connection usable. UNAVAILABLE
  // (broken) if poll fails.
  absl::StatusOr<bool> WaitReadable(absl::Time deadline);
  // True when this idle connection (every reply it was owed has been read) is unusable: the
  // peer closed it (restart, CLIENT KILL, idle timeout) or sent what nobody asked for. Never
  // blocks. TLS records that carry no data (session tickets) do not count.
  bool PeerClosed();
  // True after any failed Flush/Read: the stream is out of step and the connection must go.
  bool broken() const { return broken_; }
  const HostPort& address() const { return address_; }
  // The address the name resolved to and this connection reached, "ip:port" ("[ip]:port" for
  // IPv6); "" if the socket could not say. A managed Redis fails over by moving its DNS name, so
  // two connections to one address() may reach two nodes.
  const std::string& peer() const { return peer_; }
  bool tls() const { return ssl_ != nullptr; }

 private:
  RedisConnection(HostPort address, int fd);
  absl::Status Fail(absl::Status status);
  // Waits until the socket is readable (`want_write` false) or writable: true; false when
  // `deadline` passes first. Never marks the connection broken.
  absl::StatusOr<bool> Poll(bool want_write, absl::Time deadline);
  // Poll, with a deadline that passes being DEADLINE_EXCEEDED and the connection broken.
  absl::Status WaitFor(bool want_write, absl::Time deadline);
  absl::Status Handshake(const TlsContext& tls, absl::Time deadline);
  // Reads what the socket has (>= 1 byte) into the reader: true. UNAVAILABLE on EOF. When
  // `deadline` passes first: DEADLINE_EXCEEDED (broken), or false with `soft_deadline`.
  absl::StatusOr<bool> Fill(absl::Time deadline, bool soft_deadline);
  // The next complete reply in the reader, if any. UNAVAILABLE (broken) on a protocol error.
  absl::StatusOr<std::optional<RedisReply>> Buffered();

  HostPort address_;
  std::string peer_;
  int fd_ = -1;
  ssl_st* ssl_ = nullptr;
  redisReader* reader_ = nullptr;
  std::string out_;
  bool broken_ = false;
  // WaitReadable saw the (plain) socket readable: the next Fill reads without polling first.
  bool readable_ = false;
};

// How to open and log in to a connection to one Redis server (a data node or a sentinel): the one
// shape every connection kind takes (RedisClientOptions::node for the pool,
// ClusterTopologyOptions::node for the slot map's, SentinelOptions::node for the sentinels',
// ShardedSubscriberOptions::node for pub/sub), so credentials, TLS and timeouts are set once.
struct NodeOptions {
  // ACL credentials: `AUTH <user> <password>`, `AUTH <password>` with no user (the default user),
  // no AUTH without a password. A user without a password is INVALID_ARGUMENT.
  std::string user;
  std::string password;
  // A file holding the password instead (--redis_password_file): read at every new connection,
  // so a rotated password (Redis ACL users may hold two during a rotation) is used by the next
  // connection without a restart. One trailing newline ("\n" or "\r\n") is not part of it (an
  // editor's or `kubectl create secret --from-file`'s). Not with `password`.
  std::string password_file;
  // TLS (rediss://) for every connection, or null for plain TCP.
  std::shared_ptr<const TlsContext> tls;
  // CLIENT SETNAME of each connection, so that CLIENT LIST shows who it is (a connection kind may
  // add a suffix: "-topology", "-poll", "-subscription"); empty: none is sent (the app ACL of
  // deploy/redis/orderhold.acl has no +client|setname, and a refused SETNAME leaves an entry in
  // ACL LOG). One word.
  std::string client_name;
  // Bound on connecting, the TLS handshake, AUTH and CLIENT SETNAME (for the topologies' own
  // connections: and on each of their answers). > 0.
  absl::Duration connect_timeout = absl::Milliseconds(500);
};

// The defaults of a topology's own connections (the slot map's, the sentinels'): named "orderhold"
// (plus the kind's suffix) and bounded by 300 ms, a few hundreds of milliseconds as Sentinel's
// client guide asks.
inline NodeOptions TopologyNodeOptions() {
  NodeOptions node;
  node.client_name = "orderhold";
  node.connect_timeout = absl::Milliseconds(300);
  return node;
}

// OK, or INVALID_ARGUMENT "<what>: ..." for a user without a password (or password file), both a
// password and a password file, a connect_timeout <= 0, or a client_name with a space.
absl::Status ValidateNodeOptions(const NodeOptions& options, absl::string_view what);

// The AUTH command for a connection: {"AUTH", user, password}, {"AUTH", password} with no user,
// or empty with no password (no AUTH). Thread-safe.
std::vector<std::string> RedisAuthCommand(const std::string& user, const std::string& password);

// RedisAuthCommand with node.password, or the content of node.password_file read now (see
// NodeOptions). UNAVAILABLE "<what>: password file <path>: cannot read ..." when it cannot be read
// (the connection is not made; the next attempt reads it again). Never quotes the password.
absl::StatusOr<std::vector<std::string>> NodeAuthCommand(const NodeOptions& node,
                                                         absl::string_view what);

// RedisConnection::Connect (with node.tls), then in one round trip AUTH (RedisAuthCommand: skipped
// without a password) and CLIENT SETNAME node.client_name + `name_suffix` (skipped when
// client_name is empty; an error answer to it, such as an ACL without +client|setname, is
// ignored). For the connections that are not a RedisClient's pool (the cluster map's, the
// sentinels', the sharded subscriber's). Errors: Connect's, Flush's and Read's; UNAVAILABLE
// "<what> <address> refused AUTH: <Redis' error line>" (never the credentials) when AUTH is
// answered with an error. Thread-safe.
absl::StatusOr<std::unique_ptr<RedisConnection>> ConnectAuthenticated(const HostPort& address,
                                                                      const NodeOptions& node,
                                                                      absl::string_view name_suffix,
                                                                      absl::string_view what,
                                                                      absl::Time deadline);

}  // namespace orderhold::redis

#endif  // ORDERHOLD_SERVER_REDIS_REDIS_CONNECTION_H_
