// The operating-system chores of the test fixtures: finding and running external programs
// (redis-server, openssl, redis-cli) and private temporary directories.
#ifndef ORDERHOLD_TESTS_TESTING_OS_UTIL_H_
#define ORDERHOLD_TESTS_TESTING_OS_UTIL_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace orderhold::testing {

// The absolute path of the executable `name` (a path, holding a /, as it is): the first directory
// of $PATH that has it, else /usr/bin/<name>. NOT_FOUND naming the Debian package to install
// (`apt_package`) otherwise.
// Thread-safe.
absl::StatusOr<std::string> FindExecutable(absl::string_view name, absl::string_view apt_package);

// Runs `argv` (argv[0] looked up with FindExecutable, apt hint = argv[0]) with stdin from
// /dev/null, waits up to `timeout` and returns its stdout and stderr, interleaved as written.
// Errors: INVALID_ARGUMENT for an empty argv; NOT_FOUND when the program is missing; INTERNAL
// when it exits non-zero or dies of a signal (the message holds the command line and the output's
// tail); DEADLINE_EXCEEDED after `timeout` (the program is SIGKILLed). For short-lived programs
// only: no PR_SET_PDEATHSIG (RedisServer does that for servers). Thread-safe (posix_spawn).
absl::StatusOr<std::string> RunProgram(const std::vector<std::string>& argv,
                                       absl::Duration timeout = absl::Seconds(30));

// The value of the series `series` (name and labels as exposed, e.g.
// `orderhold_calls_denied_total{method="Pay"}`) on the Prometheus endpoint of 127.0.0.1:`port`
// (curl), or -1 when it cannot be scraped or has no such series.
double ScrapedValue(int port, const std::string& series);

// Whether this build runs under AddressSanitizer (tests/run.sh --sanitize): its RSS then holds
// freed memory in quarantine (256 MiB by default), so memory bounds are checked in the Release
// build only (the figures are printed in both).
#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kAddressSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kAddressSanitized = true;
#else
inline constexpr bool kAddressSanitized = false;
#endif
#else
inline constexpr bool kAddressSanitized = false;
#endif

// Creates a fresh, private (0700) directory "$TMPDIR/orderhold-<prefix>-XXXXXX" (/tmp when
// TMPDIR is unset or empty) and returns its path. Unique even across processes, so tests running
// in parallel (other ctest jobs, other checkouts) never share one. The caller removes it.
// INTERNAL if mkdtemp fails. Thread-safe.
absl::StatusOr<std::string> MakeTempDir(absl::string_view prefix);

// A DNS name the test moves, as a managed Redis moves its name to the promoted replica at a
// failover: the calling process gets its own mount namespace (unshare(CLONE_NEWNS), so nothing
// outside this process sees it) in which /etc/hosts is a bind mount of a private file that maps
// `name` to an address. glibc's files backend reads /etc/hosts on every getaddrinfo, so the code
// under test resolves the name exactly as in production and sees each Move() at its next lookup.
// Needs root (CAP_SYS_ADMIN) and a process that is still single-threaded (unshare of a mount
// namespace is refused to a process whose threads share its filesystem attributes): create it
// first thing in a test, before any thread starts. Each ctest case is its own process, so the
// namespace dies with the test. Not thread-safe; Move() may run while other threads resolve.
class PrivateHostsFile {
 public:
  // INTERNAL naming the step (unshare, mount, the file) when one fails.
  static absl::StatusOr<std::unique_ptr<PrivateHostsFile>> Create(absl::string_view name,
                                                                  absl::string_view address);
  // Leaves the bind mount in place (the namespace ends with the process) and removes the file's
  // directory.
  ~PrivateHostsFile();
  PrivateHostsFile(const PrivateHostsFile&) = delete;
  PrivateHostsFile& operator=(const PrivateHostsFile&) = delete;

  // Maps the name to `address` from the next lookup on, rewriting the file in place (a new file
  // would be a new inode, which the bind mount does not follow). INTERNAL if it cannot be written.
  absl::Status Move(absl::string_view address);

 private:
  PrivateHostsFile(std::string dir, std::string name);
  std::string dir_;
  std::string name_;
};

}  // namespace orderhold::testing

#endif  // ORDERHOLD_TESTS_TESTING_OS_UTIL_H_
