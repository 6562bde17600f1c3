// Fuzzes what a Redis node (or anything answering on its port) sends back: the input is written as
// a byte stream to a real RedisConnection over loopback, which reads replies until the stream ends
// (hiredis' RESP reader, building RedisReply trees through our reply functions,
// redis_connection.cc). Each reply then goes through every parser of replies: error classification
// (redis_reply.h), the cluster slot map (CLUSTER SHARDS and CLUSTER SLOTS) and MOVED/ASK redirects
// (cluster_slots.h), and Sentinel's master address reply and +switch-master message
// (sentinel_topology.h). Any stream must give replies and clean statuses, never crash, leak or
// hang.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "server/redis/cluster_slots.h"
#include "server/redis/redis_connection.h"
#include "server/redis/redis_reply.h"
#include "server/redis/sentinel_topology.h"

namespace orderhold::redis {
namespace {

// A loopback listener the connections reach; accept() gives the end the input is written to.
int Listener(int* port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      listen(fd, 16) != 0 || getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    abort();
  }
  *port = ntohs(address.sin_port);
  return fd;
}

void Parse(const RedisReply& reply) {
  if (reply.type == RedisReply::Type::kError || reply.type == RedisReply::Type::kStatus) {
    (void)ClassifyRedisError(reply.str);
    (void)RedisErrorStatus(reply.str);
    (void)ParseRedirect(reply.str, "10.0.0.1");
  }
  (void)ParseClusterShards(reply, "10.0.0.1", /*tls=*/false);
  (void)ParseClusterShards(reply, "10.0.0.1", /*tls=*/true);
  (void)ParseClusterSlots(reply, "10.0.0.1");
  (void)sentinel_internal::ParseMasterAddrReply(reply, HostPort{"10.0.0.2", 26379});
  (void)sentinel_internal::ParseSwitchMaster(reply, "mymaster");
}

}  // namespace
}  // namespace orderhold::redis

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace orderhold::redis;  // NOLINT: a fuzz entry point
  static int port = 0;
  static const int listener = Listener(&port);
  if (size > 64 * 1024) return 0;  // within one socket buffer: written before reading
  const absl::Time deadline = absl::Now() + absl::Seconds(5);
  auto connection = RedisConnection::Connect(HostPort{"127.0.0.1", port}, nullptr, deadline);
  if (!connection.ok()) abort();
  const int peer = accept(listener, nullptr, nullptr);
  if (peer < 0) abort();
  for (size_t written = 0; written < size;) {
    const ssize_t n = write(peer, data + written, size - written);
    if (n <= 0) abort();
    written += static_cast<size_t>(n);
  }
  close(peer);  // end of stream: the last Read fails UNAVAILABLE
  while (true) {
    auto reply = (*connection)->Read(deadline);
    if (!reply.ok()) break;
    Parse(*reply);
  }
  return 0;
}
