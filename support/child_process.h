// ChildProcess: start another program (usually this one with other flags), read its stdout
// line by line with a timeout, wait for it or kill it. Used by the multi-process programs
// (examples, stress, systems) and tests. Plain POSIX; no CAF.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "primitives/status.h"

namespace caf_rdma {

class ChildProcess {
public:
  /// Starts argv[0] (a path) with `argv`; its stdout is a pipe read by `read_line`, its stdin a
  /// pipe written by `write_line` (EOF when this object goes), its stderr is inherited. `env`
  /// entries ("NAME=value") are added to this process's environment.
  static Result<ChildProcess> start(const std::vector<std::string>& argv,
                                    const std::vector<std::string>& env = {});

  ChildProcess(ChildProcess&& other) noexcept;
  ChildProcess& operator=(ChildProcess&& other) noexcept;
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  /// Kills (SIGKILL) and reaps the child if it still runs.
  ~ChildProcess();

  pid_t pid() const { return pid_; }
  const std::string& name() const { return name_; }

  /// The next line of the child's stdout (without the newline). Errors: kTimeout, or
  /// kPeerUnavailable when the child closed its stdout (exited).
  Result<std::string> read_line(std::chrono::milliseconds timeout);

  /// Writes `line` and a newline to the child's stdin. Errors: kPeerUnavailable (it exited).
  Status write_line(const std::string& line);

  /// Waits up to `timeout` for the child to exit; returns its exit code (128 + signal when
  /// killed), or nullopt if it still runs.
  std::optional<int> wait_for(std::chrono::milliseconds timeout);

  void kill(int signal);
  /// After kill(SIGSTOP): waits until every thread of the child has stopped (the kernel's word,
  /// waitpid WUNTRACED), up to `timeout`; false when it did not (or it exited). A stop only
  /// queued when kill() returns: until then the child may still act.
  bool wait_stopped(std::chrono::milliseconds timeout);

private:
  ChildProcess() = default;

  pid_t pid_ = -1;
  int stdout_fd_ = -1;
  int stdin_fd_ = -1;
  std::string name_;
  std::string buffer_;
  std::optional<int> exit_code_;
};

/// Path of the running executable (/proc/self/exe).
std::string self_executable();

}  // namespace caf_rdma
