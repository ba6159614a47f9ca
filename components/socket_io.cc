// TCP sockets with deadlines (see socket_io.h).
#include "components/socket_io.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <optional>
#include <vector>

#include "components/cpu_share.h"
#include "components/detail/tsan.h"
#include "components/stop_signal.h"

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
Result<bool> wait_ready(int fd, short events, Deadline deadline, short* revents = nullptr) {
  for (;;) {
    pollfd p{fd, events, 0};
    int ms = poll_ms(deadline);
    int r = ::poll(&p, 1, ms);
    if (r > 0) {
      if (revents != nullptr)
        *revents = p.revents;
      return true;
    }
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
    fd_ = other.fd_;
    tls_ = other.tls_;
    other.fd_ = -1;
    other.tls_ = nullptr;
  }
  return *this;
}

void Socket::close() {
  if (fd_ >= 0)
    detail::closing_connection();
  if (tls_ != nullptr)
    SSL_free(tls_);  // no close_notify: the peer sees the connection end either way
  tls_ = nullptr;
  if (fd_ >= 0)
    ::close(fd_);
  fd_ = -1;
}

void Socket::adopt_tls(ssl_st* tls) {
  if (tls_ != nullptr)
    SSL_free(tls_);
  tls_ = tls;
}

std::pair<int, ssl_st*> Socket::release() {
  std::pair<int, ssl_st*> out{fd_, tls_};
  fd_ = -1;
  tls_ = nullptr;
  return out;
}

void Socket::shutdown_both() const {
  if (fd_ >= 0)
    ::shutdown(fd_, SHUT_RDWR);
}

Result<std::string> resolve_ipv4(const std::string& host) {
  in_addr probe{};
  if (host == "localhost")
    return std::string("127.0.0.1");
  if (::inet_pton(AF_INET, host.c_str(), &probe) == 1)
    return host;
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &res); rc != 0 || res == nullptr)
    return Error(ErrorCode::kPeerUnavailable,
                 "cannot resolve '" + host + "': " + ::gai_strerror(rc));
  char text[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(res->ai_addr)->sin_addr, text, sizeof(text));
  ::freeaddrinfo(res);
  return std::string(text);
}

