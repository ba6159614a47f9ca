// RdmaQueuePair: a reliable-connected queue pair with flow control, selective signaling,
// batched completion polling, timeouts that flush, and recovery from the ERR state.
//
// Invariants:
//  1. Every op accepted by `submit` completes exactly once through its callback, with the
//     first error any of its work requests met (or success); an op rejected by `submit`
//     (validation error) never touches the NIC and its callback is never called.
//  2. Bounds, liveness ("released") and access of every buffer are checked before posting.
//  3. At most `max_send_wr` send work requests are outstanding; more ops wait in a software
//     queue, in submission order, and are posted as completions free slots. Ops larger than the
//     port's maximum message size are split into several work requests.
//  4. Only the last work request of each posted chain (and every `signal_interval`-th) is
//     signaled; RC completes in order, so one completion retires every earlier request.
//  5. An op that times out moves the QP to ERR and is drained before `execute` returns, so the
//     NIC cannot touch its buffers afterwards. A QP in ERR (timeout, remote access error, peer
//     error) is recovered, reset and reconnected through the reconnect function, before the next
//     op is posted: errors do not stick to the pair (Monarch issue #3759).
//  6. Thread-safe: any number of threads may submit, execute and progress at once.
//  7. The CQ holds a completion for every work request the QP may have outstanding: it is
//     grown to the send and receive queues the device granted (providers round requests up,
//     `cq_entries` may ask for less); where it cannot grow, fewer requests are posted.
//  8. A WRITE or SEND work request no larger than the QP's granted inline size is posted
//     inline (its bytes copied into the work request at post time; `Stats::inline_requests`).
//  9. An op whose RemoteBuffer names an incarnation (RdmaDomain invariant 5) other than the one
//     of the peer this QP is connected to is refused by `submit`: the owner's device was
//     reopened since, and the old remote key might name someone else's memory.
// 10. With `Options::completions`, the QP's completions go to a CQ shared with other QPs of the
//     device (CompletionRouter): `progress` polls the shared CQ and may complete other QPs' ops;
//     every posted work request holds one of the router's credits until it is retired, so the
//     shared CQ cannot overflow. Without it, the QP has a CQ of its own (invariant 7).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "components/completion_router.h"
#include "components/rdma_domain.h"
#include "components/rdma_op.h"
#include "components/work_request_plan.h"
#include "primitives/completion_queue.h"
#include "primitives/queue_pair.h"

namespace caf_rdma {

class RdmaQueuePair : private CompletionTarget {
public:
  struct Options {
    /// Largest message per work request; 0 = the port's max_msg_sz. Smaller values split
    /// transfers into more requests (used by tests to exercise splitting).
    uint64_t max_message_bytes = 0;
    /// Signal at least every this many send work requests; 0 = max_send_wr / 4.
    uint32_t signal_interval = 0;
    /// How long flushing a QP in ERR may take before the QP is destroyed and recreated.
    std::chrono::milliseconds drain_timeout{5000};
    /// A completion queue shared with other QPs of the same device (invariant 10); null: the
    /// QP gets a CQ of its own.
    std::shared_ptr<CompletionRouter> completions;
  };

  /// Called by `recover` with this side's fresh connection info (same QP number, new PSN, QP
  /// in RESET); must have the peer drain, reset and connect its QP to it (see
  /// `accept_reconnect`) and return the peer's new info. Must itself time out.
  using ReconnectFn = std::function<Result<QpInfo>(const QpInfo& local)>;

  struct Stats {
    uint64_t ops_completed = 0;
    uint64_t ops_failed = 0;
    uint64_t bytes = 0;
    uint64_t work_requests = 0;
    uint64_t signaled = 0;
    uint64_t completions = 0;
    uint64_t recoveries = 0;
    uint64_t inline_requests = 0;  ///< work requests posted with IBV_SEND_INLINE
  };

  static Result<std::unique_ptr<RdmaQueuePair>> create(const std::shared_ptr<RdmaDomain>& domain,
                                                       const Options& options);
  static Result<std::unique_ptr<RdmaQueuePair>> create(const std::shared_ptr<RdmaDomain>& domain);

  /// Destroys the QP; ops still outstanding complete with an error saying so.
  ~RdmaQueuePair();

  RdmaQueuePair(const RdmaQueuePair&) = delete;
  RdmaQueuePair& operator=(const RdmaQueuePair&) = delete;

