// RdmaClient: a blocking front end to a manager for code that is not an actor (main(), tests,
// command-line tools). Every call waits for the reply with a timeout; errors come back as
// `Error` (code + message from the manager). Never use it inside an actor's handler.
//
// Thread-safe: any number of threads may call one client at once, blocking calls included.
// Each call in progress has a blocking actor of its own (leased from the client's pool, so
// answers never cross between threads), the lanes' table and the stream lane are taken under a
// lock, a direct lane busy with another thread's op declines (the op goes the next way, so no
// thread waits on another's op), and atomics take turns on the client's 8-byte word.
// next_notice() takes notices one thread at a time.
//
// Reads and writes between NIC-registered buffers go over direct lanes (actors/direct_lane.h):
// the first transfer to an owner (in each priority class: components/priority.h) asks the
// manager for a queue pair of this client's own to it;
// from then on the calling thread posts and polls itself, with no message per op. Everything
// else (fallback, rdma-staged GPU memory, errors about unknown or released buffers) goes
// through the manager as before. Without RDMA between the two buffers, reads and writes
// between host memory of this node and another's go over the stream lane
// (actors/stream_lane.h): the calling thread straight to the owner's stream channel, one
// request authorized by the handle, no message to either manager. CAF_RDMA_DIRECT=0 (or
// `direct = false`) turns both kinds of lanes off.
#pragma once

#include <caf/actor_system.hpp>
#include <caf/scoped_actor.hpp>

#include <chrono>
#include <cstdint>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "actors/cancel_token.h"
#include "actors/rdma_manager_interface.h"
#include "actors/registered_buffer.h"
#include "actors/transfer_plan.h"
#include "primitives/status.h"

namespace caf_rdma {

class StopSignal;

enum class OpFault : uint8_t;  // components/rdma_op.h (a lane op's failure, internal)

/// Environment variable: "0" turns direct lanes off for clients that do not choose.
constexpr const char* kEnvDirect = "CAF_RDMA_DIRECT";

/// Where a node's actor system carries its busy-poll window in microseconds
/// (ManagerOptions::busy_poll; RdmaNode puts it in the system's settings, RdmaClient reads it).
inline constexpr char kBusyPollSetting[] = "caf-rdma.busy-poll-us";

class RdmaClient {
public:
  /// The timeout of read and write when none is given.
  static constexpr std::chrono::milliseconds kDefaultTimeout{30000};

  /// Talks to `manager` (this node's, or a remote proxy for directory calls) from `sys`.
  /// Destroy the client before its RdmaNode. A node destroyed first names the client on
  /// stderr and returns; the client then does nothing: every call fails with peer_unavailable
  /// saying so (actors/detail/node_objects.h), and its destructor returns.
  /// Direct lanes: as CAF_RDMA_DIRECT says (default on); only with this process's manager.
  RdmaClient(caf::actor_system& sys, rdma_manager_actor manager,
             std::chrono::milliseconds reply_timeout = std::chrono::seconds(60));
  RdmaClient(caf::actor_system& sys, rdma_manager_actor manager, bool direct,
             std::chrono::milliseconds reply_timeout = std::chrono::seconds(60));
  ~RdmaClient();

  const rdma_manager_actor& manager() const { return manager_; }

