// Silent connection floods for tests of the stream channel's limits (components/stream_server.h
// invariants 3 and 4): TCP connections from several loopback source addresses (127.0.0.x, bound
// before connect with port 0, so the kernel picks the source port) that never send a byte, as
// anyone who reaches a stream port can open them.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "components/socket_io.h"

namespace caf_rdma::testing {

/// A TCP connection to 127.0.0.1:port from loopback address `source` before the deadline.
inline Result<Socket> connect_from(const std::string& source, uint16_t port, Deadline deadline) {
  Socket s(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!s.valid())
    return Error(ErrorCode::kInternal, "socket(): " + errno_string(errno));
  sockaddr_in from{};
  from.sin_family = AF_INET;
  if (::inet_pton(AF_INET, source.c_str(), &from.sin_addr) != 1 ||
      ::bind(s.fd(), reinterpret_cast<sockaddr*>(&from), sizeof(from)) != 0)
    return Error(ErrorCode::kInternal, "bind to " + source + ": " + errno_string(errno));
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  to.sin_port = htons(port);
  if (::connect(s.fd(), reinterpret_cast<sockaddr*>(&to), sizeof(to)) == 0)
    return s;
  if (errno != EINPROGRESS)
    return Error(ErrorCode::kInternal, "connect from " + source + ": " + errno_string(errno));
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0)
      return Error(ErrorCode::kTimeout, "connect from " + source + " to port " +
                                            std::to_string(port) + ": no answer in time");
    pollfd p{s.fd(), POLLOUT, 0};
    int r = ::poll(&p, 1, static_cast<int>(left.count()));
    if (r > 0)
      break;
    if (r < 0 && errno != EINTR)
      return Error(ErrorCode::kInternal, "poll: " + errno_string(errno));
  }
  int err = 0;
  socklen_t len = sizeof(err);
  ::getsockopt(s.fd(), SOL_SOCKET, SO_ERROR, &err, &len);
  if (err != 0)
    return Error(ErrorCode::kInternal, "connect from " + source + ": " + errno_string(err));
  return s;
}

/// Raises the soft fd limit to the hard one; an error naming both unless `needed` fit.
inline Status allow_fds(size_t needed) {
  rlimit r{};
  if (::getrlimit(RLIMIT_NOFILE, &r) != 0)
    return Error(ErrorCode::kInternal, "getrlimit: " + errno_string(errno));
  r.rlim_cur = r.rlim_max;
  if (::setrlimit(RLIMIT_NOFILE, &r) != 0)
    return Error(ErrorCode::kInternal, "setrlimit: " + errno_string(errno));
  if (r.rlim_cur < needed)
    return Error(ErrorCode::kResourceExhausted, "the test needs " + std::to_string(needed) +
                                                    " fds, the hard limit is " +
                                                    std::to_string(r.rlim_cur));
  return {};
}

/// Connections waiting in the accept queue of the IPv4 listener on `port` (the rx_queue the
/// kernel shows for it in /proc/net/tcp); 0 when there is none.
inline size_t accept_backlog(uint16_t port) {
  std::ifstream in("/proc/net/tcp");
  std::string line;
  std::getline(in, line);  // the header
  while (std::getline(in, line)) {
    std::istringstream f(line);
    std::string slot, local, remote, state, queues;
    if (!(f >> slot >> local >> remote >> state >> queues) || state != "0A")
      continue;  // 0A: LISTEN
    auto colon = local.find(':');
    if (colon == std::string::npos || std::stoul(local.substr(colon + 1), nullptr, 16) != port)
      continue;
    auto q = queues.find(':');
    return q == std::string::npos ? 0 : std::stoul(queues.substr(q + 1), nullptr, 16);
  }
  return 0;
}

/// `total` silent connections to 127.0.0.1:port, spread round-robin over `sources`; stops at
/// the first that fails (the error says which and why). Each waits (up to 30 s) until the
/// server's accept queue holds fewer than kFloodAhead connections, so it never overflows (an
/// overflow costs the connection a 1 s SYN retransmission) and the server sees the flood in
/// the order it was opened.
constexpr size_t kFloodAhead = 16;
inline Result<std::vector<Socket>> silent_flood(uint16_t port,
                                                const std::vector<std::string>& sources,
                                                size_t total) {
  std::vector<Socket> flood;
  flood.reserve(total);
  for (size_t i = 0; i < total; ++i) {
    const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (accept_backlog(port) >= kFloodAhead) {
      if (std::chrono::steady_clock::now() >= limit)
        return Error(ErrorCode::kTimeout, "the server on port " + std::to_string(port) +
                                              " accepted nothing for 30 s (" + std::to_string(i) +
                                              " connections opened)");
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    const std::string& from = sources[i % sources.size()];
    auto s = connect_from(from, port, limit);
    if (!s.ok())
      return s.error().with_context("silent connection " + std::to_string(i) + " of " +
                                    std::to_string(total));
    flood.push_back(std::move(*s));
  }
  return flood;
}

/// Polls `done` (state of another thread that sends no notification) until it holds or `limit`
/// passed; whether it held.
template <class Pred>
bool wait_for_state(Pred done, std::chrono::milliseconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= until)
      return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

}  // namespace caf_rdma::testing
