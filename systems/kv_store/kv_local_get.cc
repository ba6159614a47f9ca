#include "systems/kv_store/kv_local_get.h"

#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "components/cross_memory.h"
#include "components/same_host.h"
#include "components/stream_protocol.h"

namespace caf_rdma::kv {

namespace {

constexpr uint32_t kMagic = 0x3147564b;  // "KVG1" little-endian
constexpr size_t kRequestHead = 24;      // magic, key length, capacity, address
constexpr size_t kAnswerTail = 12;       // how, length (after a success's status)
/// Invariant 2: the send buffer takes the largest in-band answer (status, tail, value) whole.
constexpr int kSendBuffer = static_cast<int>(2 * (kInlineValueMax + 64));

struct Connection {
  Socket socket;
  pid_t pid = 0;
  uint8_t head[kRequestHead] = {};
  size_t got = 0;  // bytes of the request so far (head, then key)
  std::string key;
  Deadline request_deadline{};
  bool cross_memory_refused = false;  // the kernel said no once: answer kAskCaf at once
};

/// Whether the client closed its end (or the connection broke), without reading from it.
bool peer_gone(const Socket& s) {
  pollfd p{s.fd(), POLLRDHUP, 0};
  return ::poll(&p, 1, 0) != 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
}

void append_tail(std::vector<uint8_t>& out, LocalGetHow how, uint64_t length) {
  uint8_t b[kAnswerTail];
  store_le(b, static_cast<uint32_t>(how), 4);
  store_le(b + 4, length, 8);
  out.insert(out.end(), b, b + sizeof(b));
}

}  // namespace

Result<std::unique_ptr<KvGetListener>> KvGetListener::start(std::shared_ptr<KvIndex> index,
                                                            const uint8_t* pool) {
  std::unique_ptr<KvGetListener> l(new KvGetListener());
  l->index_ = std::move(index);
  l->pool_ = pool;
  CAF_RDMA_ASSIGN_OR_RETURN(l->listener_, listen_unix(&l->unix_name_));
  l->stop_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (l->stop_fd_ < 0)
    return Error(ErrorCode::kInternal, "kv GET listener: eventfd: " + errno_string(errno));
  for (size_t i = 0; i < kLoops; ++i) {
    int epoll_fd = ::epoll_create1(EPOLL_CLOEXEC);
    if (epoll_fd < 0)
      return Error(ErrorCode::kInternal, "kv GET listener: epoll_create1: " + errno_string(errno));
    l->epoll_fds_.push_back(epoll_fd);
    // Each new connection wakes one thread (EPOLLEXCLUSIVE); the stop event wakes them all.
    for (int fd : {l->listener_.fd(), l->stop_fd_}) {
      epoll_event ev{};
      ev.events = fd == l->stop_fd_ ? EPOLLIN : EPOLLIN | EPOLLEXCLUSIVE;
      ev.data.fd = fd;
      if (::epoll_ctl(epoll_fd, EPOLL_CTL_ADD, fd, &ev) != 0)
        return Error(ErrorCode::kInternal, "kv GET listener: epoll_ctl: " + errno_string(errno));
    }
  }
  for (int epoll_fd : l->epoll_fds_)
    l->threads_.emplace_back([p = l.get(), epoll_fd] { p->run(epoll_fd); });
  return l;
}

KvGetListener::~KvGetListener() {
  if (!threads_.empty()) {
    uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(stop_fd_, &one, sizeof(one));
    for (auto& t : threads_)
      t.join();
  }
  for (int fd : epoll_fds_)
    ::close(fd);
  if (stop_fd_ >= 0)
    ::close(stop_fd_);
}

void KvGetListener::run(int epoll_fd) {
  std::unordered_map<int, Connection> conns;
  const uid_t uid = ::getuid();
  auto drop = [&](int fd) {
    ::epoll_ctl(epoll_fd, EPOLL_CTL_DEL, fd, nullptr);
    conns.erase(fd);
  };
  // Answers the complete request on `c` (invariants 2-4); false: the connection must close.
  auto serve = [&](Connection& c) {
    const uint64_t capacity = load_le(c.head + 8, 8);
    const uint64_t addr = load_le(c.head + 16, 8);
    std::vector<uint8_t> answer;
    auto block = index_->for_get(c.key, capacity,
                                 "the client's slot has " + std::to_string(capacity) + " bytes");
    if (!block.ok()) {
      append_status(answer, block.error());
      index_->gets++;
      index_->errors++;
    } else {
      const uint64_t length = (*block)->length();
      const uint8_t* at = pool_ + (*block)->offset();
      if (length <= kInlineValueMax) {
        append_status(answer, Status());
        append_tail(answer, LocalGetHow::kInBand, length);
        answer.insert(answer.end(), at, at + length);
        index_->gets++;
      } else {
        // A client that gave up (timed out, or exited: its pid may be another's by now) has
        // closed its end: copy nothing into memory it may have freed (invariant 1).
        if (peer_gone(c.socket))
          return false;
        bool refused = c.cross_memory_refused;
        Status st;
        if (!refused)
          st = cross_memory_copy(c.pid, const_cast<uint8_t*>(at), addr, length, true,
                                 std::chrono::steady_clock::now() + kCopyTimeout,
                                 "kv value " + key_text(c.key), &refused);
        c.cross_memory_refused = refused;
        if (refused) {
          append_status(answer, Status());
          append_tail(answer, LocalGetHow::kAskCaf, length);
          answered_--;  // the store actor answers this one (counted just below)
        } else {
          append_status(answer, st);
          if (st.ok())
            append_tail(answer, LocalGetHow::kCopied, length);
          index_->gets++;
          if (!st.ok())
            index_->errors++;
        }
      }
    }
    answered_++;
    ssize_t n = ::send(c.socket.fd(), answer.data(), answer.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    return n == static_cast<ssize_t>(answer.size());
  };
  // Reads what `c` sent; false: close it.
  auto on_readable = [&](Connection& c) {
    for (;;) {
      const size_t want = c.got < kRequestHead ? kRequestHead : kRequestHead + c.key.size();
      uint8_t* into = c.got < kRequestHead
                          ? c.head + c.got
                          : reinterpret_cast<uint8_t*>(&c.key[c.got - kRequestHead]);
      auto n = recv_some(c.socket, into, want - c.got);
      if (!n.ok())
        return false;
      if (*n == 0)
        return true;
      if (c.got == 0)
        c.request_deadline = std::chrono::steady_clock::now() + kRequestTimeout;
      c.got += *n;
      if (c.got == kRequestHead) {
        if (load_le(c.head, 4) != kMagic)
          return false;
        uint64_t key_bytes = load_le(c.head + 4, 4);
        Status valid = check_key_length(key_bytes);
        if (!valid.ok()) {
          std::vector<uint8_t> answer;
          append_status(answer, valid);
          ::send(c.socket.fd(), answer.data(), answer.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
          return false;  // the key's bytes would follow: nothing more on this connection
        }
        c.key.assign(key_bytes, '\0');
      }
      if (c.got > kRequestHead && c.got == kRequestHead + c.key.size()) {
        if (!serve(c))
          return false;
        c.got = 0;
        c.key.clear();
      }
    }
  };
  std::vector<epoll_event> events(64);
  auto next_sweep = std::chrono::steady_clock::now();
  for (;;) {
    int n = ::epoll_wait(epoll_fd, events.data(), static_cast<int>(events.size()), 1000);
    if (n < 0 && errno != EINTR)
      return;
    for (int i = 0; i < n; ++i) {
      const int fd = events[i].data.fd;
      if (fd == stop_fd_)
        return;
      if (fd == listener_.fd()) {
        for (int k = 0; k < 64; ++k) {
          int cfd = ::accept4(listener_.fd(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
          if (cfd < 0)
            break;
          Socket s(cfd);
          auto who = peer_credentials(s);
          if (!who.ok() || who->uid != uid || conns.size() >= kMaxConnections / kLoops)
            continue;  // invariants 1 and 2: closed unserved
          ::setsockopt(cfd, SOL_SOCKET, SO_SNDBUF, &kSendBuffer, sizeof(kSendBuffer));
          epoll_event ev{};
          ev.events = EPOLLIN;
          ev.data.fd = cfd;
          if (::epoll_ctl(epoll_fd, EPOLL_CTL_ADD, cfd, &ev) != 0)
            continue;
          Connection& c = conns[cfd];
          c.socket = std::move(s);
          c.pid = who->pid;
        }
        continue;
      }
      auto it = conns.find(fd);
      if (it != conns.end() && !on_readable(it->second))
        drop(fd);
    }
    const auto now = std::chrono::steady_clock::now();
    if (now < next_sweep)
      continue;
    next_sweep = now + std::chrono::milliseconds(100);
    for (auto it = conns.begin(); it != conns.end();) {
      if (it->second.got > 0 && it->second.request_deadline < now) {
        ::epoll_ctl(epoll_fd, EPOLL_CTL_DEL, it->first, nullptr);
        it = conns.erase(it);
      } else {
        ++it;
      }
    }
  }
}

std::optional<Result<ValueInfo>> local_get(const Socket& s, const std::string& key, uint8_t* slot,
                                           uint64_t capacity, Deadline deadline,
                                           const std::string& server, bool* broken) {
  const std::string what = "get " + key_text(key) + ": kv_server at " + server;
  // Until its answer is read, the listener may still copy into the slot by cross-memory attach
  // (only values above kInlineValueMax, and only where the slot could hold one): a timeout then
  // leaves the slot in doubt (kNoAnswer, KvSession::put). Later, or with a smaller slot, no.
  bool may_copy = capacity > kInlineValueMax;
  auto failed = [&](const Error& e) -> Result<ValueInfo> {
    *broken = true;
    if (e.code() == ErrorCode::kTimeout)
      return Error(ErrorCode::kTimeout,
                   what + (may_copy ? std::string(" ") + kNoAnswer + " in time (same-host GET)"
                                    : " (same-host GET): timed out"));
    return Error(e.code(), what + " (same-host GET): " + e.message());
  };
  // The listener closes a connection whose key it will not read: the session's text instead.
  Status valid = check_key_length(key.size());
  if (!valid.ok())
    return Result<ValueInfo>(valid.error());
  std::vector<uint8_t> request(kRequestHead + key.size());
  store_le(request.data(), kMagic, 4);
  store_le(request.data() + 4, key.size(), 4);
  store_le(request.data() + 8, capacity, 8);
  store_le(request.data() + 16, reinterpret_cast<uintptr_t>(slot), 8);
  std::copy(key.begin(), key.end(), request.begin() + kRequestHead);
  Status sent = send_all(s, request.data(), request.size(), deadline, what);
  if (!sent.ok())
    return failed(sent.error());
  auto st = read_status(s, deadline, what);
  if (!st.ok())
    return failed(st.error());
  may_copy = false;  // the answer goes out after the copy ended (invariant 3)
  if (!st->ok())
    return Result<ValueInfo>(st->error());
  uint8_t tail[kAnswerTail];
  Status got = recv_all(s, tail, sizeof(tail), deadline, what);
  if (!got.ok())
    return failed(got.error());
  const auto how = static_cast<LocalGetHow>(load_le(tail, 4));
  const uint64_t length = load_le(tail + 4, 8);
  if (how == LocalGetHow::kAskCaf)
    return std::nullopt;
  if (length > capacity || (how != LocalGetHow::kInBand && how != LocalGetHow::kCopied)) {
    *broken = true;
    return Error(ErrorCode::kInternal, what + " answered a value of " + std::to_string(length) +
                                           " bytes for a slot of " + std::to_string(capacity) +
                                           " (how " + std::to_string(static_cast<uint32_t>(how)) +
                                           ")");
  }
  if (how == LocalGetHow::kInBand && length > 0) {
    got = recv_all(s, slot, length, deadline, what);
    if (!got.ok())
      return failed(got.error());
  }
  return ValueInfo{length, how == LocalGetHow::kInBand ? kPathInline : kPathSameHost, {}};
}

}  // namespace caf_rdma::kv
