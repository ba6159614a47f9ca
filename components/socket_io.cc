// TCP sockets with deadlines (see socket_io.h).
#include "components/socket_io.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace caf_rdma {

namespace {

Error errno_error(const std::string& what, int err) {
  ErrorCode code = err == ECONNRESET || err == EPIPE || err == ECONNREFUSED ||
                           err == EHOSTUNREACH || err == ENETUNREACH || err == ECONNABORTED
                       ? ErrorCode::kPeerUnavailable
                       : ErrorCode::kInternal;
  return Error(code, what + ": " + errno_string(err));
}

Result<sockaddr_in> ipv4(const std::string& host, uint16_t port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  const std::string h = host == "localhost" ? "127.0.0.1" : host;
  if (::inet_pton(AF_INET, h.c_str(), &addr.sin_addr) != 1)
    return Error(ErrorCode::kInvalidArgument,
                 "'" + host + "' is not an IPv4 address (the stream channel needs one)");
  return addr;
}

void set_nonblocking(int fd) {
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL, 0) | O_NONBLOCK);
}

/// Milliseconds left until the deadline for poll(): -1 without one, 0 once passed.
int poll_ms(Deadline deadline) {
  if (deadline == kNoDeadline)
    return -1;
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
  if (left.count() <= 0)
    return 0;
  return static_cast<int>(std::min<int64_t>(left.count() + 1, 1 << 30));
}

/// Waits until fd is ready for `events`; false when the deadline passed first.
Result<bool> wait_ready(int fd, short events, Deadline deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    int ms = poll_ms(deadline);
    int r = ::poll(&p, 1, ms);
    if (r > 0)
      return true;
    if (r == 0) {
      if (ms == 0 || std::chrono::steady_clock::now() >= deadline)
        return false;
      continue;
    }
    if (errno != EINTR)
      return Error(ErrorCode::kInternal, std::string("poll: ") + errno_string(errno));
  }
}

}  // namespace

Socket& Socket::operator=(Socket&& other) noexcept {
  if (this != &other) {
    close();
    fd_ = other.release();
  }
  return *this;
}

int Socket::release() {
  int fd = fd_;
  fd_ = -1;
  return fd;
}

void Socket::close() {
  if (fd_ >= 0)
    ::close(fd_);
  fd_ = -1;
}

void Socket::shutdown_both() const {
  if (fd_ >= 0)
    ::shutdown(fd_, SHUT_RDWR);
}

Result<Socket> listen_tcp(const std::string& host, uint16_t port) {
  CAF_RDMA_ASSIGN_OR_RETURN(sockaddr_in addr, ipv4(host, port));
  Socket s(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!s.valid())
    return errno_error("socket()", errno);
  int one = 1;
  ::setsockopt(s.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  std::string where = host + ":" + std::to_string(port);
  if (::bind(s.fd(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0)
    return errno_error("bind " + where, errno);
  if (::listen(s.fd(), 64) != 0)
    return errno_error("listen " + where, errno);
  set_nonblocking(s.fd());
  return s;
}

Result<uint16_t> local_port(const Socket& s) {
  sockaddr_in addr{};
  socklen_t len = sizeof(addr);
  if (::getsockname(s.fd(), reinterpret_cast<sockaddr*>(&addr), &len) != 0)
    return errno_error("getsockname", errno);
  return ntohs(addr.sin_port);
}

Result<Socket> connect_tcp(const std::string& host, uint16_t port, Deadline deadline) {
  std::string where = "connect to " + host + ":" + std::to_string(port);
  CAF_RDMA_ASSIGN_OR_RETURN(sockaddr_in addr, ipv4(host, port));
  Socket s(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!s.valid())
    return errno_error("socket()", errno);
  set_nonblocking(s.fd());
  int one = 1;
  ::setsockopt(s.fd(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  if (::connect(s.fd(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    if (errno != EINPROGRESS)
      return errno_error(where, errno);
    CAF_RDMA_ASSIGN_OR_RETURN(bool ready, wait_ready(s.fd(), POLLOUT, deadline));
    if (!ready)
      return Error(ErrorCode::kTimeout, where + ": no answer before the deadline");
    int err = 0;
    socklen_t len = sizeof(err);
    ::getsockopt(s.fd(), SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0)
      return errno_error(where, err);
  }
  return s;
}

Result<Socket> accept_tcp(const Socket& listener, int stop_fd) {
  for (;;) {
    pollfd p[2] = {{listener.fd(), POLLIN, 0}, {stop_fd, POLLIN, 0}};
    if (::poll(p, 2, -1) < 0) {
      if (errno == EINTR)
        continue;
      return errno_error("poll on the stream listener", errno);
    }
    if (p[1].revents != 0)
      return Socket{};
    int fd = ::accept4(listener.fd(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd >= 0) {
      int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      return Socket(fd);
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED)
      return errno_error("accept on the stream listener", errno);
  }
}

namespace {

/// Sends (or receives) exactly n bytes at p before the deadline.
Status move_all(const Socket& s, uint8_t* p, uint64_t n, Deadline deadline, const std::string& what,
                bool sending) {
  uint64_t done = 0;
  auto progress = [&] { return std::to_string(done) + " of " + std::to_string(n) + " bytes"; };
  while (done < n) {
    ssize_t k = sending ? ::send(s.fd(), p + done, n - done, MSG_NOSIGNAL)
                        : ::recv(s.fd(), p + done, n - done, 0);
    if (k > 0) {
      done += static_cast<uint64_t>(k);
      continue;
    }
    if (k == 0)
      return Error(ErrorCode::kPeerUnavailable,
                   what + ": connection closed by the peer after " + progress());
    if (errno == EINTR)
      continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK)
      return errno_error(what + " (after " + progress() + ")", errno);
    CAF_RDMA_ASSIGN_OR_RETURN(bool ready, wait_ready(s.fd(), sending ? POLLOUT : POLLIN, deadline));
    if (!ready)
      return Error(ErrorCode::kTimeout, what + ": timed out after " +
                                            (sending ? "sending " : "receiving ") + progress());
  }
  return {};
}

}  // namespace

Status send_all(const Socket& s, const void* data, uint64_t n, Deadline deadline,
                const std::string& what) {
  return move_all(s, static_cast<uint8_t*>(const_cast<void*>(data)), n, deadline, what, true);
}

Status recv_all(const Socket& s, void* data, uint64_t n, Deadline deadline,
                const std::string& what) {
  return move_all(s, static_cast<uint8_t*>(data), n, deadline, what, false);
}

}  // namespace caf_rdma
