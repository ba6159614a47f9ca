// The owner's side of the stream channel (see stream_server.h).
#include "components/stream_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <system_error>

#include "components/same_host.h"
#include "components/secure_random.h"
#include "components/withdrawal.h"

namespace caf_rdma {

namespace {

/// Invariant 5: connections accepted per wake-up of the event thread.
constexpr int kAcceptsPerWake = 64;

Error errno_error(const std::string& what, int err) {
  return Error(ErrorCode::kInternal, "stream channel: " + what + ": " + errno_string(err));
}

/// Decrements a per-address count, dropping the address at 0.
void count_down(std::map<uint32_t, size_t>& per_host, uint32_t ip) {
  auto h = per_host.find(ip);
  if (h != per_host.end() && --h->second == 0)
    per_host.erase(h);
}

}  // namespace

Result<std::unique_ptr<StreamServer>> StreamServer::start(const std::string& host) {
  return start(host, Limits{});
}

Result<std::unique_ptr<StreamServer>> StreamServer::start(const std::string& host, Limits limits) {
  return start(host, limits, nullptr);
}

Result<std::unique_ptr<StreamServer>> StreamServer::start(const std::string& host, Limits limits,
                                                          TlsContext tls) {
  if (limits.workers == 0 || limits.max_connections == 0 || limits.max_per_host == 0 ||
      limits.max_unauthenticated == 0 || limits.max_unauthenticated_per_host == 0 ||
      limits.header_timeout.count() <= 0 || limits.auth_timeout.count() <= 0 ||
      limits.priority_aging.count() <= 0 || limits.priority_aging > kMaxAging)
    return Error(ErrorCode::kInvalidArgument,
                 "stream channel: workers, connection limits (max_connections " +
                     std::to_string(limits.max_connections) + ", max_per_host " +
                     std::to_string(limits.max_per_host) + ", max_unauthenticated " +
                     std::to_string(limits.max_unauthenticated) +
                     ", max_unauthenticated_per_host " +
                     std::to_string(limits.max_unauthenticated_per_host) +
                     "), header_timeout and auth_timeout must be > 0, priority_aging in 1 ns.." +
                     std::to_string(kMaxAging.count()) + " ms (" +
                     std::to_string(limits.priority_aging.count()) + " ns)");
  auto listener = listen_tcp(host, 0);
  if (!listener.ok())
    return listener.error().with_context("stream channel");
  CAF_RDMA_ASSIGN_OR_RETURN(uint16_t port, local_port(*listener));
  Socket unix_listener;
  std::string unix_name;
  if (limits.same_host) {
    auto u = listen_unix(&unix_name);
    if (!u.ok())
      return u.error().with_context("stream channel");
    unix_listener = std::move(*u);
  }
  std::unique_ptr<StreamServer> server(new StreamServer(host, std::move(*listener), port, limits,
                                                        std::move(tls), std::move(unix_listener),
                                                        std::move(unix_name)));
  CAF_RDMA_RETURN_IF_ERROR(server->start_threads());
  return server;
}

StreamServer::StreamServer(std::string host, Socket listener, uint16_t port, Limits limits,
                           TlsContext tls, Socket unix_listener, std::string unix_name)
    : host_(std::move(host)),
      listener_(std::move(listener)),
      port_(port),
      unix_listener_(std::move(unix_listener)),
      unix_name_(std::move(unix_name)),
      limits_(limits),
      tls_(std::move(tls)),
      unauthenticated_(limits.max_unauthenticated, limits.max_unauthenticated_per_host),
      ready_(limits.priority_aging) {}

Status StreamServer::start_threads() {
  epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
  if (epoll_fd_ < 0)
    return errno_error("epoll_create1", errno);
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0)
    return errno_error("pipe", errno);
  stop_read_ = p[0];
  stop_write_ = p[1];
  for (int fd : {listener_.fd(), stop_read_, unix_listener_.fd()}) {
    if (fd < 0)
      continue;  // no same-host endpoint
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0)
      return errno_error("epoll_ctl", errno);
  }
  try {
    events_ = std::thread([this] { event_loop(); });
    for (size_t i = 0; i < limits_.workers; ++i)
      workers_.emplace_back([this] { work(); });
  } catch (const std::system_error& e) {
    // The destructor stops and joins what did start.
    return Error(ErrorCode::kResourceExhausted,
                 std::string("stream channel: cannot start its threads: ") + e.what());
  }
  return {};
}

