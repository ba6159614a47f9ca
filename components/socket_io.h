// TCP sockets for the fallback's stream channel: an owning file descriptor and I/O with a
// deadline. Every call is non-blocking underneath (poll with the time left), so no wait is
// unbounded unless the caller asks for it (kNoDeadline, used only for idle connections, which
// are woken by shutdown()).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "primitives/status.h"

namespace caf_rdma {

using Deadline = std::chrono::steady_clock::time_point;
constexpr Deadline kNoDeadline = Deadline::max();

/// Owns a socket; closes it on destruction. Move-only.
class Socket {
public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  Socket(Socket&& other) noexcept : fd_(other.release()) {}
  Socket& operator=(Socket&& other) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  ~Socket() { close(); }

  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release();
  void close();
  /// Wakes any thread blocked on this socket (its I/O fails with "connection shut down").
  void shutdown_both() const;

private:
  int fd_ = -1;
};

/// A listening socket on host (an IPv4 address or "localhost"), port 0 = the kernel's choice.
Result<Socket> listen_tcp(const std::string& host, uint16_t port);
/// The port a socket is bound to.
Result<uint16_t> local_port(const Socket& s);
/// Connects to host:port (IPv4 or "localhost") before the deadline; TCP_NODELAY set.
Result<Socket> connect_tcp(const std::string& host, uint16_t port, Deadline deadline);
/// Accepts one connection, or returns an invalid Socket when `stop_fd` becomes readable.
Result<Socket> accept_tcp(const Socket& listener, int stop_fd);

/// Sends/receives exactly n bytes before the deadline. Errors: timeout, peer_unavailable (the
/// peer closed or reset the connection), internal (other errno); `what` starts the message.
Status send_all(const Socket& s, const void* data, uint64_t n, Deadline deadline,
                const std::string& what);
Status recv_all(const Socket& s, void* data, uint64_t n, Deadline deadline,
                const std::string& what);

}  // namespace caf_rdma