std::string ipv4_text(uint32_t ip) {
  in_addr a{};
  a.s_addr = htonl(ip);
  char text[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &a, text, sizeof(text));
  return text;
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

SigpipeGuard::SigpipeGuard() {
  sigset_t pipe;
  sigemptyset(&pipe);
  sigaddset(&pipe, SIGPIPE);
  sigset_t pending;
  sigpending(&pending);
  was_pending_ = sigismember(&pending, SIGPIPE) == 1;
  pthread_sigmask(SIG_BLOCK, &pipe, &old_);
}

SigpipeGuard::~SigpipeGuard() {
  sigset_t pipe;
  sigemptyset(&pipe);
  sigaddset(&pipe, SIGPIPE);
  sigset_t pending;
  sigpending(&pending);
  if (!was_pending_ && sigismember(&pending, SIGPIPE) == 1) {
    timespec zero{};
    while (sigtimedwait(&pipe, nullptr, &zero) < 0 && errno == EINTR) {
    }
  }
  pthread_sigmask(SIG_SETMASK, &old_, nullptr);
}

namespace {

/// Why a TLS call failed (SSL_get_error's code), for an error message.
std::string tls_failure(SSL* ssl, int code) {
  if (code == SSL_ERROR_ZERO_RETURN)
    return "the peer closed the TLS session";
  long verify = SSL_get_verify_result(ssl);
  if (verify != X509_V_OK)
    return std::string("certificate check failed: ") + X509_verify_cert_error_string(verify);
  std::string queued = tls_error_queue();
  if (code == SSL_ERROR_SYSCALL)
    return queued.empty() ? (errno != 0 ? errno_string(errno) : "connection closed by the peer")
                          : queued;
  return queued.empty() ? "TLS error " + std::to_string(code) : queued;
}

/// One TLS read or write of up to n bytes: the count, 0 with `events` set to what to wait for,
/// or an error (`closed` set when the peer ended the connection).
/// (The caller holds a SigpipeGuard.)
Result<size_t> tls_io(SSL* ssl, uint8_t* p, size_t n, bool sending, short& events, bool& closed) {
  ERR_clear_error();
  errno = 0;
  int k = sending ? SSL_write(ssl, p, static_cast<int>(std::min<size_t>(n, 1 << 30)))
                  : SSL_read(ssl, p, static_cast<int>(std::min<size_t>(n, 1 << 30)));
  if (k > 0)
    return static_cast<size_t>(k);
  int code = SSL_get_error(ssl, k);
  if (code == SSL_ERROR_WANT_READ) {
    events = POLLIN;
    return size_t{0};
  }
  if (code == SSL_ERROR_WANT_WRITE) {
    events = POLLOUT;
    return size_t{0};
  }
  // Closed (with or without close_notify), reset, or ended by the peer's alert (e.g. it
  // refused our certificate).
  closed = code == SSL_ERROR_ZERO_RETURN || code == SSL_ERROR_SYSCALL ||
           ERR_GET_REASON(ERR_peek_error()) == SSL_R_UNEXPECTED_EOF_WHILE_READING;
  return Error(ErrorCode::kPeerUnavailable, tls_failure(ssl, code));
}

/// Where move_all is in its pieces: the piece under way and the bytes of it behind.
class PieceCursor {
public:
  PieceCursor(const iovec* pieces, size_t count) : pieces_(pieces), count_(count) { skip_empty(); }
  bool at_end() const { return index_ == count_; }
  uint8_t* here() const { return static_cast<uint8_t*>(pieces_[index_].iov_base) + into_; }
  uint64_t left_in_piece() const { return pieces_[index_].iov_len - into_; }
  /// The rest, up to IOV_MAX pieces, for one sendmsg/recvmsg: the first starts where it is.
  msghdr next_message(std::vector<iovec>& scratch) const {
    const size_t k = std::min<size_t>(count_ - index_, IOV_MAX);
    scratch.assign(pieces_ + index_, pieces_ + index_ + k);
    scratch[0].iov_base = here();
    scratch[0].iov_len = left_in_piece();
    msghdr m{};
    m.msg_iov = scratch.data();
    m.msg_iovlen = k;
    return m;
  }
  void advance(uint64_t k) {
    while (k > 0) {
      const uint64_t step = std::min(k, left_in_piece());
      into_ += step;
      k -= step;
      if (into_ == pieces_[index_].iov_len) {
        ++index_;
        into_ = 0;
        skip_empty();
      }
    }
  }

private:
  void skip_empty() {
    while (index_ < count_ && pieces_[index_].iov_len == 0)
      ++index_;
  }
  const iovec* pieces_;
  size_t count_;
  size_t index_ = 0;
  uint64_t into_ = 0;
};

/// Sends (or receives) the bytes of `pieces` in order before the deadline, and while no wait for
/// the next byte lasts longer than `stall` (when > 0); with a `stop` flag, only until it is set
/// (looked at before every call that touches the pieces, and at least every kStopLook while
/// waiting): the bytes moved, all of them unless stopped.
Result<uint64_t> move_all(const Socket& s, const iovec* pieces, size_t count, Deadline deadline,
                          const std::string& what, bool sending, std::chrono::milliseconds stall,
                          const std::atomic<bool>* stop) {
  uint64_t n = 0;
  for (size_t i = 0; i < count; ++i)
    n += pieces[i].iov_len;
  PieceCursor at(pieces, count);
  std::vector<iovec> scratch;
  uint64_t done = 0;
  auto progress = [&] { return std::to_string(done) + " of " + std::to_string(n) + " bytes"; };
  auto stopped = [&] { return stop_requested(stop); };
  // The last mark of progress: kStallProgress bytes (or the rest) moved since the one before.
  auto mark = std::chrono::steady_clock::now();
  uint64_t mark_done = 0;
  auto moved = [&] {
    if (done - mark_done >= std::min<uint64_t>(kStallProgress, n - mark_done)) {
      mark = std::chrono::steady_clock::now();
      mark_done = done;
    }
  };
  // The wait ends at the deadline, or `stall` after the last mark of progress.
  auto wait_end = [&] { return stall.count() > 0 ? std::min(deadline, mark + stall) : deadline; };
  // Checked after every call that moved bytes too: a peer that trickles them is cut off.
  auto out_of_time = [&] { return done < n && std::chrono::steady_clock::now() >= wait_end(); };
  // One wait: until wait_end(), or with a stop flag kStopLook at most (then looked at again).
  auto wait_slice = [&] {
    return stop == nullptr ? wait_end()
                           : std::min(wait_end(), std::chrono::steady_clock::now() + kStopLook);
  };
  auto waited_out = [&] {
    if (stall.count() > 0 && std::chrono::steady_clock::now() < deadline)
      return Error(ErrorCode::kTimeout,
                   what + ": " +
                       (done == mark_done ? std::string("no byte")
                                          : "only " + std::to_string(done - mark_done) + " bytes") +
                       " moved for " + std::to_string(stall.count()) + " ms after " +
                       std::to_string(mark_done) + " of " + std::to_string(n) +
                       " bytes (the peer stopped " + (sending ? "reading" : "sending") +
                       ", or moves less than " + std::to_string(kStallProgress) + " bytes per " +
                       std::to_string(stall.count()) + " ms): given up");
    return Error(ErrorCode::kTimeout,
                 what + ": timed out after " + (sending ? "sending " : "receiving ") + progress());
  };
  std::optional<SigpipeGuard> guard;
  if (s.tls() != nullptr)
    guard.emplace();
  while (done < n && s.tls() != nullptr && !stopped()) {
    short events = 0;
    bool closed = false;
    auto k = tls_io(s.tls(), at.here(), at.left_in_piece(), sending, events, closed);
    if (!k.ok())
      return Error(k.error().code(), what + ": " + (closed ? "connection closed: " : "") +
                                         k.error().message() + " (after " + progress() + ")");
    done += *k;
    at.advance(*k);
    if (*k > 0) {
      CpuShare::after_run(*k, done < n);  // cpu_share.h invariant 1 (a TLS record a call)
      moved();
      if (out_of_time())
        return waited_out();
      continue;
    }
    CAF_RDMA_ASSIGN_OR_RETURN(bool ready, wait_ready(s.fd(), events, wait_slice()));
    if (!ready && std::chrono::steady_clock::now() >= wait_end())
      return waited_out();
  }
  while (done < n && s.tls() == nullptr && !stopped()) {
    ssize_t k;
    if (at.left_in_piece() == n - done) {               // one piece left: no message to build
      const uint64_t run = CpuShare::run_of(n - done);  // cpu_share.h invariant 1
      k = sending ? ::send(s.fd(), at.here(), run, MSG_NOSIGNAL)
                  : ::recv(s.fd(), at.here(), run, 0);
    } else {
      msghdr m = at.next_message(scratch);
      if (CpuShare::sharing())
        CpuShare::cut(m, kShareRun);
      k = sending ? ::sendmsg(s.fd(), &m, MSG_NOSIGNAL) : ::recvmsg(s.fd(), &m, 0);
    }
    if (k > 0) {
      done += static_cast<uint64_t>(k);
      at.advance(static_cast<uint64_t>(k));
      CpuShare::after_run(static_cast<uint64_t>(k), done < n);
      moved();
      if (out_of_time())
        return waited_out();
      continue;
    }
    if (k == 0)
      return Error(ErrorCode::kPeerUnavailable,
                   what + ": connection closed by the peer after " + progress());
    if (errno == EINTR)
      continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK)
      return errno_error(what + " (after " + progress() + ")", errno);
    // While sending, a peer that closed its side (FIN: POLLRDHUP) will not read the rest: the
    // one half-close here is a stopping StreamClient's during a cross-memory copy, which reads
    // only the owner's short answer (an idle socket buffer takes it without a wait). Without
    // this, a send to a peer that went away behind a full window would wait for its deadline.
    short revents = 0;
    CAF_RDMA_ASSIGN_OR_RETURN(bool ready, wait_ready(s.fd(), sending ? POLLOUT | POLLRDHUP : POLLIN,
                                                     wait_slice(), &revents));
    if (!ready) {
      if (std::chrono::steady_clock::now() >= wait_end())
        return waited_out();
      continue;
    }
    if (sending && (revents & POLLRDHUP) != 0 && (revents & POLLOUT) == 0)
      return Error(ErrorCode::kPeerUnavailable,
                   what + ": connection closed by the peer after " + progress());
  }
  return done;
}

}  // namespace

