// The owner's side of the fallback's stream channel: a TCP listener whose connections move the
// bytes of granted ranges straight between the socket and the registered buffer (no copy in
// user space; CAF carries only the grant). No CAF here: the manager grants, and learns through
// the `done` callback (called on a worker thread) when a claimed grant is finished.
//
// Invariants (what a client that is not honest can make it hold):
//  1. No thread per connection: one event thread (epoll) accepts connections, reads request
//     headers and claims their grants without blocking; a connection gets one of `workers`
//     threads only with a claimed grant, and only for that grant's transfer (bounded by the
//     grant's deadline) and the linger after it (invariant 10). A request naming no grant is
//     answered (without blocking) and closed.
//  2. Two kinds of connections. A connection is *unauthenticated* from its accept until its
//     first request names a grant the server holds (and, with TLS, until it has completed the
//     mutual-TLS handshake that must come first); from then on it is *authenticated*, for as
//     long as it stays open. Only a client that was given a token (over CAF, by the owner's
//     manager), or holds a buffer handle (invariant 9), can authenticate a connection.
//  3. Unauthenticated connections have a budget and a deadline of their own: at most
//     `max_unauthenticated` in all and `max_unauthenticated_per_host` from one IPv4 address
//     (all local processes count as 127.0.0.1), each closed `auth_timeout` after its accept.
//     A new connection is never refused for want of room: when the budget is full, the oldest
//     unauthenticated connection of its own address (its address is at its share) or else of
//     the address holding the most is closed to make room. A flood of silent connections thus
//     costs at most that budget of fds and shortens only the life of the flood's own
//     connections; a legitimate connection is lost only if budget-many newer unauthenticated
//     connections (from its own address, or from many) are accepted before its request was
//     read, and then nothing of its transfer has moved (its client tries again, see
//     stream_client.h).
//  4. Authenticated connections have slots of their own that unauthenticated ones never take:
//     at most `max_connections` in all and `max_per_host` from one address. A connection that
//     authenticates while they are full takes the slot of the least recently used idle
//     authenticated connection (of its own address when that address is at its share); when
//     all of those are busy it is served, then closed. An idle authenticated connection must
//     deliver its next request within `header_timeout` of the end of its previous transfer,
//     else it is closed.
//  5. The server closes a connection of its own accord (invariants 3 and 4, deadlines) only
//     while no claimed grant is on it, so no transfer is cut by a flood. Connections with
//     something to read are served before new ones are accepted, a new connection's request
//     (or TLS hello) is read at once if it is already there, and at most 64 connections are
//     accepted per wake-up. When accept fails for want of fds or memory (EMFILE, ENFILE,
//     ENOBUFS, ENOMEM) the listener pauses `accept_backoff` and resumes: it never stops for good.
//  6. Grant tokens come from getrandom (components/secure_random.h): a client cannot predict
//     one from those it saw. A token is claimed once; a claimed grant's `done` runs exactly
//     once, after the last byte of its memory was touched.
//  7. With a TLS context (nodes speaking TLS) every connection completes a TLS handshake in
//     which the client shows a certificate the CA file vouches for before its request is read;
//     the handshake runs in the event thread without blocking, within `auth_timeout`, and a
//     client that fails it is closed. The bytes then travel encrypted.
//  8. Every wait is bounded: the event thread wakes for the earliest deadline (at least once
//     a second), a worker's transfer ends by its grant's deadline (a requester's GPU copy by
//     that deadline and the allowance invariant 20 gives it).
//  9. A request by handle ("CRH1", stream_protocol.h) is a grant the authorizer makes on the
//     spot: it checks the handle (as the owner checks any access) and holds the memory until
//     the grant's `done`; its deadline is the request's timeout, cut to the authorizer's
//     bound (HandleGrant::max_timeout) and kMaxHandleTimeout. A
//     request it refuses is answered and closed, as one naming no grant (invariant 1); one it
//     allows authenticates its connection (invariant 2), as a claimed grant does.
// 10. After serving a request, a worker waits up to kLinger for the next one on the same
//     (plain TCP) connection when no other connection waits for a worker and the
//     authenticated slots of its address and in all have room (invariant 4), and serves it
//     itself (a lane's ping-pong then costs no hand-off from the event thread); a request that
//     has begun must arrive whole within kLingerHeader. Otherwise the connection goes back to
//     the event thread as before.
// 11. Same host (Limits::same_host): the server also listens on an abstract AF_UNIX endpoint
//     (same_host.h), announced beside the TCP port with the host's identity. Its connections
//     speak the same protocol, pass through the same claim() (grants and requests by handle:
//     the same checks, answers and holds) and the same slots (all count as 127.0.0.1), never
//     TLS (the kernel names the peer, invariant 12). On them a request may ask for
//     cross-memory attach ("CMS2"/"CMH2"): the worker copies the bytes itself between the
//     claimed range and the requester's memory (cross_memory.h: process_vm_writev for a read,
//     process_vm_readv for a write, into the SO_PEERCRED pid only), then answers the final
//     status; `done` runs after that copy returned. Such a claim's deadline is the earlier of
//     the grant's and the one the requester sent (stream_protocol.h): the copy ends by the
//     time its requester stops waiting, however late this server read the request. When the kernel
//     refuses (EPERM, ENOSYS) the answer is "in-band go" and the bytes travel on the connection;
//     the refusal is remembered for the connection (no failed syscall per op). Limits::cross_memory
//     = false (a test hook, or a host that forbids it) answers every such request in-band.
// 12. A same-host connection is served only when its peer runs as this process's uid
//     (SO_PEERCRED at accept): another uid gets permission_denied naming both uids, and is
//     closed before its request is read.
// 13. A claimed transfer whose peer moves fewer than kStallProgress bytes (or the rest) in
//     `stall_timeout` (a write's bytes stop coming or trickle, a read's reader stops reading or
//     reads a few bytes at a time, the final answer cannot be sent) ends with timeout and its
//     `done` runs, freeing its worker and its memory (and so a release of its buffer),
//     whatever time its grant had left.
// 14. A claimed transfer whose buffer its owner released (the grant's Withdrawal, withdrawal.h)
//     touches the memory no more after the socket call under way (withdrawable_move.h, looked
//     at least every kStopLook while the peer is waited for, so a peer that trickles or stalls
//     cannot hold it; by cross-memory attach after the piece under way, cross_memory.h
//     invariant 5; a small read by handle is sent after one look), and its `done`
//     runs then, before the rest of it crosses the wire without the memory: the owner's
//     release waits for that call, not for the transfer. The final status is
//     released_midway_error, sent in step: the connection serves on.
// 15. With more than one worker, one IPv4 address (all local processes count as 127.0.0.1)
//     never holds every worker: its claimed connections take at most `workers - 1` of them at
//     once (host_share()); the next one from it waits while a connection from another address
//     is served first, so transfers that move slowly or not at all from one peer leave the
//     others a worker. A waiting claimed transfer whose grant is withdrawn does not hold its
//     owner's release: end_withdrawn_waiting() (called by the release) runs its `done` at
//     once, nothing moved, and the worker that takes it later moves its bytes without the
//     memory (invariant 14).
// 16. A list request ("CRL1"/"CML2", stream_protocol.h) is a request by handle for the span
//     its ranges lie in (the authorizer checks the span as any request's range); its worker
//     answers a first "go", reads the table, refuses it whole if a range is empty or outside
//     the span, or the lengths do not make the announced total or pass the span's length
//     (nothing moved), then moves the ranges' bytes in table order: by cross-memory attach
//     (one process_vm_* call per window of up to kMaxIov ranges, cross_memory.h), or in-band:
//     on plain TCP the socket calls gather the ranges from the buffer (scatter them into it)
//     with the withdrawal looked at before each call and while the peer is waited for, as for
//     one range (invariant 14, withdrawable_move.h); under TLS through a staging buffer of
//     kListStaging bytes, the only memory the socket calls touch, each copy between it and the
//     buffer after a look at the withdrawal (invariant 14 at the staging's granularity). The
//     withdrawal is looked at while the table is waited for too; a list withdrawn before its
//     bytes answers `released` in step. Invariants 13-15 hold as for one range.
// 17. Every request that succeeds (its grant's `done` with ok), by grant or by handle, one
//     range or a list, is told to the `set_served` observer once, on its worker, just before
//     its `done`: the endpoint it came on, the requester's address, its direction and bytes.
// 18. Claimed connections waiting for a worker are taken by their request's priority class
//     (class_queue.h: strict priority with aging, so background still gets a turn every
//     kAging), earliest grant deadline first within a class, subject to invariant 15's share
//     per address: a latency-class request that arrives while the workers are busy is served
//     before the bulk and background ones that came before it. The class is the requester's
//     word (its manager's, or its client's): a client that names latency for everything
//     competes with itself, and takes no more than its address's share (invariant 15).
// 19. A grant of GPU memory (its StagedMemory) moves its bytes in-band only, through this
//     worker's bounce buffer (staged_socket_move.h), its withdrawal looked at as invariant 14
//     says (the bounce buffer's part-received piece is not copied into the memory). A
//     cross-memory request on it (a same-host requester's host memory) is served through this
//     worker's page-locked staging buffer instead, a GPU copy and a cross-memory copy per piece,
//     pipelined (staged_cross_memory.h; the kernel cannot copy GPU memory), or answered "in-band
//     go" as invariant 11 says when the kernel refuses (or the staging buffer cannot be made).
//     Requests by handle are host memory's only (the authorizer takes host buffers), so no list,
//     eager write or small read sent in one go reaches GPU memory; as a guard, a list or eager
//     write on a GPU grant is refused, nothing moved. A worker that has no bounce buffer and cannot
//     make one refuses the request in step, nothing moved. A GPU copy that fails ends the transfer
//     in step, as a release does: its `done` runs at once (the memory is not touched after the
//     copy), the rest crosses the wire without the memory, and the final status is the copy's error
//     (naming the GPU and the byte of the range).
// 20. Same host, GPU to GPU: a GPU copy request ("CGS1", stream_protocol.h; same-host
//     connections only, so the requester runs as this uid: invariant 12) on a grant of GPU
//     memory that carries its owner's export of it (StagedMemory::exported: CUDA IPC, made
//     once per buffer by the owner's manager) is answered with that export, and the requester
//     copies the bytes itself, GPU to GPU (starting none after its deadline); the worker waits
//     for its status (until the requester's deadline plus kEagerAnswerGrace plus the time the
//     copy takes at kSlowestGpuCopy: the requester's copy touches the memory until then),
//     answers it as the final status, and only then runs `done`. So a release of the buffer
//     waits for that one device copy, which its owner cannot stop (but a server that stops,
//     at its node's end, shuts its connections without waiting for their requesters). The
//     requester keeps its import open for its next copies: the owner's manager has it closed
//     before the release returns (actors/manager/gpu_exports.h invariant 2). A worker that gets
//     no status by then (or a hang-up) ends the grant with that error. A grant without an
//     export (another DeviceMemory, pool or VMM memory, no same-host endpoint) answers "in-band
//     go" and the bytes move as invariant 19 says; so do they where the requester says it could
//     not open the export.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "components/admission_queue.h"
#include "components/class_queue.h"
#include "components/socket_io.h"
#include "components/staged_socket_move.h"
#include "components/stream_protocol.h"

