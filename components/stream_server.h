// The owner's side of the fallback's stream channel: a TCP listener whose connections move the
// bytes of granted ranges straight between the socket and the registered buffer (no copy in
// user space; CAF carries only the grant). No CAF here: the manager grants, and learns through
// the `done` callback (called on a worker thread) when a claimed grant is finished.
//
// Invariants (what a client that is not honest can make it hold):
//  1. No thread per connection: one event thread (epoll) accepts connections, reads request
//     headers and claims their grants without blocking; a connection gets one of `workers`
//     threads only with a claimed grant, and only for that grant's transfer (bounded by the
//     grant's deadline). A request naming no grant is answered (without blocking) and closed.
//  2. A connection must deliver a complete request within `header_timeout` of connecting or of
//     the end of its previous transfer, else it is closed: silent, slow or idle connections
//     hold one fd for at most that long.
//  3. At most `max_connections` connections, `max_per_host` from one IPv4 address (all local
//     processes count as 127.0.0.1); more are closed at once. At most 64 accepts per wake-up. When
//     accept fails for want of fds or memory (EMFILE, ENFILE, ENOBUFS, ENOMEM) the listener pauses
//     `accept_backoff` and resumes: it never stops for good.
//  4. Grant tokens come from getrandom (components/secure_random.h): a client cannot predict
//     one from those it saw. A token is claimed once; a claimed grant's `done` runs exactly
//     once, after the last byte of its memory was touched.
//  5. With a TLS context (nodes speaking TLS) every connection completes a TLS handshake in
//     which the client shows a certificate the CA file vouches for before its request is read;
//     the handshake runs in the event thread without blocking, within `header_timeout`, and a
//     client that fails it is closed. The bytes then travel encrypted.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "components/socket_io.h"
#include "components/stream_protocol.h"

namespace caf_rdma {

class StreamServer {
public:
  /// Called once per claimed grant: its token, ok with the bytes moved, or why it failed.
  using DoneFn = std::function<void(uint64_t token, Status, uint64_t bytes)>;

  struct Limits {
    std::chrono::milliseconds header_timeout{30000};
    size_t max_connections = 1024;
    size_t max_per_host = 256;
    size_t workers = 4;
    std::chrono::milliseconds accept_backoff{100};
  };

  /// Listens on host (IPv4), port chosen by the kernel; starts the event thread and the
  /// workers. Errors name host and errno (or the thread that could not start).
  static Result<std::unique_ptr<StreamServer>> start(const std::string& host);
  static Result<std::unique_ptr<StreamServer>> start(const std::string& host, Limits limits);
  /// With `tls`: every connection is TLS (invariant 5).
  static Result<std::unique_ptr<StreamServer>> start(const std::string& host, Limits limits,
                                                     TlsContext tls);

  /// Stops accepting, wakes and joins every thread (transfers in progress fail).
  ~StreamServer();

  StreamServer(const StreamServer&) = delete;
  StreamServer& operator=(const StreamServer&) = delete;

  const std::string& host() const { return host_; }
  uint16_t port() const { return port_; }

  /// Allows one client to move `length` bytes into or out of [addr, addr + length) before the
  /// deadline. The memory must stay valid until `done` is called or `revoke` returns true.
  /// Returns the grant's token (never 0).
  uint64_t grant(uint8_t* addr, uint64_t length, StreamDirection direction, Deadline deadline,
                 DoneFn done);
  /// Withdraws a grant no client has claimed yet: true if it was unclaimed (its `done` will not
  /// be called); false if a client claimed it (its `done` will be, or was, called).
  bool revoke(uint64_t token);
  /// Grants not claimed yet.
  size_t pending_grants() const;
  /// Connections open now (idle, reading a header, or transferring).
  size_t connections() const;

private:
  struct Grant {
    uint8_t* addr = nullptr;
    uint64_t length = 0;
    StreamDirection direction = StreamDirection::kIntoOwner;
    Deadline deadline{};
    DoneFn done;
  };
  struct Connection {
    Socket socket;
    uint32_t peer_ip = 0;
    uint8_t header[kRequestBytes] = {};
    size_t got = 0;
    Deadline header_deadline;
    bool handshaking = false;  ///< TLS: its handshake is not complete yet
    bool busy = false;         ///< a worker has it (not in epoll)
    StreamRequest request;
    Grant grant;  ///< claimed by `request` (valid while busy)
  };

  StreamServer(std::string host, Socket listener, uint16_t port, Limits limits, TlsContext tls);
  Status start_threads();
  void event_loop();
  void accept_all(Deadline now);
  /// Reads what is there of c's header; false when c is to be closed.
  bool read_header(const std::shared_ptr<Connection>& c);
  void close_locked(int fd);
  void work();
  /// Moves the bytes of c's claimed grant; false when the connection can no longer be used.
  bool serve(Connection& c);

  const std::string host_;
  Socket listener_;
  const uint16_t port_;
  const Limits limits_;
  const TlsContext tls_;  ///< null: plain TCP
  int epoll_fd_ = -1;
  int stop_read_ = -1;
  int stop_write_ = -1;
  std::thread events_;
  std::vector<std::thread> workers_;
  mutable std::mutex mu_;
  std::condition_variable ready_cv_;
  bool stopping_ = false;
  bool listener_paused_ = false;  ///< accept_all ran out of fds: event_loop resumes it later
  std::unordered_map<uint64_t, Grant> grants_;
  std::map<int, std::shared_ptr<Connection>> connections_;  ///< by fd
  std::map<uint32_t, size_t> per_host_;
  std::deque<std::shared_ptr<Connection>> ready_;  ///< complete headers, for the workers
};

}  // namespace caf_rdma