StreamServer::~StreamServer() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    for (auto& [fd, c] : connections_)
      if (c->busy)
        c->socket.shutdown_both();  // its worker's I/O ends at once
  }
  ready_cv_.notify_all();
  if (stop_write_ >= 0) {
    char b = 1;
    (void)!::write(stop_write_, &b, 1);
  }
  if (events_.joinable())
    events_.join();
  for (auto& w : workers_)
    w.join();
  // Claimed grants no worker took: their holds end here (invariant 6: `done` exactly once).
  ready_.for_each([](const std::shared_ptr<Connection>& c) {
    if (c->grant.done)
      c->grant.done(c->request.token,
                    Error(ErrorCode::kPeerUnavailable, "the stream server stopped"), 0);
  });
  connections_.clear();
  ready_.clear();
  for (int fd : {epoll_fd_, stop_read_, stop_write_})
    if (fd >= 0)
      ::close(fd);
}

uint64_t StreamServer::grant(uint8_t* addr, uint64_t length, StreamDirection direction,
                             Deadline deadline, DoneFn done, Withdrawal withdrawal,
                             StagedMemory staged) {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t token = 0;
  while (token == 0 || grants_.count(token) != 0)
    token = secure_random_u64();
  grants_.emplace(token, Grant{addr, length, direction, deadline, std::move(done),
                               std::move(withdrawal), std::move(staged)});
  return token;
}

bool StreamServer::revoke(uint64_t token) {
  std::lock_guard<std::mutex> lock(mu_);
  return grants_.erase(token) == 1;
}

size_t StreamServer::pending_grants() const {
  std::lock_guard<std::mutex> lock(mu_);
  return grants_.size();
}

size_t StreamServer::connections() const {
  std::lock_guard<std::mutex> lock(mu_);
  return connections_.size();
}

size_t StreamServer::authenticated_connections() const {
  std::lock_guard<std::mutex> lock(mu_);
  return authenticated_;
}

uint64_t StreamServer::accepted() const {
  std::lock_guard<std::mutex> lock(mu_);
  return accepted_;
}

std::string StreamServer::host_id() const {
  return unix_name_.empty() ? std::string() : host_identity();
}

size_t StreamServer::waiting_for_worker() const {
  std::lock_guard<std::mutex> lock(mu_);
  return ready_.size();
}

uint64_t StreamServer::evicted() const {
  std::lock_guard<std::mutex> lock(mu_);
  return evicted_;
}

void StreamServer::close_locked(int fd) {
  auto it = connections_.find(fd);
  if (it == connections_.end())
    return;
  const Connection& c = *it->second;
  (void)::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
  if (c.authenticated) {
    --authenticated_;
    count_down(authenticated_per_host_, c.peer_ip);
  } else {
    unauthenticated_.remove(fd);
  }
  connections_.erase(it);  // closes the socket
}

void StreamServer::make_room_locked(uint32_t ip) {
  // Invariant 3: the address's own share first, then the total (AdmissionQueue invariant 1).
  if (const int fd = unauthenticated_.room_for(ip); fd >= 0) {
    ++evicted_;
    close_locked(fd);
  }
}

bool StreamServer::over_authenticated_slots_locked(uint32_t ip) const {
  auto h = authenticated_per_host_.find(ip);
  return authenticated_ > limits_.max_connections ||
         (h != authenticated_per_host_.end() && h->second > limits_.max_per_host);
}

