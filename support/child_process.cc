#include "support/child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <thread>

namespace caf_rdma {

std::string self_executable() {
  char buf[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0)
    return "";
  buf[n] = '\0';
  return buf;
}

Result<ChildProcess> ChildProcess::start(const std::vector<std::string>& argv,
                                         const std::vector<std::string>& env) {
  if (argv.empty())
    return Error(ErrorCode::kInvalidArgument, "ChildProcess::start without argv");
  int fds[2], in[2];
  if (::pipe2(fds, O_CLOEXEC) != 0)
    return Error(ErrorCode::kInternal, std::string("pipe2 failed: ") + errno_string(errno));
  if (::pipe2(in, O_CLOEXEC) != 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    return Error(ErrorCode::kInternal, std::string("pipe2 failed: ") + errno_string(errno));
  }
  // Everything the child needs is built before fork: between fork and exec a child of a
  // multithreaded process may only make async-signal-safe calls (no malloc, no stdio: another
  // thread may have held their locks at the fork).
  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const auto& a : argv)
    args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<std::string> env_entries;
  env_entries.reserve(64 + env.size());
  for (char** e = environ; *e != nullptr; ++e) {
    std::string entry(*e);
    std::string name = entry.substr(0, entry.find('='));
    bool replaced = std::any_of(env.begin(), env.end(), [&](const std::string& x) {
      return x.compare(0, name.size() + 1, name + "=") == 0;
    });
    if (!replaced)
      env_entries.push_back(std::move(entry));
  }
  env_entries.insert(env_entries.end(), env.begin(), env.end());
  std::vector<char*> envp;
  envp.reserve(env_entries.size() + 1);
  for (auto& e : env_entries)
    envp.push_back(e.data());
  envp.push_back(nullptr);
  const std::string exec_failed = "child_process: exec " + argv[0] + " failed\n";
  pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    ::close(in[0]);
    ::close(in[1]);
    return Error(ErrorCode::kInternal, std::string("fork failed: ") + errno_string(errno));
  }
  if (pid == 0) {
    ::dup2(fds[1], STDOUT_FILENO);
    ::dup2(in[0], STDIN_FILENO);
    ::execve(args[0], args.data(), envp.data());
    [[maybe_unused]] auto n = ::write(STDERR_FILENO, exec_failed.data(), exec_failed.size());
    ::_exit(127);
  }
  ::close(fds[1]);
  ::close(in[0]);
  ChildProcess c;
  c.pid_ = pid;
  c.stdout_fd_ = fds[0];
  c.stdin_fd_ = in[1];
  c.name_ = argv[0].substr(argv[0].rfind('/') + 1);
  for (size_t i = 1; i < argv.size(); ++i)
    c.name_ += " " + argv[i];
  return c;
}

ChildProcess::ChildProcess(ChildProcess&& other) noexcept {
  *this = std::move(other);
}

ChildProcess& ChildProcess::operator=(ChildProcess&& other) noexcept {
  std::swap(pid_, other.pid_);
  std::swap(stdout_fd_, other.stdout_fd_);
  std::swap(stdin_fd_, other.stdin_fd_);
  std::swap(name_, other.name_);
  std::swap(buffer_, other.buffer_);
  std::swap(exit_code_, other.exit_code_);
  return *this;
}

ChildProcess::~ChildProcess() {
  if (pid_ > 0 && !exit_code_) {
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
  }
  if (stdout_fd_ >= 0)
    ::close(stdout_fd_);
  if (stdin_fd_ >= 0)
    ::close(stdin_fd_);
}

Status ChildProcess::write_line(const std::string& line) {
  std::string text = line + "\n";
  for (size_t done = 0; done < text.size();) {
    ssize_t n = ::write(stdin_fd_, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return Error(ErrorCode::kPeerUnavailable,
                   name_ + ": cannot write to its stdin: " + errno_string(errno));
    done += static_cast<size_t>(n);
  }
  return {};
}

Result<std::string> ChildProcess::read_line(std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    auto nl = buffer_.find('\n');
    if (nl != std::string::npos) {
      std::string line = buffer_.substr(0, nl);
      buffer_.erase(0, nl + 1);
      return line;
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0)
      return Error(ErrorCode::kTimeout, "no line from '" + name_ + "' within " +
                                            std::to_string(timeout.count()) + " ms");
    pollfd p{stdout_fd_, POLLIN, 0};
    int rc = ::poll(&p, 1, static_cast<int>(left.count()));
    if (rc < 0 && errno != EINTR)
      return Error(ErrorCode::kInternal, std::string("poll failed: ") + errno_string(errno));
    if (rc <= 0)
      continue;
    char buf[4096];
    ssize_t n = ::read(stdout_fd_, buf, sizeof(buf));
    if (n <= 0)
      return Error(ErrorCode::kPeerUnavailable, "'" + name_ + "' closed its output (exited?)");
    buffer_.append(buf, static_cast<size_t>(n));
  }
}

std::optional<int> ChildProcess::wait_for(std::chrono::milliseconds timeout) {
  if (exit_code_)
    return exit_code_;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    int status = 0;
    pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      return exit_code_;
    }
    if (std::chrono::steady_clock::now() >= deadline)
      return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

bool ChildProcess::wait_stopped(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (pid_ > 0 && !exit_code_) {
    int status = 0;
    const pid_t r = ::waitpid(pid_, &status, WUNTRACED | WNOHANG);
    if (r == pid_) {
      if (WIFSTOPPED(status))
        return true;
      exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      return false;
    }
    if (std::chrono::steady_clock::now() >= deadline)
      return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

void ChildProcess::kill(int signal) {
  if (pid_ > 0 && !exit_code_)
    ::kill(pid_, signal);
}

}  // namespace caf_rdma
