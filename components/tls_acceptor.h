// TlsAcceptor: the accepting side of TLS between nodes. It listens, runs each connection's TLS
// handshake to completion, and only then hands the connection (socket and TLS session) to its
// consumer: the node's CAF transport (actors/tls_transport.h), which never sees a connection
// that has not proven it belongs to the cluster. No CAF here.
//
// Why a thread of its own: CAF 0.17's OpenSSL module runs the handshake inside its multiplexer
// and, while a peer stays silent, keeps the connection registered for writing (the server's
// BASP handshake is queued) and calls SSL_accept again on every wake-up: 50 silent connections
// took 4.9 s of CPU in 5 s (docs/security.md, "Authenticated nodes").
//
// Invariants (what a client that is not honest can make it hold):
//  1. A connection reaches the consumer only after its TLS handshake completed and the client
//     showed a certificate the context's CA file vouches for (the context decides: see
//     tls_stream_context).
//  2. No thread per connection and no busy polling: one event thread (epoll) accepts and runs
//     every handshake without blocking; a silent connection costs nothing until its deadline.
//  3. A handshake must complete within `handshake_timeout` of the accept, else the connection is
//     closed. At most `max_pending` handshakes at once and `max_pending_per_host` from one IPv4
//     address (all local processes count as 127.0.0.1); a newcomer beyond either makes room: the
//     oldest handshake of its own address if that address is at its share, else the oldest of
//     the address holding the most, is closed (a flood of silent connections shortens the life
//     of its own connections; it cannot keep a member out). At most 64
//     accepts per wake-up. When accept fails for want of fds or memory the listener pauses
//     `accept_backoff` and resumes: it never stops for good.
//  4. Completed connections wait for the consumer in a queue of at most `max_ready` (more are
//     closed); each is announced by one count on ready_fd() (an eventfd in semaphore mode),
//     which take() takes back with the connection.
#pragma once

#include <atomic>

#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>

#include "components/admission_queue.h"
#include "components/socket_io.h"

namespace caf_rdma {

class TlsAcceptor {
public:
  struct Limits {
    std::chrono::milliseconds handshake_timeout{30000};
    size_t max_pending = 1024;
    size_t max_pending_per_host = 256;
    size_t max_ready = 1024;
    std::chrono::milliseconds accept_backoff{100};
  };

  /// Listens on host:port (an IPv4 address or a name resolving to one; port 0: the kernel
  /// picks) and starts the event thread. `tls` must not be null. Errors name host:port.
  static Result<std::unique_ptr<TlsAcceptor>> start(const std::string& host, uint16_t port,
                                                    TlsContext tls, Limits limits);

  /// Stops the event thread (joined) and closes every connection not taken.
  ~TlsAcceptor();

  TlsAcceptor(const TlsAcceptor&) = delete;
  TlsAcceptor& operator=(const TlsAcceptor&) = delete;

  const std::string& host() const { return host_; }
  uint16_t port() const { return port_; }
  /// Readable while a completed connection waits (invariant 4). Owned by this object.
  int ready_fd() const { return ready_fd_; }
  /// One completed connection, TLS session included, with one count of ready_fd() taken; an
  /// invalid Socket when none waits. Thread-safe.
  Socket take();
  /// Connections whose handshake is under way.
  size_t handshaking() const;
  /// Wake-ups of the event threads of every TlsAcceptor of this process so far (invariant 2:
  /// a silent connection wakes none before its deadline; tests count them).
  static uint64_t wakeups_in_process();

private:
  static std::atomic<uint64_t>& process_wakeups();

  struct Pending {
    Socket socket;
    uint32_t peer_ip = 0;
    Deadline deadline;
  };

  TlsAcceptor(std::string host, Socket listener, uint16_t port, TlsContext tls, Limits limits);
  Status start_thread();
  void event_loop();
  void accept_all(Deadline now);
  /// Drives fd's handshake one step; completed connections go to the ready queue.
  void step(int fd);
  void close_pending(int fd);

  const std::string host_;
  Socket listener_;
  const uint16_t port_;
  const TlsContext tls_;
  const Limits limits_;
  int epoll_fd_ = -1;
  int stop_read_ = -1, stop_write_ = -1;
  int ready_fd_ = -1;
  std::thread events_;
  // Event thread only.
  std::unordered_map<int, Pending> pending_;
  AdmissionQueue admission_;  ///< the pending handshakes, by age and address (invariant 3)
  bool listener_paused_ = false;
  // Shared with take().
  mutable std::mutex mu_;
  std::deque<Socket> ready_;
  size_t handshaking_ = 0;  ///< pending_.size(), for other threads
};

}  // namespace caf_rdma