  Result<BufferHandle> request_buffer(const void* addr, uint64_t size,
                                      BufferAccess access = BufferAccess::kReadWrite);
  /// request_buffer, as a registration that releases itself when it goes (the memory may be
  /// freed after that): actors/registered_buffer.h. The node must outlive it.
  Result<RegisteredBuffer> register_buffer(const void* addr, uint64_t size,
                                           BufferAccess access = BufferAccess::kReadWrite);
  /// `size` bytes of zeroed host memory that the library allocates, registered as
  /// register_buffer does; the memory goes with the RegisteredBuffer (its data()). From 2 MiB
  /// it is 2 MiB-aligned and advised to transparent huge pages, which every transport moves
  /// faster (fewer pages to pin): same-host copies of 64 MiB ran about twice as fast as
  /// from std::vector memory (docs/guarantees.md, "Buffers the library allocates"). The node must
  /// outlive it.
  Result<RegisteredBuffer> allocate_buffer(uint64_t size,
                                           BufferAccess access = BufferAccess::kReadWrite);
  Result<uint64_t> release(uint64_t id);
  Result<TransferReply> transfer(const TransferOp& op, uint32_t timeout_ms);
  /// Writes `range` of `local` into `remote` (local -> remote), within `timeout`:
  /// `write(mine, theirs)`, `write(mine, theirs, Range::of(4096).at_remote(8192), 5s)`.
  Result<TransferReply> write(const BufferHandle& local, const BufferHandle& remote,
                              Range range = Range::whole(),
                              std::chrono::milliseconds timeout = kDefaultTimeout);
  /// write(), and its owner's watcher receives a WriteNotice with `tag` once the bytes are in
  /// place; the reply comes after the owner sent it (docs/guarantees.md, "Write notifications").
  /// Through the manager, never a direct lane. Errors also: invalid_argument (nobody watches the
  /// buffer), resource_exhausted (too many notices wait for the watcher); both say the bytes
  /// were written.
  Result<TransferReply> write_notify(const BufferHandle& local, const BufferHandle& remote,
                                     uint64_t tag, Range range = Range::whole(),
                                     std::chrono::milliseconds timeout = kDefaultTimeout);
  /// Write notifications into buffer `id` (this node's) go to `watcher` (an actor, which
  /// handles `(write_notice_atom, WriteNotice)`); an invalid actor stops them.
  Status watch_writes(uint64_t id, const caf::actor& watcher);
  /// The same with this client as the watcher: next_notice() takes them, in arrival order.
  Status watch_writes(uint64_t id);
  /// The next write notice for a buffer this client watches, waiting up to `timeout`
  /// (timeout error naming it otherwise). Notices nobody takes count against the writers'
  /// limit (kMaxPendingNotices).
  Result<WriteNotice> next_notice(std::chrono::milliseconds timeout = kDefaultTimeout);
  /// Reads `range` of `remote` into `local` (remote -> local), within `timeout`.
  Result<TransferReply> read(const BufferHandle& local, const BufferHandle& remote,
                             Range range = Range::whole(),
                             std::chrono::milliseconds timeout = kDefaultTimeout);
  /// read() and write() that `cancel` may stop from another thread (actors/cancel_token.h):
  /// then `cancelled` (a token already cancelled: nothing moves). Over a direct lane the op
  /// stops mid-way, its queue pair flushed before the answer; on the other paths a running op
  /// ends by itself and its own answer stands (the token's cancel says kFinished).
  Result<TransferReply> read(const BufferHandle& local, const BufferHandle& remote, Range range,
                             std::chrono::milliseconds timeout, const CancelToken& cancel);
  Result<TransferReply> write(const BufferHandle& local, const BufferHandle& remote, Range range,
                              std::chrono::milliseconds timeout, const CancelToken& cancel);
  /// The first forms, kept for existing programs: a run of integers where `read(l, r, 4096)`
  /// is a 4-second timeout, not 4096 bytes.
  [[deprecated(
      "read/write(local, remote, timeout_ms, length, ...) take the timeout first: use "
      "write(local, remote, Range::of(length), std::chrono::milliseconds(timeout_ms))")]] Result<TransferReply>
  write(const BufferHandle& local, const BufferHandle& remote, uint32_t timeout_ms,
        uint64_t length = kWholeSpan, uint64_t local_offset = 0, uint64_t remote_offset = 0);
  [[deprecated(
      "read/write(local, remote, timeout_ms, length, ...) take the timeout first: use "
      "read(local, remote, Range::of(length), std::chrono::milliseconds(timeout_ms))")]] Result<TransferReply>
  read(const BufferHandle& local, const BufferHandle& remote, uint32_t timeout_ms,
       uint64_t length = kWholeSpan, uint64_t local_offset = 0, uint64_t remote_offset = 0);
  Result<std::vector<TransferOutcome>> batch(const std::vector<TransferOp>& ops,
                                             uint32_t timeout_ms);
  /// A list of ranges between `local` and `remote`, validated once (actors/transfer_plan.h):
  /// `prepare(TransferKind::kRead, mine, theirs, {{0, 8192, 4096}, {4096, 65536, 4096}})`.
  /// Refused whole, naming the range, when a range is out of bounds or empty, the destination
  /// is read-only, or destination ranges overlap. Checks nothing at the owner: post does.
  Result<TransferPlan> prepare(TransferKind kind, const BufferHandle& local,
                               const BufferHandle& remote, std::vector<ListRange> ranges);
  Result<TransferPlan> prepare(TransferKind kind, const BufferHandle& local,
                               const BufferHandle& remote, const Strided& strided);
  /// Moves every range of `plan` within `timeout`, as few requests as each path allows: over
  /// the stream lane one request per kMaxListRanges ranges (the owner copies same-host lists
  /// with one system call per 1024 ranges), else batches of kListBatch ops through a direct
  /// lane or the manager. Any number of threads may post plans at once, one plan included.
  /// The outcome says which ranges landed (transfer_plan.h invariant 4; docs/guarantees.md,
  /// "Transfer lists"); its errors are those a single transfer of the failing range gives,
  /// naming the range. A timeout of 0 is refused (invalid_argument), as for an actor's list.
  ListOutcome post(const TransferPlan& plan, std::chrono::milliseconds timeout = kDefaultTimeout);
  /// post() that `cancel` may stop from another thread: the list stops between its steps, and
  /// mid-way in its op on a direct lane (flushed before the answer); the outcome is then
  /// `cancelled` naming how many ranges landed ([0, landed) in place, none landing later).
  ListOutcome post(const TransferPlan& plan, std::chrono::milliseconds timeout,
                   const CancelToken& cancel);
  /// post(), whose outcome arrives later: the manager moves the list (its transfer_list
  /// request: the same steps on a worker thread of its own, over this node's stream lane or
  /// through the manager's batches, never this client's direct lanes). The future is ready once
  /// the manager answered (within `timeout` plus the reply timeout); a manager that stops first
  /// makes it peer_unavailable. Any thread may call it, and the client may go before the
  /// outcome comes (the node must stay).
  std::future<ListOutcome> post_async(const TransferPlan& plan,
                                      std::chrono::milliseconds timeout = kDefaultTimeout);
  /// post_async() that `cancel` may stop from any thread: the manager's list stops between its
  /// steps and cancels the one in flight (manager invariant 24); the outcome is then
  /// `cancelled`, naming how many ranges landed, or the list's own if it ended first.
  std::future<ListOutcome> post_async(const TransferPlan& plan, std::chrono::milliseconds timeout,
                                      const CancelToken& cancel);
  /// Atomics on the 8-byte word at `offset` of `remote` (read-write, the word 8-byte aligned
  /// in its owner's memory): adds `add` (wrapping), or stores `desired` if the word equals
  /// `expected`; returns the word's old value (compare-swap swapped iff it equals `expected`).
  /// Through the manager, never a direct lane; the old value lands in an 8-byte word of the
  /// client's, registered with the manager on first use. docs/architecture.md, "Atomics" says what
  /// is atomic with what. `path`, when given, receives the path a successful atomic took
  /// (`rdma-direct`: the NIC's atomic; `fallback`: the owner's CPU atomic): never mix paths on one
  /// word.
  Result<uint64_t> fetch_add(const BufferHandle& remote, uint64_t offset, uint64_t add,
                             std::chrono::milliseconds timeout = kDefaultTimeout,
                             std::string* path = nullptr);
  Result<uint64_t> compare_swap(const BufferHandle& remote, uint64_t offset, uint64_t expected,
                                uint64_t desired,
                                std::chrono::milliseconds timeout = kDefaultTimeout,
                                std::string* path = nullptr);
  /// A transfer whose result arrives later: the future is ready once the manager answered
  /// (every answer within `timeout` plus the reply timeout). Goes through the manager, not a
  /// direct lane; may be called from any thread, several at once, and the client may go
  /// before the result comes (the node must stay).
  std::future<Result<TransferReply>> transfer_async(
      TransferOp op, std::chrono::milliseconds timeout = kDefaultTimeout);
  std::future<Result<TransferReply>> write_async(
      const BufferHandle& local, const BufferHandle& remote, Range range = Range::whole(),
      std::chrono::milliseconds timeout = kDefaultTimeout);
  std::future<Result<TransferReply>> read_async(
      const BufferHandle& local, const BufferHandle& remote, Range range = Range::whole(),
      std::chrono::milliseconds timeout = kDefaultTimeout);
  /// The same that `cancel` may stop from any thread: the manager ends the transfer as at its
  /// timeout and answers `cancelled`, or with its own answer where it could not stop it
  /// (docs/guarantees.md, "Cancel"); the future holds that answer and `cancel` reports it.
  std::future<Result<TransferReply>> transfer_async(TransferOp op,
                                                    std::chrono::milliseconds timeout,
                                                    const CancelToken& cancel);
  std::future<Result<TransferReply>> write_async(const BufferHandle& local,
                                                 const BufferHandle& remote, Range range,
                                                 std::chrono::milliseconds timeout,
                                                 const CancelToken& cancel);
  std::future<Result<TransferReply>> read_async(const BufferHandle& local,
                                                const BufferHandle& remote, Range range,
                                                std::chrono::milliseconds timeout,
                                                const CancelToken& cancel);
  Result<ManagerStats> stats();
  Status put(const std::string& name, const BufferHandle& handle);
  Result<BufferHandle> get(const std::string& name, uint32_t wait_ms);

