// TLS handshakes of incoming connections before anyone else sees them (see tls_acceptor.h).
#include "components/tls_acceptor.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <system_error>
#include <vector>

namespace caf_rdma {

namespace {

Error errno_error(const std::string& what, int err) {
  return Error(ErrorCode::kInternal, what + ": " + errno_string(err));
}

}  // namespace

Result<std::unique_ptr<TlsAcceptor>> TlsAcceptor::start(const std::string& host, uint16_t port,
                                                        TlsContext tls, Limits limits) {
  const std::string where = host + ":" + std::to_string(port);
  if (!tls)
    return Error(ErrorCode::kInvalidArgument, "TLS listener on " + where + " without a context");
  if (limits.max_pending == 0 || limits.max_pending_per_host == 0 || limits.max_ready == 0 ||
      limits.handshake_timeout.count() <= 0)
    return Error(ErrorCode::kInvalidArgument,
                 "TLS listener on " + where + ": limits and handshake_timeout must be > 0");
  auto ip = resolve_ipv4(host);
  if (!ip.ok())
    return ip.error().with_context("TLS listener on " + where);
  auto listener = listen_tcp(*ip, port);
  if (!listener.ok())
    return listener.error().with_context("TLS listener on " + where);
  CAF_RDMA_ASSIGN_OR_RETURN(uint16_t bound, local_port(*listener));
  std::unique_ptr<TlsAcceptor> acceptor(
      new TlsAcceptor(host, std::move(*listener), bound, std::move(tls), limits));
  CAF_RDMA_RETURN_IF_ERROR(acceptor->start_thread());
  return acceptor;
}

TlsAcceptor::TlsAcceptor(std::string host, Socket listener, uint16_t port, TlsContext tls,
                         Limits limits)
    : host_(std::move(host)),
      listener_(std::move(listener)),
      port_(port),
      tls_(std::move(tls)),
      limits_(limits),
      admission_(limits.max_pending, limits.max_pending_per_host) {}

Status TlsAcceptor::start_thread() {
  const std::string where = "TLS listener on " + host_ + ":" + std::to_string(port_);
  epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
  if (epoll_fd_ < 0)
    return errno_error(where + ": epoll_create1", errno);
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0)
    return errno_error(where + ": pipe", errno);
  stop_read_ = p[0];
  stop_write_ = p[1];
  ready_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK | EFD_SEMAPHORE);
  if (ready_fd_ < 0)
    return errno_error(where + ": eventfd", errno);
  for (int fd : {listener_.fd(), stop_read_}) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0)
      return errno_error(where + ": epoll_ctl", errno);
  }
  try {
    events_ = std::thread([this] { event_loop(); });
  } catch (const std::system_error& e) {
    return Error(ErrorCode::kResourceExhausted, where + ": cannot start its thread: " + e.what());
  }
  return {};
}

TlsAcceptor::~TlsAcceptor() {
  if (stop_write_ >= 0) {
    char b = 1;
    (void)!::write(stop_write_, &b, 1);
  }
  if (events_.joinable())
    events_.join();
  pending_.clear();
  ready_.clear();
  for (int fd : {epoll_fd_, stop_read_, stop_write_, ready_fd_})
    if (fd >= 0)
      ::close(fd);
}

Socket TlsAcceptor::take() {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t one = 0;
  // Pushes write their count after the connection is queued: a count read means one is there.
  if (::read(ready_fd_, &one, sizeof(one)) != sizeof(one) || ready_.empty())
    return Socket{};
  Socket s = std::move(ready_.front());
  ready_.pop_front();
  return s;
}

size_t TlsAcceptor::handshaking() const {
  std::lock_guard<std::mutex> lock(mu_);
  return handshaking_;
}

void TlsAcceptor::close_pending(int fd) {
  auto it = pending_.find(fd);
  if (it == pending_.end())
    return;
  (void)::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
  admission_.remove(fd);
  pending_.erase(it);  // closes the socket (and frees its session)
  std::lock_guard<std::mutex> lock(mu_);
  handshaking_ = pending_.size();
}

std::atomic<uint64_t>& TlsAcceptor::process_wakeups() {
  static std::atomic<uint64_t> n{0};
  return n;
}

