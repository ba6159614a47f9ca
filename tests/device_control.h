// Test helper: run a command (rdma link delete/add, ip link set) as a child process and wait
// for it with a bound, for tests that take devices away inside the Soft-RoCE VM.
//
// These tests change the machine's RDMA devices: they run only where CAF_RDMA_IN_VM=1 (set by
// tests/rxe_vm/run_under.sh inside the test VM), never on a user's host.
#pragma once

#include <poll.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "tests/rdma_test.h"

namespace caf_rdma::testing {

/// True inside the test VM (invariant above).
inline bool in_test_vm() {
  const char* v = std::getenv("CAF_RDMA_IN_VM");
  return v != nullptr && std::strcmp(v, "1") == 0;
}

/// Base fixture of tests that change the machine's RDMA devices: skipped like any rdma test
/// without a device, and outside the test VM skipped saying what it would have changed.
class DeviceChangingTest : public RdmaTest {
protected:
  explicit DeviceChangingTest(std::string what) : what_(std::move(what)) {}
  void SetUp() override {
    RdmaTest::SetUp();
    if (!IsSkipped() && !in_test_vm())
      GTEST_SKIP() << what_
                   << ": runs only inside the test VM (bazel test --config=rxe), never on a "
                      "host's own devices";
  }

private:
  std::string what_;
};

/// A started command: its pid and a pidfd to wait on (-1 when it could not start).
struct Command {
  pid_t pid = -1;
  int pidfd = -1;
  std::string text;
};

inline Command start_command(const std::vector<std::string>& argv) {
  Command c;
  for (const auto& a : argv)
    c.text += (c.text.empty() ? "" : " ") + a;
  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const auto& a : argv)
    args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid == 0) {
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  if (pid < 0)
    return c;
  c.pid = pid;
  c.pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  return c;
}

/// Waits up to `limit` for `c` to exit: its exit status, or -1 (did not start, was killed by a
/// signal, or still running at the limit: then it is killed and reaped).
inline int wait_command(Command& c, std::chrono::milliseconds limit) {
  if (c.pid < 0)
    return -1;
  if (c.pidfd >= 0) {
    pollfd p{c.pidfd, POLLIN, 0};
    int n = ::poll(&p, 1, static_cast<int>(limit.count()));
    ::close(c.pidfd);
    c.pidfd = -1;
    if (n <= 0)
      ::kill(c.pid, SIGKILL);
  }
  int status = 0;
  ::waitpid(c.pid, &status, 0);
  c.pid = -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/// Runs `argv` to its end (at most `limit`): its exit status, or -1.
inline int run_command(const std::vector<std::string>& argv,
                       std::chrono::milliseconds limit = std::chrono::milliseconds(30000)) {
  Command c = start_command(argv);
  return wait_command(c, limit);
}

}  // namespace caf_rdma::testing
