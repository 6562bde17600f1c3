// The --tls, --tls_ca_file, --tls_cert_file, --tls_key_file and --tls_server_name flags, defined
// once here for orderhold-cli and orderhold-bench (both link this file), and read into a
// TlsOptions (client/channel.h).
#ifndef ORDERHOLD_CLIENT_TLS_FLAGS_H_
#define ORDERHOLD_CLIENT_TLS_FLAGS_H_

#include "absl/status/statusor.h"
#include "client/channel.h"

namespace orderhold::client {

// The TlsOptions the (parsed) --tls* flags give; any file or --tls_server_name implies --tls.
// INVALID_ARGUMENT naming the flag when only one of --tls_cert_file and --tls_key_file is given.
// Reads no file (NewChannel does). Call after absl::ParseCommandLine.
absl::StatusOr<TlsOptions> TlsOptionsFromFlags();

// The source file that defines the flags, for absl::FlagsUsageConfig::contains_help_flags (a
// binary's --help lists only the files it names).
inline constexpr char kTlsFlagsFile[] = "client/tls_flags.cc";

}  // namespace orderhold::client

#endif  // ORDERHOLD_CLIENT_TLS_FLAGS_H_