  /// Whether transfers may take direct lanes.
  bool direct() const { return direct_; }
  /// Direct lanes this client holds (one per owner manager it moved bytes with and priority
  /// class it moved them in).
  size_t lanes() const;

private:
  struct LaneSlot {
    std::shared_ptr<DirectLane> lane;
    bool verify = false;              ///< the manager's verify mode, given with the lane
    uint64_t stripe_min_bytes = 0;    ///< LaneGrant's: larger ops with rails go to the manager
    bool stripes_one_device = false;  ///< LaneGrant's: larger ops go to it, rails or not
    /// No lane to this owner before then (the manager refused one): use the manager.
    std::chrono::steady_clock::time_point retry_after{};
    /// Lane handshakes in a row that did not finish within their transfer's timeout: the
    /// manager's path (whose handshake has its own, longer limit) is used for 1, 2, 4 ... 64 s.
    uint32_t open_timeouts = 0;
  };

  /// Fails once its node was destroyed while it lived (actors/detail/node_objects.h).
  Status node_alive() const;
  template <class T, class... Ts>
  Result<T> call(std::chrono::milliseconds timeout, Ts&&... xs) {
    return call_until<T>(timeout, nullptr, std::forward<Ts>(xs)...);
  }
  /// A call whose request `stop` (null: none) cancels at its manager (cancel_request.h): a
  /// transfer, batch or list; its answer says how it ended.
  template <class T, class... Ts>
  Result<T> call_until(std::chrono::milliseconds timeout, const StopSignal* stop, Ts&&... xs);
  /// batch(), whose manager request `stop` cancels (a list's batches).
  Result<std::vector<TransferOutcome>> batch_until(const std::vector<TransferOp>& ops,
                                                   uint32_t timeout_ms, const StopSignal* stop);
  /// Spins up to busy_poll_ until a message is in `self`'s mailbox (then receive takes it
  /// without a wake-up): busy polling's client side. True: a message is there (false at once
  /// when busy polling is off).
  bool spin_for_reply(caf::scoped_actor& self);
  /// How long to wait for the answer to a request that itself may take `ms` (a transfer's or a
  /// directory wait's timeout): that, plus the reply timeout, plus kNoticeGrace when it asks
  /// for a write notice (the manager then answers up to that much after `ms`).
  std::chrono::milliseconds reply_wait(uint32_t ms, bool notice = false) const {
    return std::chrono::milliseconds(ms) + reply_timeout_ +
           (notice ? std::chrono::milliseconds(kNoticeGrace) : std::chrono::milliseconds(0));
  }
  /// The lane for `count` ops (at least one) to one owner, opened on first use, and whether
  /// the manager's verify mode holds for it; null: go through the manager (an op a lane does
  /// not take or that the manager would stripe, no lane there). A lane that could not be opened
  /// within the timeout sets `failed` (the transfer's error).
  std::shared_ptr<DirectLane> lane_for(const TransferOp* ops, size_t count, uint32_t timeout_ms,
                                       std::optional<Error>* failed, bool* verify = nullptr);
  /// The ListSteps a client's list walks (actors/detail/client_list_walk.h: each step one
  /// call into the file that owns that way, so that post's walk enters each file once).
  class ListWalk;
  /// Ranges [from, plan.size()) of `plan` as one list op on the owner's direct lane (DirectLane
  /// invariant 6); nothing: no lane takes it (none there, verify mode, ranges the manager would
  /// stripe), the batches move it.
  std::optional<ListEnd> rdma_list(const TransferPlan& plan, size_t from,
                                   std::chrono::steady_clock::time_point deadline,
                                   const StopSignal* stop);
  /// transfer_async's and post_async's one body (`use`: null, or the token's use, ended with
  /// the answer).
  std::future<Result<TransferReply>> transfer_async_until(
      TransferOp op, std::chrono::milliseconds timeout,
      const std::shared_ptr<CancelToken::Use>& use);
  std::future<ListOutcome> post_async_until(const TransferPlan& plan,
                                            std::chrono::milliseconds timeout,
                                            const std::shared_ptr<CancelToken::Use>& use);
  /// post's walk (`stop`: null, or a CancelToken's signal).
  ListOutcome post_walk(const TransferPlan& plan, std::chrono::milliseconds timeout,
                        const StopSignal* stop);
  /// transfer(), stopped by `cancel` (read and write with a token).
  Result<TransferReply> transfer_cancellable(const TransferOp& op, uint32_t timeout_ms,
                                             const CancelToken& cancel);
  /// transfer's ways (a direct lane, the stream lane, the manager); `stop`: null, or a
  /// CancelToken's signal, checked before each way and watched by a lane's op.
  Result<TransferReply> transfer_until(const TransferOp& op, uint32_t timeout_ms,
                                       const StopSignal* stop);
  /// A direct lane's place in lanes_: its owner and the class of the ops it carries (each class
  /// has a queue pair of its own: a latency-class op never waits behind a bulk one's).
  using LaneKey = std::pair<caf::actor_addr, Priority>;
  static LaneKey lane_key(const TransferOp& op) {
    return {op.remote.owner.address(), priority_of(op)};
  }
  /// Drops the lane at `owner` if it is `lane` (another thread may have replaced it).
  void drop_lane(const LaneKey& owner, const std::shared_ptr<DirectLane>& lane);
  /// After a lane op failed: drops a broken lane and names the cause by the manager's rule
  /// (actors/transfer/owner_verdict.h): a peer that is down (peer_unavailable), or the owner's
  /// reason for refusing the access (released, unknown_buffer, out_of_bounds, ...), asked
  /// by `deadline` (the op's, of `timeout_ms`).
  Error lane_error(const TransferOp& op, Error error, OpFault fault,
                   std::chrono::steady_clock::time_point deadline, uint32_t timeout_ms);
  /// Verify mode, after a lane op: this side's checksum against the owner's.
  Status verify_lane_op(const TransferOp& op, uint64_t length);
  /// The stream lane for transfers between `local` and `remote` (asked of the manager on first
  /// use); null: none (this client takes no lanes, `local` is not this node's, `remote` names
  /// no stream channel, or this node has no stream lane).
  std::shared_ptr<StreamLane> stream_lane(const BufferHandle& local, const BufferHandle& remote);
  /// The stream lane's try (asked of the manager on first use); nothing: the manager moves it.
  /// `stop`: null, or a CancelToken's signal (StreamLane invariant 6).
  std::optional<Result<TransferReply>> stream_transfer(const TransferOp& op, uint32_t timeout_ms,
                                                       const StopSignal* stop = nullptr);
  /// One lane attempt (and one more after a flush caused by another op, unless `stop` was
  /// set); nothing: not a lane op. `stop`: null, or a CancelToken's signal.
  std::optional<Result<TransferReply>> lane_transfer(const TransferOp& op, uint32_t timeout_ms,
                                                     std::optional<Error>* failed,
                                                     const StopSignal* stop = nullptr);
  /// read() and write(): `transfer` of scratch_ filled in place.
  Result<TransferReply> transfer_scratch(TransferKind kind, const BufferHandle& local,
                                         const BufferHandle& remote, uint32_t timeout_ms,
                                         Range range);