namespace caf_rdma {

class StreamServer {
public:
  /// Called once per claimed grant: its token, ok with the bytes moved, or why it failed.
  using DoneFn = std::function<void(uint64_t token, Status, uint64_t bytes)>;

  /// The longest a request by handle may take (its timeout is cut to it).
  static constexpr std::chrono::milliseconds kMaxHandleTimeout{300000};
  /// What a request by handle may touch, as its authorizer allowed it (invariant 9): the first
  /// byte of its range, and what to call once its memory is no longer touched.
  struct HandleGrant {
    uint8_t* addr = nullptr;
    std::function<void(Status, uint64_t bytes)> done;
    /// Invariant 14: set when the owner releases the buffer.
    Withdrawal withdrawal;
    /// The request's timeout is cut to this (the owner's bound on what a peer holds).
    std::chrono::milliseconds max_timeout = kMaxHandleTimeout;
  };
  /// Checks a request by handle and holds its memory until the grant's `done`; an error is the
  /// answer to the client. Called on the event thread: it must not block.
  using Authorizer = std::function<Result<HandleGrant>(const StreamRequest&)>;
  /// A request that succeeded, for its owner's accounts (invariant 17).
  struct Served {
    bool same_host = false;  ///< on the same-host endpoint; else TCP from `peer_ip`
    uint32_t peer_ip = 0;    ///< the requester's IPv4 address, host order (TCP)
    StreamDirection direction = StreamDirection::kIntoOwner;
    uint64_t bytes = 0;
  };
  using ServedFn = std::function<void(const Served&)>;
  /// Invariant 20: the slowest a requester's GPU copy is taken to run, bytes per second (a
  /// copy between GPUs without peer access, through host memory, runs at several GB/s).
  static constexpr uint64_t kSlowestGpuCopy = 1ull << 30;
  /// Invariant 10: how long a worker waits for a connection's next request, and for its rest.
  static constexpr std::chrono::microseconds kLinger{200};
  static constexpr std::chrono::milliseconds kLingerHeader{1000};