uint64_t TlsAcceptor::wakeups_in_process() {
  return process_wakeups().load(std::memory_order_relaxed);
}

void TlsAcceptor::event_loop() {
  bool accepting = true;
  Deadline resume_at{};
  epoll_event events[64];
  for (;;) {
    // Wake for the earliest handshake deadline (or the end of an accept pause).
    auto now = std::chrono::steady_clock::now();
    Deadline wake = now + std::chrono::seconds(10);
    for (const auto& [fd, p] : pending_)
      wake = std::min(wake, p.deadline);
    if (!accepting)
      wake = std::min(wake, resume_at);
    auto wait_ms = std::chrono::duration_cast<std::chrono::milliseconds>(wake - now).count() + 1;
    int n = ::epoll_wait(epoll_fd_, events, 64, static_cast<int>(std::max<int64_t>(wait_ms, 0)));
    process_wakeups().fetch_add(1, std::memory_order_relaxed);
    if (n < 0 && errno != EINTR)
      return;  // epoll broke: no more connections are accepted
    now = std::chrono::steady_clock::now();
    for (int i = 0; i < std::max(n, 0); ++i) {
      int fd = events[i].data.fd;
      if (fd == stop_read_)
        return;
      if (fd == listener_.fd())
        accept_all(now);
      else
        step(fd);
    }
    // Handshakes not completed in time are closed (invariant 3).
    std::vector<int> late;
    for (const auto& [fd, p] : pending_)
      if (p.deadline <= now)
        late.push_back(fd);
    for (int fd : late)
      close_pending(fd);
    if (listener_paused_) {
      listener_paused_ = false;
      accepting = false;
      resume_at = now + limits_.accept_backoff;
    } else if (!accepting && now >= resume_at) {
      epoll_event ev{};
      ev.events = EPOLLIN;
      ev.data.fd = listener_.fd();
      accepting = ::epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, listener_.fd(), &ev) == 0;
      if (!accepting)
        resume_at = now + limits_.accept_backoff;
    }
  }
}

void TlsAcceptor::accept_all(Deadline now) {
  for (int n = 0; n < 64; ++n) {
    Socket s;
    uint32_t ip = 0;
    switch (accept_step(listener_, &s, &ip)) {
      case AcceptStep::kRetry:
        continue;
      case AcceptStep::kOutOfResources:
        // Listening resumes after a moment (event_loop).
        pause_listener(epoll_fd_, listener_.fd());
        listener_paused_ = true;
        return;
      case AcceptStep::kDrained:
        return;
      case AcceptStep::kAccepted:
        break;
    }
    const int fd = s.fd();
    // Invariant 3: a newcomer beyond the budget makes room (AdmissionQueue invariant 1).
    if (const int victim = admission_.room_for(ip); victim >= 0)
      close_pending(victim);
    if (!admission_.fits(ip))
      continue;  // no room could be made: closed at once (s goes out of scope)
    if (!begin_tls_accept(s, tls_).ok())
      continue;  // closed at once
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP;
    ev.data.fd = fd;
    if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0)
      continue;
    admission_.add(fd, ip);
    pending_.emplace(fd, Pending{std::move(s), ip, now + limits_.handshake_timeout});
    // The client may have written its hello with its connect: try at once.
    step(fd);
  }
  std::lock_guard<std::mutex> lock(mu_);
  handshaking_ = pending_.size();
}

void TlsAcceptor::step(int fd) {
  auto it = pending_.find(fd);
  if (it == pending_.end())
    return;
  auto done = tls_accept_step(it->second.socket);
  if (!done.ok())
    return close_pending(fd);  // no certificate of the cluster, not TLS, or closed
  if (!*done)
    return;  // more of the handshake later (or its deadline closes it)
  Socket s = std::move(it->second.socket);
  close_pending(fd);  // only the (now empty) entry: the socket lives on in `s`
  std::lock_guard<std::mutex> lock(mu_);
  if (ready_.size() >= limits_.max_ready)
    return;  // the consumer is behind: closed (invariant 4)
  ready_.push_back(std::move(s));
  const uint64_t one = 1;
  (void)!::write(ready_fd_, &one, sizeof(one));
}

}  // namespace caf_rdma
