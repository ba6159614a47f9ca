// The owner's side of the stream channel (see stream_server.h).
#include "components/stream_server.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace caf_rdma {

Result<std::unique_ptr<StreamServer>> StreamServer::start(const std::string& host) {
  auto listener = listen_tcp(host, 0);
  if (!listener.ok())
    return listener.error().with_context("stream channel");
  CAF_RDMA_ASSIGN_OR_RETURN(uint16_t port, local_port(*listener));
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0)
    return Error(ErrorCode::kInternal, std::string("stream channel: pipe: ") + errno_string(errno));
  return std::unique_ptr<StreamServer>(
      new StreamServer(host, std::move(*listener), port, p[0], p[1]));
}

StreamServer::StreamServer(std::string host, Socket listener, uint16_t port, int stop_read,
                           int stop_write)
    : host_(std::move(host)),
      listener_(std::move(listener)),
      port_(port),
      stop_read_(stop_read),
      stop_write_(stop_write),
      random_(std::random_device{}()) {
  acceptor_ = std::thread([this] { accept_loop(); });
}

StreamServer::~StreamServer() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    for (auto& c : connections_)
      c.socket.shutdown_both();
  }
  char b = 1;
  (void)!::write(stop_write_, &b, 1);
  acceptor_.join();
  // No new connections now; the shut-down ones end their I/O at once.
  for (auto& c : connections_)
    if (c.thread.joinable())
      c.thread.join();
  ::close(stop_read_);
  ::close(stop_write_);
}

uint64_t StreamServer::grant(uint8_t* addr, uint64_t length, StreamDirection direction,
                             Deadline deadline, DoneFn done) {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t token = 0;
  while (token == 0 || grants_.count(token) != 0)
    token = random_();
  grants_.emplace(token, Grant{addr, length, direction, deadline, std::move(done)});
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

void StreamServer::accept_loop() {
  for (;;) {
    auto s = accept_tcp(listener_, stop_read_);
    if (!s.ok() || !s->valid())
      return;  // stopping (or the listener broke: grants then expire at their owners)
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_)
      return;
    // Reap connections whose threads have ended.
    for (auto it = connections_.begin(); it != connections_.end();) {
      if (it->finished) {
        it->thread.join();
        it = connections_.erase(it);
      } else {
        ++it;
      }
    }
    connections_.emplace_back();
    Connection* c = &connections_.back();
    c->socket = std::move(*s);
    c->thread = std::thread([this, c] { serve(c); });
  }
}

void StreamServer::serve(Connection* c) {
  while (serve_one(c->socket)) {
  }
  std::lock_guard<std::mutex> lock(mu_);
  c->socket.close();  // the client sees the end at once
  c->finished = true;
}

bool StreamServer::serve_one(const Socket& s) {
  // An idle connection waits without a deadline: the client reuses it, and shutdown wakes it.
  auto req = read_request(s, kNoDeadline);
  const Deadline io_limit = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  if (!req.ok()) {
    if (req.error().code() == ErrorCode::kInvalidArgument)  // garbage: say why, then hang up
      (void)write_status(s, req.error(), io_limit);
    return false;
  }
  Grant g;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = grants_.find(req->token);
    if (it == grants_.end()) {
      // Nothing was claimed: the connection stays usable.
      return write_status(
                 s,
                 Error(ErrorCode::kNotFound,
                       "stream grant " + std::to_string(req->token) + " is unknown to " + host_ +
                           ":" + std::to_string(port_) + " (expired, used or never made)"),
                 io_limit)
          .ok();
    }
    g = std::move(it->second);
    grants_.erase(it);
  }
  Status verdict;
  if (req->direction != g.direction || req->length != g.length)
    verdict = Error(ErrorCode::kInvalidArgument,
                    "stream request " + std::string(to_string(req->direction)) + " of " +
                        std::to_string(req->length) + " bytes does not match its grant (" +
                        to_string(g.direction) + ", " + std::to_string(g.length) + " bytes)");
  else if (std::chrono::steady_clock::now() >= g.deadline)
    verdict = Error(ErrorCode::kTimeout, "stream grant of " + std::to_string(g.length) +
                                             " bytes was claimed after its deadline");
  if (!verdict.ok()) {
    g.done(verdict, 0);
    return write_status(s, verdict, io_limit).ok();
  }
  Status st = write_status(s, Status{}, g.deadline);
  if (st.ok()) {
    if (g.direction == StreamDirection::kIntoOwner) {
      st = recv_all(s, g.addr, g.length, g.deadline, "stream data into the owner");
      if (st.ok())
        st = write_status(s, Status{}, g.deadline);
    } else {
      st = send_all(s, g.addr, g.length, g.deadline, "stream data out of the owner");
    }
  }
  // The memory is not touched after this point: the owner may release it.
  g.done(st, st.ok() ? g.length : 0);
  return st.ok();
}

}  // namespace caf_rdma