Status start_tls(Socket& s, const TlsContext& ctx, bool server, Deadline deadline,
                 const std::string& what) {
  SSL* ssl = ctx ? SSL_new(ctx.get()) : nullptr;
  if (ssl == nullptr || SSL_set_fd(ssl, s.fd()) != 1) {
    if (ssl != nullptr)
      SSL_free(ssl);
    return Error(ErrorCode::kInternal, what + ": cannot start TLS: " + tls_error_queue());
  }
  s.adopt_tls(ssl);
  if (server)
    SSL_set_accept_state(ssl);
  else
    SSL_set_connect_state(ssl);
  for (;;) {
    short events = 0;
    {
      SigpipeGuard guard;
      ERR_clear_error();
      errno = 0;
      int r = SSL_do_handshake(ssl);
      if (r == 1)
        return {};
      int code = SSL_get_error(ssl, r);
      if (code == SSL_ERROR_WANT_READ)
        events = POLLIN;
      else if (code == SSL_ERROR_WANT_WRITE)
        events = POLLOUT;
      else
        return Error(ErrorCode::kPeerUnavailable,
                     what + ": TLS handshake failed: " + tls_failure(ssl, code));
    }
    CAF_RDMA_ASSIGN_OR_RETURN(bool ready, wait_ready(s.fd(), events, deadline));
    if (!ready)
      return Error(ErrorCode::kTimeout, what + ": no TLS handshake before the deadline");
  }
}

