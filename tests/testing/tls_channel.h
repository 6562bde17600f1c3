// A mutual-TLS client channel to a test server, for end-to-end tests that call as one of the
// identities a testing::TlsCerts issued. Header-only: it needs the client's channel factory
// (client/channel.h), which the test binaries link and orderhold_testing does not.
#ifndef ORDERHOLD_TESTS_TESTING_TLS_CHANNEL_H_
#define ORDERHOLD_TESTS_TESTING_TLS_CHANNEL_H_

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "client/channel.h"
#include "grpcpp/channel.h"
#include "grpcpp/support/channel_arguments.h"
#include "gtest/gtest.h"
#include "tests/testing/tls_certs.h"

namespace orderhold::testing {

// A channel to 127.0.0.1:`port` presenting `role`'s certificate of `certs` (TlsCerts::IssueClient),
// trusting `certs`' CA for the name "localhost", with a subchannel of its own (its own connection
// and handshake: grpc.use_local_subchannel_pool), so that two roles never share a connection. A
// channel that cannot be made fails the test (EXPECT) and is null. Thread-compatible.
inline std::shared_ptr<grpc::Channel> TlsChannelAs(const TlsCerts& certs, const std::string& role,
                                                   int port) {
  client::TlsOptions tls;
  tls.ca_file = certs.ca_cert();
  tls.cert_file = certs.cert(role);
  tls.key_file = certs.key(role);
  tls.server_name = "localhost";
  grpc::ChannelArguments args;
  args.SetInt("grpc.use_local_subchannel_pool", 1);
  auto channel = client::NewChannel(absl::StrCat("127.0.0.1:", port), tls, args);
  EXPECT_TRUE(channel.ok()) << channel.status();
  return channel.value_or(nullptr);
}

}  // namespace orderhold::testing

#endif  // ORDERHOLD_TESTS_TESTING_TLS_CHANNEL_H_
