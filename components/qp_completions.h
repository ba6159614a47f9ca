// QpCompletions: the part of an RdmaQueuePair that retires work requests as their completions
// come, finishes ops, and moves the queue pair to ERR (errors, flushes). Not used alone: the
// queue pair owns one, and calls it with its mutex held.
//
// Invariants:
//  1. One completion retires every earlier work request of its queue (RC completes in order;
//     only some requests are signaled): each of them leaves the in-flight list once.
//  2. An op finishes (its callback is queued in `done`, to run after the locks are released)
//     exactly once: when none of its work requests is on the NIC any more and none will be
//     posted. It carries the first error any of its requests met.
//  3. An error completion moves the queue pair to ERR; every later error of another op there
//     is reported as flushed (OpFault::kFlushed, naming the first error): those ops did nothing
//     wrong and may be retried on a new queue pair. A queue pair in ERR stays in ERR.
//  4. Every retired work request returns its shared-CQ credit; requests given up without a
//     completion are parked with the router (CompletionRouter invariant 1).
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <string>

#include "components/completion_router.h"
#include "components/detail/atomic_scratch.h"
#include "components/detail/qp_state.h"

namespace caf_rdma {

class QpCompletions {
public:
  using Done = CompletedOps;

  QpCompletions(detail::QpState& state, detail::AtomicScratch& atomics)
      : state_(state), atomics_(atomics) {}

  /// Completions polled from the QP's CQ, in CQ order (invariant 1).
  void take_locked(const ibv_wc* wcs, int count, Done& done);
  /// Moves the QP to ERR (if it is not already), recording `cause`. Ops partly posted fail as
  /// interrupted; ops not posted at all stay queued until the QP is destroyed.
  void enter_error_locked(const std::string& cause);
  /// Every op fails with `error` (those already failed keep their own error).
  void fail_all_locked(const Error& error, Done& done);
  /// Finishes op `op_id` if nothing of it is outstanding (invariant 2).
  void finish_if_done_locked(uint64_t op_id, Done& done);
  /// Before the QP of a queue pair in ERR is destroyed: the ops still outstanding would have
  /// been flushed, and are so marked.
  void mark_flushed_locked();
  /// Forgets every posted work request (their credits are parked: invariant 4).
  void forget_in_flight_locked();
  /// Runs the callbacks of finished ops (no lock held) and empties `done`.
  static void run(Done& done);

private:
  void retire_locked(detail::QpOp& op, const ibv_wc* wc, Done& done);
  /// The error of `op`, whose work request completed with `wc` (not IBV_WC_SUCCESS).
  void record_failure_locked(detail::QpOp& op, const ibv_wc& wc);
  OpResult result_locked(const detail::QpOp& op);
  /// A list's ranges that landed (RdmaQueuePair invariant 13); 0 for any other op.
  uint64_t list_landed(const detail::QpOp& op) const;

  detail::QpState& state_;
  detail::AtomicScratch& atomics_;
};

}  // namespace caf_rdma
