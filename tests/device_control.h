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

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <tuple>
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
/// signal, or still running at the limit: then it is killed, and given 5 s more to go; a
/// command that does not go even then, e.g. `rdma link delete` stuck in the kernel while this
/// process still holds the device, is left unreaped rather than waited for without a bound).
inline int wait_command(Command& c, std::chrono::milliseconds limit) {
  if (c.pid < 0)
    return -1;
  auto reap = [&c](std::chrono::milliseconds within) -> std::pair<bool, int> {
    auto until = std::chrono::steady_clock::now() + within;
    while (true) {
      int status = 0;
      pid_t r = ::waitpid(c.pid, &status, WNOHANG);
      if (r == c.pid)
        return {true, WIFEXITED(status) ? WEXITSTATUS(status) : -1};
      if (r < 0)
        return {true, -1};  // not our child (any more)
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          until - std::chrono::steady_clock::now());
      if (left.count() <= 0)
        return {false, -1};
      // Woken by the exit itself where pidfds exist; else checked every 10 ms.
      pollfd p{c.pidfd, POLLIN, 0};
      ::poll(c.pidfd >= 0 ? &p : nullptr, c.pidfd >= 0 ? 1 : 0,
             static_cast<int>(c.pidfd >= 0 ? left.count() : std::min<int64_t>(left.count(), 10)));
    }
  };
  auto [gone, status] = reap(limit);
  if (!gone) {
    ::kill(c.pid, SIGKILL);
    std::tie(gone, status) = reap(std::chrono::seconds(5));
  }
  if (c.pidfd >= 0)
    ::close(c.pidfd);
  c.pidfd = -1;
  c.pid = -1;
  return status;
}

/// Runs `argv` to its end (at most `limit`): its exit status, or -1.
inline int run_command(const std::vector<std::string>& argv,
                       std::chrono::milliseconds limit = std::chrono::milliseconds(30000)) {
  Command c = start_command(argv);
  return wait_command(c, limit);
}

}  // namespace caf_rdma::testing
