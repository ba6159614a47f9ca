// ClosedPort: a TCP port of 127.0.0.1 that is bound, so no other process can take it, but not
// listening, so a connection to it is refused at once. For tests of "nobody listens there":
// a port freed by a stopped server may be bound again by anything running beside the test.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>

namespace caf_rdma::testing {

class ClosedPort {
public:
  ClosedPort() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0)
      return;
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t n = sizeof(a);
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &n) == 0)
      port_ = ntohs(a.sin_port);
  }
  ~ClosedPort() {
    if (fd_ >= 0)
      ::close(fd_);
  }
  ClosedPort(const ClosedPort&) = delete;
  ClosedPort& operator=(const ClosedPort&) = delete;

  /// 0 if no port could be bound.
  uint16_t port() const { return port_; }

private:
  int fd_ = -1;
  uint16_t port_ = 0;
};

}  // namespace caf_rdma::testing
