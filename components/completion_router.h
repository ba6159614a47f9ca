// CompletionRouter: one completion queue shared by many queue pairs of a device, polled in one
// place and each completion handed to the queue pair it belongs to. A poller then sweeps one CQ
// per device instead of one per peer, and a node with many peers pins one CQ, not one per QP.
//
// Invariants:
//  1. The CQ never overflows: a work request is posted only with a credit taken from the
//     router, and the credit comes back when its completion is polled. Requests given up
//     without one (their QP destroyed or reset with them outstanding) return their credits
//     (`park`) only after a later poll found the CQ empty: their completions, if the device
//     made any, are gone from it by then. A quarter of the entries stays spare besides.
//  2. Targets are attached and detached, and completions dispatched, only under
//     `poll_mutex()`: once `detach` returns, no completion is being or will be handed to that
//     target. Lock order: `poll_mutex()` before any target's own lock.
//  3. A completion whose QP number has no target (its QP was destroyed with requests
//     outstanding) is dropped and counted (`Stats::unrouted`). Work request ids are taken from
//     one counter per router (`next_wr_id`), never reused: a completion of a destroyed QP that
//     reaches a new QP of the same number names an id older than all of the new QP's, and
//     retires nothing.
//  4. Callbacks of completed ops run after `poll` released its locks, in the polling thread.
//  5. No target starves: while any target waits for credits, only the waiting ones get credits
//     (`acquire` refuses the others, which then wait too), and each `poll` resumes them in the
//     order they began to wait.
#pragma once

#include <infiniband/verbs.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "components/rdma_op.h"
#include "primitives/completion_queue.h"

namespace caf_rdma {

/// Ops finished while locks were held; their callbacks run after.
using CompletedOps = std::vector<std::pair<OpCallback, OpResult>>;

/// What a router hands completions to (RdmaQueuePair). Each call is made with the router's
/// poll mutex held; the target takes its own lock inside.
class CompletionTarget {
public:
  /// Completions of this target's QP, in CQ order.
  virtual void take_completions(const ibv_wc* wcs, int count, CompletedOps& done) = 0;
  /// The shared CQ failed (ibv_poll_cq error): every op outstanding fails with `error`.
  virtual void take_poll_error(const Error& error, CompletedOps& done) = 0;
  /// Credits were returned after this target found none: post what waits.
  virtual void take_credit(CompletedOps& done) = 0;

protected:
  CompletionTarget() = default;
  ~CompletionTarget() = default;
  CompletionTarget(const CompletionTarget&) = default;
  CompletionTarget& operator=(const CompletionTarget&) = default;
};

class CompletionRouter {
public:
  struct Stats {
    uint64_t polls_with_completions = 0;
    uint64_t completions = 0;
    uint64_t unrouted = 0;        ///< completions of QPs no longer attached (invariant 3)
    uint64_t credit_waits = 0;    ///< times a target found no credit (invariant 1)
    uint64_t attached = 0;        ///< targets attached now
    uint64_t credits = 0;         ///< credits in all
    uint64_t credits_free = 0;    ///< credits not taken now
    uint64_t credits_parked = 0;  ///< given back, usable after the next empty poll
  };

  /// A router over a new CQ of at least `entries` entries on `context`.
  static Result<std::shared_ptr<CompletionRouter>> create(std::shared_ptr<DeviceContext> context,
                                                          int entries);

  CompletionRouter(const CompletionRouter&) = delete;
  CompletionRouter& operator=(const CompletionRouter&) = delete;
  ~CompletionRouter() = default;

  const std::shared_ptr<CompletionQueue>& completion_queue() const { return cq_; }

  /// Held by `attach`/`detach` callers and by `poll` while dispatching (invariant 2).
  std::mutex& poll_mutex() { return poll_mu_; }
  /// Both with `poll_mutex()` held.
  void attach(uint32_t qp_num, CompletionTarget* target);
  void detach(uint32_t qp_num, const CompletionTarget* target);

  /// Polls a batch and dispatches it; returns the completions handled (0 when another thread
  /// is polling: never waits for it).
  int poll();

  /// Takes up to `want` credits; returns how many it got (maybe 0). `resuming`: called from
  /// `take_credit` (invariant 5).
  uint32_t acquire(uint32_t want, bool resuming);
  /// Credits of retired work requests (their completions were polled).
  void release(uint64_t count);
  /// Credits of work requests given up without their completion; with `poll_mutex()` held
  /// (invariant 1).
  void park(uint64_t count);
  /// `target` found no credit: `poll` calls its `take_credit` once credits are back.
  void wait_for_credit(CompletionTarget* target);

  /// Ids for work requests posted on this router's CQ (invariant 3); below bit 63.
  uint64_t next_wr_id() { return next_wr_id_.fetch_add(1, std::memory_order_relaxed); }

  /// Ops accepted and not yet finished on all attached queue pairs (for a poller's idle test).
  void op_started() { active_ops_.fetch_add(1, std::memory_order_relaxed); }
  void op_finished() { active_ops_.fetch_sub(1, std::memory_order_relaxed); }
  bool idle() const { return active_ops_.load(std::memory_order_relaxed) == 0; }

  Stats stats() const;

private:
  CompletionRouter(std::shared_ptr<CompletionQueue> cq, uint64_t credits);
  void resume_starved_locked(CompletedOps& done);

  std::shared_ptr<CompletionQueue> cq_;
  const uint64_t credits_;
  std::atomic<uint64_t> free_credits_;
  std::atomic<uint64_t> next_wr_id_{1};
  std::atomic<int64_t> active_ops_{0};

  std::mutex poll_mu_;
  std::atomic<uint64_t> attached_{0};
  std::unordered_map<uint32_t, CompletionTarget*> targets_;  ///< guarded by poll_mu_

  std::mutex starved_mu_;  ///< a leaf lock: taken under any other
  std::vector<CompletionTarget*> starved_;
  std::atomic<bool> any_starved_{false};
  uint64_t parked_ = 0;                    ///< guarded by poll_mu_ (invariant 1)
  std::atomic<uint64_t> parked_count_{0};  ///< parked_, for stats

  std::atomic<uint64_t> polls_with_completions_{0};
  std::atomic<uint64_t> completions_{0};
  std::atomic<uint64_t> unrouted_{0};
  std::atomic<uint64_t> credit_waits_{0};
};

}  // namespace caf_rdma
