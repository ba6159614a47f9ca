// RdmaQueuePair: the ibverbs QpEndpoint (qp_endpoint.h): a reliable-connected queue pair with flow
// control, selective signaling, batched completion polling, and timeouts that flush. Its parts:
// validation (qp_validation.h), posting (qp_posting.h), completions and errors (qp_completions.h),
// the blocking calls (qp_blocking.h); its state in detail/qp_state.h.
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
//     NIC cannot touch its buffers afterwards (a QP the device does not flush in time is
//     destroyed). A QP in ERR (timeout, remote access error, peer error, `abort`) stays in ERR:
//     it posts nothing more, `needs_recovery()` says so, `execute` on it fails at once, and its
//     user drops it and makes a new one (as the RDMA manager does: its invariant 4). Ops still
//     queued on it complete as flushed when it is destroyed.
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
// 11. The memory region that atomics' results land in is registered when the first atomic is
//     submitted, not with the QP (detail/atomic_scratch.h).
// 12. A posted receive waits on the peer, not on this side: `idle()` and the shared CQ's count
//     of active ops leave receives out, so standing receives keep no poller busy (their
//     completions are taken by the next poll that comes anyway, or one a user wakes).
// 13. A list (RdmaOp::list: many ranges of one local and one remote buffer) is one op with one
//     callback: checked in one pass (qp_validation.h invariant 5), cut into work requests as
//     they are posted, nothing allocated per range (qp_posting.h invariant 6). Its result's
//     `list_landed` is exact from below: every range on success; on failure (a timeout
//     included, said after the flush) the ranges whose every work request completed before the
//     first one that failed (RC completes in order), which are in place.
// 14. Its packets carry Options::traffic's traffic class and service level where set (-1: the
//     device's IbverbsConfig), from the moment it is connected (`traffic()` reads them back).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "components/completion_router.h"
#include "components/detail/atomic_scratch.h"
#include "components/detail/qp_state.h"
#include "components/qp_blocking.h"
#include "components/qp_completions.h"
#include "components/qp_endpoint.h"
#include "components/qp_posting.h"
#include "components/rdma_domain.h"
#include "components/rdma_op.h"

namespace caf_rdma {

class RdmaQueuePair final : public QpEndpoint, private CompletionTarget {
public:
  using Options = QpOptions;
  using Stats = QpStats;
  using Limits = QpLimits;

  static Result<std::unique_ptr<RdmaQueuePair>> create(const std::shared_ptr<RdmaDomain>& domain,
                                                       const Options& options = {});

  /// Destroys the QP; ops still outstanding complete with an error saying so.
  ~RdmaQueuePair() override;

  /// The shared completion queue this QP's completions go to (null: a CQ of its own).
  const std::shared_ptr<CompletionRouter>& router() const override { return state_.router; }
  /// "rxe0 QP 17".
  const std::string& describe() const override { return state_.name; }
  /// This side's connection info (send to the peer).
  QpInfo local_info() const override;

  /// Connects to the peer described by `remote` (once).
  Status connect(const QpInfo& remote) override;
  /// Connects the QP to itself (same-process loopback).
  Status connect_loopback() override;
  /// Connects two QPs of this process to each other.
  static Status connect_pair(RdmaQueuePair& a, RdmaQueuePair& b);

  // -- asynchronous interface --------------------------------------------------------------

  /// Validates and queues `op`; `done` is called exactly once from a thread calling
  /// `progress` (or from the destructor). Validation errors are returned here instead.
  Status submit(RdmaOp op, OpCallback done) override;
  /// Like submit, but leaves the op queued until `post_queued()` (or the next `progress` or
  /// submit): ops queued together are posted as one chain of work requests (one doorbell, one
  /// signaled completion).
  Status submit_queued(RdmaOp op, OpCallback done) override;
  /// Posts what `submit_queued` left queued (as far as the send queue has room).
  void post_queued() override;

  /// Polls completions in batches, runs callbacks, posts queued work. Returns the number of
  /// completions handled. Never blocks on another thread's poll (returns 0 instead). On a
  /// shared CQ (invariant 10) this polls it for all its QPs.
  int progress() override;

  // -- blocking interface (qp_blocking.h) --------------------------------------------------

  /// QpEndpoint::execute (inline there) and execute_or_stop: one op to completion, or until
  /// `timeout` (kTimeout) or the stop (kCancelled), with the QP flushed and in ERR then.
  /// Fails at once on a QP in ERR. (Inline: a caller's op goes straight to qp_blocking.cc,
  /// which submits it through submit_internal in rdma_queue_pair.cc.)
  OpResult execute_or_stop(RdmaOp op, std::chrono::milliseconds timeout,
                           const std::atomic<bool>* stop) override {
    return blocking_.execute(std::move(op), timeout, stop);
  }
  /// Submits all ops together (one posted chain where slots allow) and waits for all; one
  /// result per op, in order. A failing op does not hide the others' results.
  std::vector<OpResult> execute_batch(std::vector<RdmaOp> ops,
                                      std::chrono::milliseconds timeout) override {
    return blocking_.execute_batch(std::move(ops), timeout);
  }

  // -- errors ------------------------------------------------------------------------------

  /// Moves the QP to ERR: every outstanding op completes with an error. `reason` is recorded
  /// and put into those ops' errors.
  Status abort(const std::string& reason) override;
  /// True once the QP entered ERR: it takes no more work; drop it and make a new one
  /// (invariant 5).
  bool needs_recovery() const override;
  /// The incarnation of the peer's domain this QP is connected to (0: not connected, or a peer
  /// that did not say).
  uint64_t remote_incarnation() const override;

  Stats stats() const override;
  /// Send work requests currently posted and not yet retired.
  size_t outstanding_work_requests() const override;
  /// True when no accepted op is waiting for completion.
  bool idle() const override;
  /// Accepted ops waiting for completion (queued or posted).
  size_t pending_ops() const override;
  /// What the device granted (invariants 7 and 8: completion entries >= send + receive).
  Limits limits() const override;
  /// The traffic class and service level the device holds for it once connected (ibv_query_qp;
  /// invariant 14): Options::traffic where set, else the device's.
  Result<QpTraffic> traffic() const;

private:
  friend class QpBlocking;  // submits with an id, destroys the QP after a failed flush
  using Done = CompletedOps;

  RdmaQueuePair(std::shared_ptr<RdmaDomain> domain, const Options& options);

  // CompletionTarget (invariant 10): called by the router with its poll mutex held.
  void take_completions(const ibv_wc* wcs, int count, Done& done) override;
  void take_poll_error(const Error& error, Done& done) override;
  void take_credit(Done& done) override;

  Status submit_internal(RdmaOp op, OpCallback done, uint64_t* id_out, bool post_now = true);
  /// Destroys the QP (the NIC stops touching its buffers); poll lock and mutex held.
  void destroy_qp_locked();

  const Options options_;
  detail::QpState state_;
  detail::AtomicScratch atomics_;  ///< guarded by state_.mu
  QpCompletions completions_{state_, atomics_};
  QpPosting posting_{state_, completions_, atomics_, *this};
  QpBlocking blocking_{*this, state_, completions_, options_.drain_timeout};
  /// submit_queued left ops for post_queued: `progress` on a shared CQ posts them.
  std::atomic<bool> queued_waiting_{false};
};

}  // namespace caf_rdma