void StreamServer::authenticate_locked(Connection& c) {
  unauthenticated_.remove(c.socket.fd());
  c.authenticated = true;
  c.seq = next_seq_++;
  ++authenticated_;
  ++authenticated_per_host_[c.peer_ip];
  if (!over_authenticated_slots_locked(c.peer_ip))
    return;
  // Invariant 4: the least recently used idle authenticated connection gives up its slot (one
  // of c's address when that address is over its share). None idle: c is closed after its
  // transfer.
  auto h = authenticated_per_host_.find(c.peer_ip);
  const bool own = h->second > limits_.max_per_host;
  int victim = -1;
  uint64_t oldest = std::numeric_limits<uint64_t>::max();
  for (const auto& [fd, other] : connections_)
    if (other->authenticated && !other->busy && other.get() != &c &&
        (!own || other->peer_ip == c.peer_ip) && other->seq < oldest) {
      oldest = other->seq;
      victim = fd;
    }
  if (victim >= 0)
    close_locked(victim);
  else
    c.over_slots = true;
}

void StreamServer::event_loop() {
  bool accepting = true;
  Deadline resume_at{};
  epoll_event events[64];
  for (;;) {
    // Wake for the earliest header deadline (or the end of an accept pause), at least once a
    // second.
    auto now = std::chrono::steady_clock::now();
    Deadline wake = now + std::chrono::seconds(1);
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (const auto& [fd, c] : connections_)
        if (!c->busy)
          wake = std::min(wake, c->header_deadline);
    }
    if (!accepting)
      wake = std::min(wake, resume_at);
    auto wait_ms = std::chrono::duration_cast<std::chrono::milliseconds>(wake - now).count() + 1;
    int n = ::epoll_wait(epoll_fd_, events, 64, static_cast<int>(std::max<int64_t>(wait_ms, 0)));
    if (n < 0 && errno != EINTR)
      return;  // epoll broke: grants then expire at their owners
    now = std::chrono::steady_clock::now();
    // Invariant 5: connections that have something to say first, then new ones.
    bool listener_ready = false;
    bool unix_ready = false;
    for (int i = 0; i < std::max(n, 0); ++i) {
      int fd = events[i].data.fd;
      if (fd == stop_read_)
        return;
      if (fd == listener_.fd()) {
        listener_ready = true;
        continue;
      }
      if (unix_listener_.valid() && fd == unix_listener_.fd()) {
        unix_ready = true;
        continue;
      }
      std::shared_ptr<Connection> c;
      {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = connections_.find(fd);
        if (it == connections_.end() || it->second->busy)
          continue;
        c = it->second;
      }
      if (!read_header(c)) {
        std::lock_guard<std::mutex> lock(mu_);
        close_locked(fd);
      }
    }
    if (listener_ready)
      accept_all(now, listener_, false);
    if (unix_ready)
      accept_all(now, unix_listener_, true);
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_)
      return;
    // Connections that did not deliver their request in time are closed (invariants 3, 4).
    std::vector<int> late;
    for (const auto& [fd, c] : connections_)
      if (!c->busy && c->header_deadline <= now)
        late.push_back(fd);
    for (int fd : late)
      close_locked(fd);
    // The listener paused (out of fds or memory): resume when the pause is over.
    if (!accepting && now >= resume_at) {
      accepting = true;
      for (const Socket* l : {&listener_, &unix_listener_}) {
        if (!l->valid())
          continue;
        epoll_event ev{};
        ev.events = EPOLLIN;
        ev.data.fd = l->fd();
        accepting = ::epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, l->fd(), &ev) == 0 && accepting;
      }
      if (!accepting)
        resume_at = now + limits_.accept_backoff;
    }
    // accept_all pauses the listener by clearing its events; it tells us here.
    if (accepting && listener_paused_) {
      listener_paused_ = false;
      accepting = false;
      resume_at = now + limits_.accept_backoff;
    }
  }
}