  struct Limits {
    /// Authenticated connections (invariant 4): idle time allowed before the next request.
    std::chrono::milliseconds header_timeout{30000};
    /// Authenticated connections (invariant 4): in all, and from one IPv4 address.
    size_t max_connections = 1024;
    size_t max_per_host = 256;
    /// Unauthenticated connections (invariant 3): in all, from one IPv4 address, and how long
    /// one may stay open (TLS handshake and first request).
    size_t max_unauthenticated = 256;
    size_t max_unauthenticated_per_host = 64;
    std::chrono::milliseconds auth_timeout{5000};
    size_t workers = 4;
    /// Invariant 13: how long a claimed transfer may move no byte before it ends.
    std::chrono::milliseconds stall_timeout{10000};
    std::chrono::milliseconds accept_backoff{100};
    /// Invariant 11: listen on a same-host (AF_UNIX) endpoint too.
    bool same_host = false;
    /// Invariant 11: false (a test hook, named so) answers cross-memory requests in-band.
    bool cross_memory = true;
    /// Invariant 18: how long a class waits unserved while more urgent ones are served before it
    /// gets a turn (priority.h invariant 2; the manager's priority_aging).
    std::chrono::nanoseconds priority_aging = kAging;
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
  /// Invariant 11: the same-host endpoint's abstract name ("" without one), and the identity of
  /// the host it is reachable from (same_host.h; "" without an endpoint).
  const std::string& unix_name() const { return unix_name_; }
  std::string host_id() const;

