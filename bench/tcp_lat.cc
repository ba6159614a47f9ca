// tcp_lat: the latency floor of a message between two processes of one host over TCP: an
// 8-byte ping-pong on a loopback connection (TCP_NODELAY both ways) between this process and a
// child it starts (this program with --serve), the reference for caf-rdma's fallback path.
//
// Invariants:
//   1. Two processes, never threads: the child is exec'd; it binds port 0 and prints the port
//      it got, which the parent reads (no port is chosen by one process and bound by another).
//   2. Every wait is bounded: socket calls by SO_RCVTIMEO/SO_SNDTIMEO (30 s), the child's
//      lines by ChildProcess::read_line's timeout, its exit by wait_for.
//   3. Only the timed loop counts: the "csw" line holds each process's voluntary context
//      switches during the exchanges (the child reports its own after the parent's EOF).
//
//   tcp_lat [--iters N]   -> "lat tcp-lat rtt 8 <median_us> <p99_us>", "csw tcp-lat rtt <s> <p>"
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "bench/bench_output.h"
#include "support/child_process.h"
#include "support/flags.h"

using namespace caf_rdma;
using Clock = std::chrono::steady_clock;

namespace {

constexpr const char* kUsage =
    "usage: tcp_lat [--iters N]\n"
    "  8-byte TCP ping-pong over loopback between this process and a child process; prints\n"
    "  'lat tcp-lat rtt 8 MEDIAN_US P99_US' and voluntary context switches per round trip of\n"
    "  both processes ('csw tcp-lat rtt SELF PEER'). Default: 1000 round trips (+100 warm-up).\n";
constexpr uint32_t kWarmup = 100;
constexpr size_t kMessage = 8;

void bound_socket(int fd) {
  timeval tv{};
  tv.tv_sec = 30;
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));  // accept() obeys it too
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/// Reads exactly `n` bytes; false on EOF, error or timeout.
bool read_all(int fd, char* buf, size_t n) {
  for (size_t got = 0; got < n;) {
    ssize_t r = ::recv(fd, buf + got, n - got, 0);
    if (r <= 0)
      return false;
    got += static_cast<size_t>(r);
  }
  return true;
}

bool write_all(int fd, const char* buf, size_t n) {
  for (size_t sent = 0; sent < n;) {
    ssize_t w = ::send(fd, buf + sent, n - sent, MSG_NOSIGNAL);
    if (w <= 0)
      return false;
    sent += static_cast<size_t>(w);
  }
  return true;
}

/// The child: echoes 8-byte messages on one connection until EOF.
int serve() {
  int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listener >= 0)
    bound_socket(listener);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (listener < 0 || ::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::listen(listener, 1) != 0 ||
      ::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
    return std::fprintf(stderr, "tcp_lat --serve: cannot listen on loopback: %s\n",
                        errno_string(errno).c_str()),
           1;
  std::printf("port %u\n", ntohs(addr.sin_port));
  std::fflush(stdout);
  int c = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
  ::close(listener);
  if (c < 0)
    return std::fprintf(stderr, "tcp_lat --serve: no connection in 30 s\n"), 1;
  bound_socket(c);
  uint64_t before = bench::voluntary_switches();
  char buf[kMessage];
  while (read_all(c, buf, kMessage))
    if (!write_all(c, buf, kMessage))
      break;
  uint64_t switches = bench::voluntary_switches() - before;
  ::close(c);
  std::printf("csw %llu\n", static_cast<unsigned long long>(switches));
  std::fflush(stdout);
  return 0;
}

int measure(uint32_t iters) {
  auto child = ChildProcess::start({self_executable(), "--serve"});
  if (!child.ok())
    return std::fprintf(stderr, "tcp_lat: %s\n", child.error().to_string().c_str()), 1;
  auto line = child->read_line(std::chrono::seconds(30));
  unsigned port = 0;
  if (!line.ok() || std::sscanf(line->c_str(), "port %u", &port) != 1)
    return std::fprintf(stderr, "tcp_lat: the child did not report its port: %s\n",
                        line.ok() ? line->c_str() : line.error().to_string().c_str()),
           1;
  int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s >= 0)
    bound_socket(s);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (s < 0 || ::connect(s, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0)
    return std::fprintf(stderr, "tcp_lat: connect to 127.0.0.1:%u: %s\n", port,
                        errno_string(errno).c_str()),
           1;
  std::vector<double> us;
  us.reserve(iters);
  char msg[kMessage] = {1, 2, 3, 4, 5, 6, 7, 8};
  char back[kMessage];
  uint64_t before = 0;
  for (uint32_t i = 0; i < iters + kWarmup; ++i) {
    if (i == kWarmup)
      before = bench::voluntary_switches();
    auto t0 = Clock::now();
    if (!write_all(s, msg, kMessage) || !read_all(s, back, kMessage))
      return std::fprintf(stderr, "tcp_lat: round trip %u failed: %s\n", i,
                          errno_string(errno).c_str()),
             1;
    auto dt = Clock::now() - t0;
    if (i >= kWarmup)
      us.push_back(std::chrono::duration<double, std::micro>(dt).count());
  }
  uint64_t self = bench::voluntary_switches() - before;
  ::shutdown(s, SHUT_WR);  // the child's EOF: it reports its switches and exits
  auto report = child->read_line(std::chrono::seconds(30));
  ::close(s);
  unsigned long long peer = 0;
  bool have_peer = report.ok() && std::sscanf(report->c_str(), "csw %llu", &peer) == 1;
  auto rc = child->wait_for(std::chrono::seconds(30));
  if (!rc || *rc != 0)
    return std::fprintf(stderr, "tcp_lat: the child failed (exit %d)\n", rc ? *rc : -1), 1;
  bench::print_latency("tcp-lat", "rtt", us);
  // The child's count spans the warm-up's round trips too.
  bench::print_switches(
      "tcp-lat", "rtt", bench::per_op(self, iters),
      have_peer ? std::optional<double>(bench::per_op(peer, iters + kWarmup)) : std::nullopt);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  auto flags = Flags::parse(argc, argv, {"--iters"}, {"--serve", "--help", "-h"});
  if (!flags.ok())
    return std::fprintf(stderr, "tcp_lat: %s\n%s", flags.error().message().c_str(), kUsage), 2;
  if (flags->has("--help") || flags->has("-h"))
    return std::printf("%s", kUsage), 0;
  if (flags->has("--serve"))
    return serve();
  auto iters = flags->get_u64("--iters", 1000);
  if (!iters.ok() || *iters == 0 || *iters > 10000000)
    return std::fprintf(stderr, "tcp_lat: bad --iters\n%s", kUsage), 2;
  return measure(static_cast<uint32_t>(*iters));
}