  const std::shared_ptr<RdmaDomain>& domain() const { return domain_; }
  /// The shared completion queue this QP's completions go to (null: a CQ of its own).
  const std::shared_ptr<CompletionRouter>& router() const { return options_.completions; }
  /// "rxe0 QP 17".
  std::string describe() const;
  /// This side's connection info (send to the peer).
  QpInfo local_info() const;
  bool connected() const;

  /// Connects to the peer described by `remote`; `reconnect` is used by `recover`.
  Status connect(const QpInfo& remote, ReconnectFn reconnect);
  /// Connects the QP to itself (same-process loopback), recoverable without a peer.
  Status connect_loopback();
  /// Connects two QPs of this process to each other; each recovers through the other.
  static Status connect_pair(RdmaQueuePair& a, RdmaQueuePair& b);

  // -- asynchronous interface --------------------------------------------------------------

  /// Validates and queues `op`; `done` is called exactly once from a thread calling
  /// `progress` (or from the destructor). Validation errors are returned here instead.
  Status submit(RdmaOp op, OpCallback done);
  /// Like submit, but leaves the op queued until `post_queued()` (or the next `progress` or
  /// submit): ops queued together are posted as one chain of work requests (one doorbell, one
  /// signaled completion).
  Status submit_queued(RdmaOp op, OpCallback done);
  /// Posts what `submit_queued` left queued (as far as the send queue has room).
  void post_queued();

  /// Polls completions in batches, runs callbacks, posts queued work. Returns the number of
  /// completions handled. Never blocks on another thread's poll (returns 0 instead). On a
  /// shared CQ (invariant 10) this polls it for all its QPs.
  int progress();

  // -- blocking interface ------------------------------------------------------------------

  /// Runs one op to completion or until `timeout` (then kTimeout, with the QP flushed).
  /// Recovers the QP first if it is in ERR.
  OpResult execute(RdmaOp op, std::chrono::milliseconds timeout);

  /// Submits all ops together (one posted chain where slots allow) and waits for all; one
  /// result per op, in order. A failing op does not hide the others' results.
  std::vector<OpResult> execute_batch(std::vector<RdmaOp> ops, std::chrono::milliseconds timeout);

  // -- error handling ----------------------------------------------------------------------

  /// Moves the QP to ERR: every outstanding op completes with an error. `reason` is recorded
  /// and put into those ops' errors.
  Status abort(const std::string& reason);
  /// Progresses until no work request is outstanding, or fails with kTimeout.
  Status drain(std::chrono::milliseconds timeout);
  /// True when the QP hit an error and must be recovered before more work is posted.
  bool needs_recovery() const;
  /// The incarnation of the peer's domain this QP is connected to (0: not connected, or a peer
  /// that did not say).
  uint64_t remote_incarnation() const;
  /// Drains, resets, and reconnects through the reconnect function (or to itself).
  Status recover();
  /// The peer side of `recover`: drains, resets with a new PSN, connects to `remote`, and
  /// returns this side's new info.
  Result<QpInfo> accept_reconnect(const QpInfo& remote);

  Stats stats() const;
  /// Send work requests currently posted and not yet retired.
  size_t outstanding_work_requests() const;
  /// True when no accepted op is waiting for completion.
  bool idle() const;
  /// Largest WRITE/SEND work request posted inline, bytes (0: none; invariant 8).
  uint32_t inline_limit() const;
  /// Entries of the completion queue, and the most send and receive work requests posted at
  /// once (invariant 7: entries >= send + receive).
  int completion_queue_entries() const;
  uint32_t send_limit() const;
  uint32_t receive_limit() const;

private:
  struct Op;
  struct PostedWr {
    uint64_t seq;
    uint64_t op_id;
  };
  using Done = CompletedOps;

  RdmaQueuePair(std::shared_ptr<RdmaDomain> domain, const Options& options);

  // CompletionTarget (invariant 10): called by the router with its poll mutex held.
  void take_completions(const ibv_wc* wcs, int count, Done& done) override;
  void take_poll_error(const Error& error, Done& done) override;
  void take_credit(Done& done) override;

  /// The lock that keeps polls out while the QP is reset or replaced: the router's poll mutex
  /// on a shared CQ, this QP's own otherwise. Taken before `mu_`.
  std::mutex& poll_lock();
  /// Creates `qp_` on `cq_` and, on a shared CQ, attaches it (poll lock held, or not shared).
  Status create_qp_locked();
  /// The id of the next work request (invariant 10: from the router on a shared CQ).
  uint64_t next_wr_id_locked();
  /// One credit for the next work request (invariant 10); false: none left, the router calls
  /// `take_credit` once there are.
  bool take_credit_locked(uint32_t want);
  /// Forgets every posted work request (their credits go back).
  void clear_in_flight_locked();