bool StreamServer::admit_same_host(Socket& s, Connection& c) {
  // Invariant 12: the kernel's word on who connected.
  auto cred = peer_credentials(s);
  Status refusal;
  if (!cred.ok())
    refusal = cred.error();
  else if (cred->uid != ::geteuid())
    refusal =
        Error(ErrorCode::kPermissionDenied,
              kOtherUidRefusal + std::to_string(cred->pid) + " (uid " + std::to_string(cred->uid) +
                  ") at @" + unix_name_ + ": this owner runs as uid " +
                  std::to_string(::geteuid()) + ", and only the same uid is served");
  if (!refusal.ok()) {
    (void)write_status(s, refusal, std::chrono::steady_clock::now());
    return false;
  }
  c.same_host = true;
  c.peer_pid = cred->pid;
  return true;
}

void StreamServer::accept_all(Deadline now, const Socket& listener, bool same_host) {
  // Bounded per wake-up: a connect flood cannot keep this thread from its deadlines.
  for (int n = 0; n < kAcceptsPerWake; ++n) {
    Socket s;
    uint32_t ip = 0;
    switch (accept_step(listener, &s, &ip)) {
      case AcceptStep::kRetry:
        continue;
      case AcceptStep::kOutOfResources: {
        // Listening resumes after a moment (event_loop).
        pause_listener(epoll_fd_, listener.fd());
        std::lock_guard<std::mutex> lock(mu_);
        listener_paused_ = true;
        return;
      }
      case AcceptStep::kDrained:
        return;
      case AcceptStep::kAccepted:
        break;
    }
    const int fd = s.fd();
    auto c = std::make_shared<Connection>();
    c->peer_ip = ip;
    c->header_deadline = now + limits_.auth_timeout;
    if (same_host) {
      // Invariant 11: every local process counts as 127.0.0.1 (invariant 3), and no TLS.
      c->peer_ip = ip = 0x7f000001;
      if (!admit_same_host(s, *c))
        continue;  // closed (invariant 12)
    } else if (tls_) {
      if (!begin_tls_accept(s, tls_).ok())
        continue;  // closed at once
      c->handshaking = true;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_)
        return;
      ++accepted_;
      make_room_locked(ip);
      epoll_event ev{};
      ev.events = EPOLLIN | EPOLLRDHUP;
      ev.data.fd = fd;
      if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0)
        continue;
      c->socket = std::move(s);
      c->seq = next_seq_++;
      unauthenticated_.add(fd, ip);
      connections_.emplace(fd, c);
    }
    // Its request (or TLS hello) is often there already: read it before newer connections can
    // push this one out (invariant 5).
    if (!read_header(c)) {
      std::lock_guard<std::mutex> lock(mu_);
      close_locked(fd);
    }
  }
}

bool StreamServer::read_header(const std::shared_ptr<Connection>& c) {
  // Only the event thread touches a connection that is not busy.
  if (c->handshaking) {
    auto done = tls_accept_step(c->socket);
    if (!done.ok())
      return false;  // no certificate of the cluster, or not TLS: closed
    if (!*done)
      return true;  // more of the handshake later (or the header deadline closes it)
    c->handshaking = false;
    // The request may already sit in the TLS session's buffer: read on at once.
  }
  for (;;) {
    // The magic says how long the request is (stream_protocol.h).
    const size_t need = c->got < 4 ? 4 : request_bytes(c->header);
    if (c->got >= need)
      break;
    auto k = recv_some(c->socket, c->header + c->got, need - c->got);
    if (!k.ok())
      return false;  // closed or broken
    if (*k == 0)
      return true;  // the rest comes later (or the header deadline closes it)
    c->got += *k;
  }
  auto req = parse_request(c->header);
  if (!req.ok()) {
    // Garbage: say why (one non-blocking attempt), then hang up.
    (void)write_status(c->socket, req.error(), std::chrono::steady_clock::now());
    return false;
  }
  // Nothing to claim: say so (one non-blocking attempt) and hang up; a worker is only ever
  // given a claimed grant.
  auto g = claim(*req);
  if (!g.ok()) {
    (void)write_status(c->socket, g.error(), std::chrono::steady_clock::now());
    return false;
  }
  std::lock_guard<std::mutex> lock(mu_);
  hand_to_worker_locked(c, *req, std::move(*g));
  return true;
}