  /// Whether a list may be posted within `timeout`: the node lives and the timeout is not 0.
  Status list_ready(std::chrono::milliseconds timeout) const;
  /// A timeout as the manager takes it (milliseconds, at least 1, at most UINT32_MAX).
  static uint32_t timeout_ms_of(std::chrono::milliseconds timeout);
  /// fetch_add and compare_swap: `op` with the client's atomic word as its local side.
  Result<uint64_t> run_atomic(TransferOp op, std::chrono::milliseconds timeout, std::string* path);

  caf::actor_system& sys_;
  uint64_t listed_ = 0;  ///< its token in detail/node_objects.h
  rdma_manager_actor manager_;
  std::chrono::milliseconds reply_timeout_;
  /// The client as a watcher (watch_writes(id)): only next_notice receives on it.
  std::unique_ptr<caf::scoped_actor> self_;
  std::mutex notice_mu_;  ///< next_notice: one receiver at a time
  /// Pools, each under pool_mu_: one call in progress leases a blocking actor that receives
  /// only its own answers, and read() and write() an op they fill in place (it keeps its
  /// handles' strings allocated between calls).
  std::mutex pool_mu_;
  std::vector<std::unique_ptr<caf::scoped_actor>> idle_actors_;
  std::vector<std::unique_ptr<TransferOp>> idle_ops_;
  bool direct_ = false;
  /// The node's busy-poll window (ManagerOptions::busy_poll; 0: block at once).
  std::chrono::microseconds busy_poll_{0};
  mutable std::mutex lanes_mu_;  ///< lanes_, stream_lane_, stream_lane_asked_
  std::map<LaneKey, LaneSlot> lanes_;
  std::shared_ptr<StreamLane> stream_lane_;
  bool stream_lane_asked_ = false;  ///< the manager was asked (its answer may be no lane)
  std::mutex atomic_mu_;            ///< one atomic at a time owns the word and its registration
  /// Where the old values of this client's atomics land, and its registration (made on first
  /// use; released before the word goes: declared after it).
  std::unique_ptr<uint64_t> atomic_word_ = std::make_unique<uint64_t>(0);
  std::optional<RegisteredBuffer> atomic_registration_;
};

}  // namespace caf_rdma