  /// `caps`: the QP's, read under mu_ (a recovery may replace the QP meanwhile).
  Status validate(const RdmaOp& op, const ibv_qp_cap& caps) const;
  void pump_locked(Done& done);
  void handle_completion_locked(const ibv_wc& wc, Done& done);
  void retire_locked(Op& op, const ibv_wc* wc, Done& done);
  void maybe_finish_locked(uint64_t op_id, Done& done);
  void enter_error_locked(const std::string& cause);
  void fail_all_locked(const Error& error, Done& done);
  static void run(Done& done);
  Status connect_locked(const QpInfo& remote);
  QpInfo local_info_locked() const;
  Status reset_locked();
  Status recreate_qp_locked();
  /// Invariants 7 and 8 for a new QP: grows the CQ (or lowers the posting limits) and takes
  /// the granted inline size.
  Status fit_queues_locked();
  /// After a drain: RESET the QP, or, if the drain failed, recreate it and fail the ops whose
  /// work requests it discarded (all ops, or with `keep_queued` only those with posted work).
  Status restart_locked(const Status& drained, bool keep_queued, Done& done);
  void withdraw_after_timeout(std::chrono::milliseconds timeout, const std::vector<uint64_t>& ids);
  /// The blocking calls' wait: polls until `finished()`; at `deadline` calls `at_deadline()`,
  /// flushes (withdraws `ids`) and waits, bounded, for the flush. True if the deadline passed.
  bool wait_for(const std::function<bool()>& finished,
                std::chrono::steady_clock::time_point deadline, std::chrono::milliseconds timeout,
                const uint64_t* ids, size_t id_count, const std::function<void()>& at_deadline);
  std::string timeout_message(OpKind kind, uint64_t bytes, std::chrono::milliseconds timeout) const;
  Status submit_internal(RdmaOp op, OpCallback done, uint64_t* id_out, bool post_now = true);

  std::shared_ptr<RdmaDomain> domain_;
  Options options_;
  uint64_t max_message_ = 0;
  uint32_t signal_interval_ = 1;
  uint32_t send_limit_ = 0;    ///< send work requests outstanding at most (invariants 3, 7)
  uint32_t recv_limit_ = 0;    ///< receive work requests outstanding at most
  uint32_t inline_limit_ = 0;  ///< largest inline work request, bytes (invariant 8)
  std::shared_ptr<CompletionQueue> cq_;
  std::unique_ptr<QueuePair> qp_;

  mutable std::mutex mu_;
  std::mutex poll_mu_;
  std::mutex recover_mu_;
  bool connected_ = false;
  bool loopback_ = false;
  bool error_ = false;
  std::string error_cause_;
  uint32_t local_psn_ = 0;
  QpInfo remote_;
  ReconnectFn reconnect_;
  uint64_t next_op_id_ = 1;
  uint64_t next_wr_seq_ = 1;
  uint64_t posted_wrs_ = 0;  ///< send work requests posted (for the signal interval)
  uint32_t credit_ = 0;      ///< router credits taken and not yet used (invariant 10)
  bool resuming_ = false;    ///< in take_credit: the router serves waiting QPs first
  /// submit_queued left ops for post_queued: `progress` on a shared CQ posts them.
  std::atomic<bool> queued_waiting_{false};
  std::unordered_map<uint64_t, std::unique_ptr<Op>> ops_;
  std::deque<uint64_t> pending_;
  std::deque<PostedWr> send_in_flight_;
  std::deque<PostedWr> recv_in_flight_;
  std::vector<uint64_t> atomic_scratch_;
  RdmaBuffer atomic_buffer_;
  std::vector<int> free_atomic_slots_;
  // Scratch for pump_locked (guarded by mu_): one posted chain of send work requests.
  std::vector<ibv_send_wr> chain_;
  std::vector<ibv_sge> chain_sges_;
  std::vector<std::pair<uint32_t, uint32_t>> chain_sge_spans_;  ///< (first SGE, count) per WR
  std::vector<uint64_t> chain_ops_;
  Stats stats_;
};

}  // namespace caf_rdma