Result<StreamServer::Grant> StreamServer::claim(const StreamRequest& req) {
  Result<Grant> g = req.by_handle ? grant_by_handle(req) : take_grant(req.token);
  // Invariants 11 and 20: a cross-memory copy, or a requester's GPU copy, ends by the
  // requester's deadline too (stream_protocol.h), which only ever shortens the grant's.
  if (g.ok() && (req.cross_memory || req.gpu_copy))
    g->deadline = std::min(g->deadline, from_steady_ns(req.peer_deadline_ns));
  return g;
}

Result<StreamServer::Grant> StreamServer::take_grant(uint64_t token) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = grants_.find(token);
  if (it == grants_.end())
    return unknown_grant(token);
  Grant g = std::move(it->second);
  grants_.erase(it);
  return g;
}

void StreamServer::hand_to_worker_locked(const std::shared_ptr<Connection>& c,
                                         const StreamRequest& req, Grant grant) {
  c->grant = std::move(grant);
  if (!c->authenticated)
    authenticate_locked(*c);
  (void)::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, c->socket.fd(), nullptr);
  c->request = req;
  c->busy = true;
  // Invariant 18: by its request's class, then its grant's deadline.
  ready_.push(req.priority, c->grant.deadline, c);
  ready_cv_.notify_one();
}

bool StreamServer::linger(Connection& c, bool& keep) {
  if (c.socket.tls() != nullptr || c.over_slots)
    return false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Not while another connection waits for a worker, nor while the authenticated slots are
    // full: a lingering connection is busy, and could not give its slot to a newcomer.
    auto h = authenticated_per_host_.find(c.peer_ip);
    if (stopping_ || !ready_.empty() || authenticated_ >= limits_.max_connections ||
        (h != authenticated_per_host_.end() && h->second >= limits_.max_per_host))
      return false;
  }
  pollfd p{c.socket.fd(), POLLIN, 0};
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(kLinger).count();
  const timespec wait{0, static_cast<long>(ns)};
  if (::ppoll(&p, 1, &wait, nullptr) <= 0)
    return false;  // nothing yet: back to the event thread
  // A request started: read all of it (bounded), claim what it names, or say why not and close.
  auto req = read_request(c.socket, std::chrono::steady_clock::now() + kLingerHeader);
  if (!req.ok()) {
    (void)write_status(c.socket, req.error(), std::chrono::steady_clock::now());
    keep = false;
    return false;
  }
  auto g = claim(*req);
  if (!g.ok()) {
    (void)write_status(c.socket, g.error(), std::chrono::steady_clock::now());
    keep = false;
    return false;
  }
  c.request = *req;
  c.grant = std::move(*g);
  return true;
}

Error StreamServer::unknown_grant(uint64_t token) const {
  return Error(ErrorCode::kNotFound, "stream grant " + std::to_string(token) + " is unknown to " +
                                         host_ + ":" + std::to_string(port_) +
                                         " (expired, used or never made)");
}

void StreamServer::set_authorizer(Authorizer authorize) {
  std::lock_guard<std::mutex> lock(mu_);
  authorize_ = std::move(authorize);
}

void StreamServer::set_served(ServedFn served) {
  auto fn = served ? std::make_shared<const ServedFn>(std::move(served)) : nullptr;
  std::lock_guard<std::mutex> lock(mu_);
  served_ = std::move(fn);
}

void StreamServer::account(const Connection& c, Grant& g) {
  std::shared_ptr<const ServedFn> served;
  {
    std::lock_guard<std::mutex> lock(mu_);
    served = served_;
  }
  if (!served || !g.done)
    return;
  Served what{c.same_host, c.peer_ip, g.direction, 0};
  g.done = [done = std::move(g.done), served = std::move(served), what](uint64_t token, Status st,
                                                                        uint64_t bytes) mutable {
    if (st.ok()) {
      what.bytes = bytes;
      (*served)(what);
    }
    done(token, std::move(st), bytes);
  };
}

