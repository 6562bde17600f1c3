// ServerLimits: the gRPC server settings whose defaults are unsafe for a service that any client
// on the network can reach, and ApplyServerLimits, which sets them (with two fixed ones) on a
// grpc::ServerBuilder. The --grpc_* flags (server/config.h) fill them.
//
// What gRPC 1.51 does by default, and why each is bounded here (channel arguments:
// grpc/impl/codegen/grpc_types.h; keepalive: https://grpc.io/docs/guides/keepalive/ and gRFC A8
// "Client-side Keepalive", A9 "Server-side Connection Management"):
//   - HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS is unlimited: one connection can open any number of
//     calls at once. Bounded per connection; a client that wants more queues them (gRPC clients
//     do) or opens another connection.
//   - Messages up to 4 MiB are read whole before anything can refuse them. OrderHold's largest
//     valid request is an AckHoldEvents of 10,000 event ids (~300 KB); 1 MiB by default. A larger
//     message is answered RESOURCE_EXHAUSTED by gRPC itself.
//   - The server never pings an idle connection, so the connection of a client that vanished
//     without closing it (a crashed host, a dropped NAT mapping) lives until TCP gives up, about
//     15 minutes later: with a watch on it, that watch keeps its slot of --max_watches. The server
//     pings after keepalive_time of silence and drops the connection when no answer comes within
//     keepalive_timeout.
//   - A client's keepalive pings more often than every 5 minutes, or without calls in flight, get
//     the connection closed (GOAWAY "too_many_pings"): a client with the common 30-60 s keepalive
//     is cut off. Fixed here: pings every 10 s or more are welcome, with or without calls.
//   - Connections live forever: behind an L4 load balancer, clients stay on the replicas they
//     first reached, and a new replica gets no traffic. max_connection_age sends GOAWAY after that
//     age (plus up to 10% jitter, by gRPC) so clients reconnect and rebalance; calls in flight
//     finish, within max_connection_age_grace: gRPC's default grace is unbounded, so a
//     WatchHoldEvents stream kept a connection, its TLS session and its client certificate (maybe
//     revoked or expired since) for ever; past the grace the connection is closed and the
//     consumer reconnects through a new handshake. max_connection_idle closes
//     connections with no call for that long.
// Thread-safe: plain values.
#ifndef ORDERHOLD_SERVER_GRPC_SERVER_LIMITS_H_
#define ORDERHOLD_SERVER_GRPC_SERVER_LIMITS_H_

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "grpcpp/server_builder.h"

namespace orderhold::grpc_api {

struct ServerLimits {
  int max_concurrent_streams = 1000;                  // calls open at once on one connection, >= 1
  int max_receive_message_bytes = 1 << 20;            // largest request message, bytes
  absl::Duration keepalive_time = absl::Seconds(60);  // silence before the server pings
  absl::Duration keepalive_timeout = absl::Seconds(20);    // wait for the ping's answer
  absl::Duration max_connection_idle = absl::Minutes(15);  // ZeroDuration: never closed for that
  absl::Duration max_connection_age = absl::Minutes(30);   // ZeroDuration: no age limit
  // After max_connection_age's GOAWAY, calls still open this long are cut (the connection
  // closes). ZeroDuration: no limit (gRPC's default; not advised). Only with max_connection_age.
  absl::Duration max_connection_age_grace = absl::Minutes(5);
  // gRPC's resource quota (grpc::ResourceQuota): the memory gRPC itself may use for the server's
  // connections and calls (buffers, frames), bytes; past it gRPC refuses new work rather than
  // growing. 0: none (gRPC's default).
  int64_t memory_quota_bytes = int64_t{256} << 20;
};

// The bounds of the settings (the flags' ranges).
inline constexpr int kMaxConcurrentStreamsLimit = 1000000;
inline constexpr int kMinReceiveMessageBytes = 64 * 1024;
inline constexpr int kMaxReceiveMessageBytes = 64 * 1024 * 1024;
// The fixed part: a client may ping this often, with or without calls in flight.
inline constexpr absl::Duration kMinClientPingInterval = absl::Seconds(10);
// Smallest --grpc_memory_quota other than 0: below it gRPC cannot serve a handful of calls.
inline constexpr int64_t kMinMemoryQuotaBytes = int64_t{16} << 20;

// INVALID_ARGUMENT naming the flag (grpc_max_concurrent_streams, ...) when a setting is out of
// its range: streams 1-kMaxConcurrentStreamsLimit, message size kMinReceiveMessageBytes-
// kMaxReceiveMessageBytes, keepalive time and timeout >= 1 s, idle and age 0 or >= 1 s.
absl::Status ValidateServerLimits(const ServerLimits& limits);

// Sets `limits` and the fixed client-ping policy on `builder` (channel arguments and
// SetMaxReceiveMessageSize). Call before BuildAndStart.
void ApplyServerLimits(const ServerLimits& limits, grpc::ServerBuilder& builder);

}  // namespace orderhold::grpc_api

#endif  // ORDERHOLD_SERVER_GRPC_SERVER_LIMITS_H_
