// QpEndpoint: a reliable-connected queue pair as its users see it (the RDMA manager's paths and
// parts, RdmaClient's direct lanes): connect it, submit ops to it, poll it, abort it. How one is
// made is its transport's business: RdmaQueuePair (rdma_queue_pair.h, ibverbs) is the real one;
// a fake one (named as such, in tests) can stand in its place. Issue 49's transport seam: the
// actors layer holds queue pairs only through this interface.
//
// Invariants (each implementation keeps them; rdma_queue_pair.h says how the real one does):
//  1. Every op accepted by `submit` or `submit_queued` completes exactly once through its
//     callback, with the first error any of its work met (or success); an op they reject (the
//     returned error) never touches memory and its callback is never called.
//  2. Once in error (`needs_recovery()`: a timeout, a remote error, `abort`) a queue pair stays
//     there: it moves no more bytes, and its ops still outstanding complete flushed. Its user
//     drops it and makes a new one.
//  3. An op whose RemoteBuffer names another incarnation of the peer's device than the one this
//     queue pair is connected to is refused by `submit` (its key may name other memory now).
//  4. Thread-safe: any number of threads may submit, execute and progress at once.
//  5. A list op (RdmaOp::list) moves its ranges in order and answers once; its result's
//     `list_landed` is exact from below (the ranges known to be in place, all on success).
//  6. A blocking call that ends without its op's completion (a timeout, a stop) answers only
//     once the NIC no longer touches the op's memory.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "components/completion_router.h"
#include "components/qp_traffic.h"
#include "components/rdma_op.h"
#include "primitives/qp_info.h"
#include "primitives/status.h"

namespace caf_rdma {

/// Counters of one queue pair (QpEndpoint::stats).
struct QpStats {
  uint64_t ops_completed = 0;
  uint64_t ops_failed = 0;
  uint64_t bytes = 0;
  uint64_t work_requests = 0;
  uint64_t signaled = 0;
  uint64_t completions = 0;
  uint64_t inline_requests = 0;  ///< work requests posted inline (IBV_SEND_INLINE)
};

/// What the device granted one queue pair (QpEndpoint::limits).
struct QpLimits {
  uint32_t send = 0;           ///< send work requests outstanding at most
  uint32_t receive = 0;        ///< receive work requests outstanding at most
  uint32_t inline_bytes = 0;   ///< largest WRITE/SEND work request posted inline (0: none)
  int completion_entries = 0;  ///< entries of the queue pair's completion queue
};

/// How a queue pair is made (Nic::make_qp).
struct QpOptions {
  /// Largest message per work request; 0 = the port's max_msg_sz. Smaller values split
  /// transfers into more requests (used by tests to exercise splitting).
  uint64_t max_message_bytes = 0;
  /// Signal at least every this many send work requests; 0 = max_send_wr / 4.
  uint32_t signal_interval = 0;
  /// How long flushing a QP after a timeout may take before the QP is destroyed.
  std::chrono::milliseconds drain_timeout{5000};
  /// A completion queue shared with other QPs of the same device (Nic::shared_completions;
  /// RdmaQueuePair invariant 10); null: the QP takes its own completions.
  std::shared_ptr<CompletionRouter> completions;
  /// Its packets' traffic class and service level, where not the device's (a priority class's
  /// queue pairs: ManagerOptions::latency_traffic, background_traffic).
  QpTraffic traffic;
};

class QpEndpoint {
public:
  QpEndpoint() = default;
  QpEndpoint(const QpEndpoint&) = delete;
  QpEndpoint& operator=(const QpEndpoint&) = delete;
  /// Ops still outstanding complete with an error saying the queue pair went (invariant 1).
  virtual ~QpEndpoint() = default;

  /// "rxe0 QP 17".
  virtual const std::string& describe() const = 0;
  /// The completion queue shared with other queue pairs that its completions go to, polled
  /// for all of them at once (CompletionPoller); null: `progress` takes its completions.
  virtual const std::shared_ptr<CompletionRouter>& router() const = 0;
  /// This side's connection info (sent to the peer).
  virtual QpInfo local_info() const = 0;
  /// Connects to the peer described by `remote` (once).
  virtual Status connect(const QpInfo& remote) = 0;
  /// Connects the queue pair to itself (same-process loopback).
  virtual Status connect_loopback() = 0;

  /// Validates and queues `op`; `done` is called exactly once from a thread calling `progress`
  /// (or from the destructor). Validation errors are returned here instead (invariant 1).
  virtual Status submit(RdmaOp op, OpCallback done) = 0;
  /// Like submit, but leaves the op queued until `post_queued()` (or the next `progress` or
  /// submit): ops queued together are posted as one chain (one doorbell).
  virtual Status submit_queued(RdmaOp op, OpCallback done) = 0;
  /// Posts what `submit_queued` left queued.
  virtual void post_queued() = 0;
  /// Takes completions, runs callbacks, posts queued work; returns the completions handled.
  /// Never blocks on another thread's poll (returns 0 instead).
  virtual int progress() = 0;

  /// Runs one op to completion or until `timeout` (then kTimeout, the queue pair flushed and in
  /// error). Fails at once on a queue pair in error.
  OpResult execute(RdmaOp op, std::chrono::milliseconds timeout) {
    return execute_or_stop(std::move(op), timeout, nullptr);
  }
  /// execute, ended early once `*stop` (when not null) is set: then kCancelled, the queue pair
  /// flushed and in error as at a timeout, so that no byte of the op moves after the answer
  /// (invariant 6). An op that completed before the stop was seen keeps its own result.
  virtual OpResult execute_or_stop(RdmaOp op, std::chrono::milliseconds timeout,
                                   const std::atomic<bool>* stop) = 0;
  /// Submits all ops together and waits for all; one result per op, in order.
  virtual std::vector<OpResult> execute_batch(std::vector<RdmaOp> ops,
                                              std::chrono::milliseconds timeout) = 0;

  /// Puts the queue pair in error (invariant 2); `reason` goes into its ops' errors.
  virtual Status abort(const std::string& reason) = 0;
  /// True once in error (invariant 2).
  virtual bool needs_recovery() const = 0;
  /// The incarnation of the peer's device this queue pair is connected to (0: not connected,
  /// or a peer that did not say; invariant 3).
  virtual uint64_t remote_incarnation() const = 0;

  virtual QpStats stats() const = 0;
  /// Send work requests posted and not yet retired.
  virtual size_t outstanding_work_requests() const = 0;
  /// True when no accepted op is waiting for completion.
  virtual bool idle() const = 0;
  /// Accepted ops waiting for completion (queued or posted).
  virtual size_t pending_ops() const = 0;
  /// What the device granted.
  virtual QpLimits limits() const = 0;
};

}  // namespace caf_rdma