Status begin_tls_accept(Socket& s, const TlsContext& ctx) {
  SSL* ssl = ctx ? SSL_new(ctx.get()) : nullptr;
  if (ssl == nullptr || SSL_set_fd(ssl, s.fd()) != 1) {
    if (ssl != nullptr)
      SSL_free(ssl);
    return Error(ErrorCode::kInternal, "stream channel: cannot start TLS: " + tls_error_queue());
  }
  s.adopt_tls(ssl);
  SSL_set_accept_state(ssl);
  return {};
}

Result<bool> tls_accept_step(const Socket& s) {
  SSL* ssl = s.tls();
  if (ssl == nullptr)
    return true;
  SigpipeGuard guard;
  ERR_clear_error();
  errno = 0;
  int r = SSL_do_handshake(ssl);
  if (r == 1)
    return true;
  int code = SSL_get_error(ssl, r);
  if (code == SSL_ERROR_WANT_READ)
    return false;
  // WANT_WRITE too: a handshake's few KiB fit any socket buffer, unless the peer never reads.
  return Error(ErrorCode::kPeerUnavailable, "TLS handshake failed: " + tls_failure(ssl, code));
}

Result<size_t> recv_some(const Socket& s, void* data, size_t n) {
  if (s.tls() != nullptr) {
    SigpipeGuard guard;
    short events = 0;
    bool closed = false;
    auto k = tls_io(s.tls(), static_cast<uint8_t*>(data), n, false, events, closed);
    if (k.ok() && *k == 0 && events != POLLIN)
      return Error(ErrorCode::kInternal, "TLS read wants to write first");
    return k;
  }
  for (;;) {
    ssize_t k = ::recv(s.fd(), data, n, 0);
    if (k > 0)
      return static_cast<size_t>(k);
    if (k == 0)
      return Error(ErrorCode::kPeerUnavailable, "connection closed by the peer");
    if (errno == EINTR)
      continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK)
      return size_t{0};
    return errno_error("recv", errno);
  }
}