  /// Allows one client to move `length` bytes into or out of [addr, addr + length) before the
  /// deadline. The memory must stay valid until `done` is called or `revoke` returns true;
  /// setting `withdrawal` makes a claimed transfer stop early (invariant 14). GPU memory
  /// (`staged`) moves through a bounce buffer (invariant 19).
  /// Returns the grant's token (never 0).
  uint64_t grant(uint8_t* addr, uint64_t length, StreamDirection direction, Deadline deadline,
                 DoneFn done, Withdrawal withdrawal = nullptr, StagedMemory staged = {});
  /// Serve requests by handle with `authorize` (without one they are refused).
  void set_authorizer(Authorizer authorize);
  /// Invariant 17: `served` hears of every request that succeeds from now on.
  void set_served(ServedFn served);
  /// Withdraws a grant no client has claimed yet: true if it was unclaimed (its `done` will not
  /// be called); false if a client claimed it (its `done` will be, or was, called).
  bool revoke(uint64_t token);
  /// Invariant 15: claimed transfers waiting for a worker whose withdrawal is set end now, for
  /// their owner (`done` with released, nothing moved), instead of when a worker takes them.
  /// The owner calls it after setting a withdrawal. Returns how many ended.
  size_t end_withdrawn_waiting();
  /// Grants not claimed yet.
  size_t pending_grants() const;
  /// Claimed requests waiting for a worker (invariant 18).
  size_t waiting_for_worker() const;
  /// Connections open now (idle, reading a header, or transferring).
  size_t connections() const;
  /// Authenticated connections open now (invariant 2).
  size_t authenticated_connections() const;
  /// Connections accepted so far (those closed since included).
  uint64_t accepted() const;
  /// Unauthenticated connections closed so far to make room for newer ones (invariant 3).
  uint64_t evicted() const;
  /// Requests served by cross-memory attach, and same-host requests whose bytes went in-band
  /// (invariant 11).
  uint64_t cross_memory_served() const { return cross_memory_served_.load(); }
  uint64_t inband_served() const { return inband_served_.load(); }
  /// GPU copy requests whose requester copied every byte from an export (invariant 20).
  uint64_t gpu_copies_served() const { return gpu_copies_served_.load(); }

private:
  struct Grant {
    uint8_t* addr = nullptr;
    uint64_t length = 0;
    StreamDirection direction = StreamDirection::kIntoOwner;
    Deadline deadline{};
    DoneFn done;
    Withdrawal withdrawal;  ///< invariant 14
    StagedMemory staged;    ///< GPU memory: through a bounce buffer (invariant 19)
  };
  struct Connection {
    Socket socket;
    uint32_t peer_ip = 0;
    uint8_t header[kMaxRequestBytes] = {};
    size_t got = 0;
    Deadline header_deadline;
    bool handshaking = false;    ///< TLS: its handshake is not complete yet
    bool authenticated = false;  ///< claimed a grant at least once (invariant 2)
    bool over_slots = false;     ///< authenticated beyond the slots: closed after its transfer
    bool busy = false;           ///< a worker has it (not in epoll)
    bool same_host = false;      ///< accepted on the AF_UNIX endpoint (invariant 11)
    pid_t peer_pid = 0;          ///< its SO_PEERCRED pid (same host only)
    bool cma_refused = false;    ///< the kernel refused cross-memory attach to it (invariant 11)
    /// Unauthenticated: its place in accept order; authenticated: in order of last use.
    uint64_t seq = 0;
    StreamRequest request;
    Grant grant;  ///< claimed by `request` (valid while busy)
  };