Result<StreamServer::Grant> StreamServer::grant_by_handle(const StreamRequest& req) {
  Authorizer authorize;
  {
    std::lock_guard<std::mutex> lock(mu_);
    authorize = authorize_;
  }
  if (!authorize)
    return Error(ErrorCode::kNotFound, "stream requests by handle are not served by " + host_ +
                                           ":" + std::to_string(port_));
  CAF_RDMA_ASSIGN_OR_RETURN(HandleGrant h, authorize(req));
  Grant g;
  g.addr = h.addr;
  g.length = req.length;
  g.direction = req.direction;
  g.deadline = std::chrono::steady_clock::now() +
               std::min<std::chrono::milliseconds>(std::chrono::milliseconds(req.handle.timeout_ms),
                                                   std::min(h.max_timeout, kMaxHandleTimeout));
  g.done = [done = std::move(h.done)](uint64_t, Status st, uint64_t bytes) {
    done(std::move(st), bytes);
  };
  g.withdrawal = std::move(h.withdrawal);
  return g;
}

size_t StreamServer::end_withdrawn_waiting() {
  struct Ended {
    uint64_t token;
    uint64_t length;
    DoneFn done;
  };
  std::vector<Ended> ended;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ready_.for_each([&ended](const std::shared_ptr<Connection>& c) {
      Grant& g = c->grant;
      if (!withdrawn(g.withdrawal) || !g.done)
        return;
      ended.push_back({c->request.token, g.length, std::move(g.done)});
      g.done = [](uint64_t, const Status&, uint64_t) {};  // its end was told here
    });
  }
  for (auto& e : ended)  // outside the lock: `done` is the owner's
    e.done(e.token, released_midway_error(0, e.length), 0);
  return ended.size();
}

std::shared_ptr<StreamServer::Connection> StreamServer::next_ready_locked() {
  // Invariant 18's order; invariant 15: one whose address holds its share waits, a later one
  // (of another address) may go first.
  auto c = ready_.take_next_if([this](const std::shared_ptr<Connection>& waiting) {
    auto h = serving_per_host_.find(waiting->peer_ip);
    return h == serving_per_host_.end() || h->second < host_share();
  });
  if (!c)
    return nullptr;
  ++serving_per_host_[(*c)->peer_ip];
  return std::move(*c);
}

void StreamServer::work() {
  for (;;) {
    std::shared_ptr<Connection> c;
    {
      std::unique_lock<std::mutex> lock(mu_);
      ready_cv_.wait(lock,
                     [this, &c] { return stopping_ || (c = next_ready_locked()) != nullptr; });
      if (stopping_)
        return;
    }
    bool keep = serve(*c);
    // Invariant 10: the connection's next request, if it comes at once, is this worker's too.
    while (keep && linger(*c, keep))
      keep = serve(*c);
    std::lock_guard<std::mutex> lock(mu_);
    // Invariant 15: a worker of this address is free; a connection it held back may go now.
    if (auto h = serving_per_host_.find(c->peer_ip);
        h != serving_per_host_.end() && --h->second == 0)
      serving_per_host_.erase(h);
    ready_cv_.notify_all();
    if (stopping_)
      continue;  // the destructor clears the connections
    const int fd = c->socket.fd();
    c->busy = false;
    c->got = 0;
    c->seq = next_seq_++;  // its last use (invariant 4)
    c->header_deadline = std::chrono::steady_clock::now() + limits_.header_timeout;
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP;
    ev.data.fd = fd;
    // A client sends its next request only after the last answer: bytes the TLS session read
    // ahead (epoll would not see them) break the protocol.
    // Beyond the authenticated slots (every other one was busy when it authenticated): closed.
    if (!keep || c->over_slots || tls_pending(c->socket) > 0 ||
        ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0)
      close_locked(fd);
  }
}

}  // namespace caf_rdma