std::string tls_error_queue() {
  std::string out;
  while (unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof(buf));
    out += (out.empty() ? "" : "; ") + std::string(buf);
  }
  return out;
}

size_t tls_pending(const Socket& s) {
  if (s.tls() == nullptr)
    return 0;
  // Decrypted bytes, or (read-ahead) raw ones not yet processed.
  return SSL_pending(s.tls()) > 0 || SSL_has_pending(s.tls()) == 1 ? 1 : 0;
}

namespace {

iovec one_piece(const void* data, uint64_t n) {
  return iovec{const_cast<void*>(data), n};
}

}  // namespace

Status send_all(const Socket& s, const void* data, uint64_t n, Deadline deadline,
                const std::string& what, std::chrono::milliseconds stall) {
  const iovec piece = one_piece(data, n);
  auto moved = move_all(s, &piece, 1, deadline, what, true, stall, nullptr);
  return moved.ok() ? Status{} : Status(moved.error());
}

Status recv_all(const Socket& s, void* data, uint64_t n, Deadline deadline, const std::string& what,
                std::chrono::milliseconds stall) {
  const iovec piece = one_piece(data, n);
  auto moved = move_all(s, &piece, 1, deadline, what, false, stall, nullptr);
  return moved.ok() ? Status{} : Status(moved.error());
}

Result<uint64_t> move_pieces(const Socket& s, const iovec* pieces, size_t count, bool sending,
                             Deadline deadline, const std::string& what,
                             std::chrono::milliseconds stall, const std::atomic<bool>* stop) {
  return move_all(s, pieces, count, deadline, what, sending, stall, stop);
}

bool peer_spoke_or_hung_up(const Socket& s) {
  pollfd p{s.fd(), POLLIN | POLLRDHUP, 0};
  int r;
  do {
    r = ::poll(&p, 1, 0);
  } while (r < 0 && errno == EINTR);
  return r > 0 && (p.revents & (POLLIN | POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
}

Status await_hang_up(const Socket& s, Deadline deadline, const std::string& what) {
  uint8_t sink[4096];
  for (;;) {
    const ssize_t got = ::recv(s.fd(), sink, sizeof(sink), MSG_DONTWAIT);
    if (got == 0 || (got < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
      detail::hang_up_seen();
      return {};  // closed or reset: the peer is done with the connection
    }
    if (got > 0)
      continue;
    const auto left =
        std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0)
      return Error(ErrorCode::kTimeout, what + ": the peer did not close the connection in time");
    pollfd p{s.fd(), POLLIN | POLLRDHUP, 0};
    (void)::poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 1000)));
  }
}

Result<uint64_t> move_until_stopped(const Socket& s, void* data, uint64_t n, bool sending,
                                    Deadline deadline, const std::string& what,
                                    std::chrono::milliseconds stall,
                                    const std::atomic<bool>& stop) {
  const iovec piece = one_piece(data, n);
  return move_all(s, &piece, 1, deadline, what, sending, stall, &stop);
}

AcceptStep accept_step(const Socket& listener, Socket* out, uint32_t* ip) {
  sockaddr_in peer{};
  socklen_t len = sizeof(peer);
  const int fd = ::accept4(listener.fd(), reinterpret_cast<sockaddr*>(&peer), &len,
                           SOCK_CLOEXEC | SOCK_NONBLOCK);
  if (fd < 0) {
    if (errno == EINTR || errno == ECONNABORTED)
      return AcceptStep::kRetry;
    if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
      return AcceptStep::kOutOfResources;
    return AcceptStep::kDrained;
  }
  *out = Socket(fd);
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  *ip = peer.sin_family == AF_INET ? ntohl(peer.sin_addr.s_addr) : 0;
  return AcceptStep::kAccepted;
}

void pause_listener(int epoll_fd, int listener_fd) {
  epoll_event ev{};
  ev.events = 0;
  ev.data.fd = listener_fd;
  (void)::epoll_ctl(epoll_fd, EPOLL_CTL_MOD, listener_fd, &ev);
}

}  // namespace caf_rdma