  StreamServer(std::string host, Socket listener, uint16_t port, Limits limits, TlsContext tls,
               Socket unix_listener, std::string unix_name);
  Status start_threads();
  void event_loop();
  /// Accepts what waits on `listener` (the TCP one, or the same-host one).
  void accept_all(Deadline now, const Socket& listener, bool same_host);
  /// Invariant 12: whether a same-host connection may be served; else it was answered.
  bool admit_same_host(Socket& s, Connection& c);
  /// Invariant 3: closes an unauthenticated connection if a new one from `ip` would exceed
  /// their budget.
  void make_room_locked(uint32_t ip);
  /// Invariant 4: c claimed its first grant; it moves to the authenticated slots.
  void authenticate_locked(Connection& c);
  /// Whether authenticated connections from `ip`, or in all, exceed their slots (invariant 4).
  bool over_authenticated_slots_locked(uint32_t ip) const;
  /// Reads what is there of c's header; false when c is to be closed.
  bool read_header(const std::shared_ptr<Connection>& c);
  /// Invariant 10, on a worker after serving c: true when c's next request came and claimed its
  /// grant (serve it); false to give c back, with `keep` false when c is to be closed.
  bool linger(Connection& c, bool& keep);
  /// The answer to a request naming grant `token`, which this server does not hold.
  Error unknown_grant(uint64_t token) const;
  /// c claimed `grant` with `req`: it is authenticated (invariant 2) and goes to a worker.
  void hand_to_worker_locked(const std::shared_ptr<Connection>& c, const StreamRequest& req,
                             Grant grant);
  /// The grant `req` claims: the one its token names (taken from grants_), or the one a request
  /// by handle makes (invariant 9); else the answer refusing it.
  Result<Grant> claim(const StreamRequest& req);
  /// The grant `token` names, taken out of grants_ (single use), or unknown_grant's error.
  Result<Grant> take_grant(uint64_t token);
  /// The grant a request by handle makes (invariant 9), or the answer refusing it.
  Result<Grant> grant_by_handle(const StreamRequest& req);
  void close_locked(int fd);
  /// Invariant 15: how many workers one address may hold at once.
  size_t host_share() const { return limits_.workers > 1 ? limits_.workers - 1 : 1; }
  /// Invariant 15: the oldest ready connection whose address is below its share, taken out of
  /// ready_ and counted in serving_per_host_; null when none may be served now.
  std::shared_ptr<Connection> next_ready_locked();
  void work();
  /// Moves the bytes of c's claimed grant; false when the connection can no longer be used.
  bool serve(Connection& c);
  /// serve() for a list request (invariant 16), whose grant `g` is its span.
  bool serve_list(Connection& c, Grant& g);
  /// Invariant 17: g's `done` tells served_ too, naming c, when the request succeeds.
  void account(const Connection& c, Grant& g);

  const std::string host_;
  Socket listener_;
  const uint16_t port_;
  Socket unix_listener_;  ///< invariant 11 (invalid without Limits::same_host)
  const std::string unix_name_;
  std::atomic<uint64_t> cross_memory_served_{0};
  std::atomic<uint64_t> inband_served_{0};
  std::atomic<uint64_t> gpu_copies_served_{0};
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
  Authorizer authorize_;                    ///< requests by handle (invariant 9); empty: refused
  std::shared_ptr<const ServedFn> served_;  ///< invariant 17; null: nobody hears
  std::map<int, std::shared_ptr<Connection>> connections_;  ///< by fd
  AdmissionQueue unauthenticated_;  ///< connections that claimed no grant yet (invariant 3)
  size_t authenticated_ = 0;
  std::map<uint32_t, size_t> authenticated_per_host_;
  uint64_t next_seq_ = 1;
  uint64_t accepted_ = 0;
  uint64_t evicted_ = 0;
  /// Complete headers, for the workers (invariant 18).
  ClassQueue<std::shared_ptr<Connection>> ready_;
  std::map<uint32_t, size_t> serving_per_host_;  ///< workers busy per address (invariant 15)
};

}  // namespace caf_rdma
