// QpBlocking: the blocking calls of an RdmaQueuePair (`execute`, `execute_batch`): submit, poll
// until done, and on timeout flush, so that no buffer of a returned op is touched by the NIC
// afterwards. Not used alone: the queue pair owns one.
//
// Invariants:
//  1. A blocking call returns once each of its ops completed, or at its deadline: then the
//     queue pair is moved to ERR and drained (its posted work requests flushed) before the
//     call returns; ops of the call that were only queued are withdrawn. If the device does
//     not flush within `drain_timeout`, the QP is destroyed (the NIC stops for sure) and every
//     op still outstanding on it fails.
//  2. A queue pair in ERR takes no blocking call: it fails at once (its user makes a new QP).
//  3. No call hangs: after a timeout, the wait for the flush is itself bounded.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "components/detail/qp_state.h"
#include "components/qp_completions.h"

namespace caf_rdma {

class RdmaQueuePair;

class QpBlocking {
public:
  using Clock = std::chrono::steady_clock;

  /// `drain_timeout`: how long a flush may take (RdmaQueuePair::Options::drain_timeout).
  QpBlocking(RdmaQueuePair& qp, detail::QpState& state, QpCompletions& completions,
             std::chrono::milliseconds drain_timeout)
      : qp_(qp), state_(state), completions_(completions), drain_timeout_(drain_timeout) {}

  OpResult execute(RdmaOp op, std::chrono::milliseconds timeout);
  std::vector<OpResult> execute_batch(std::vector<RdmaOp> ops, std::chrono::milliseconds timeout);

private:
  /// An error when the QP is in ERR (invariant 2).
  Status refuse_if_in_error() const;
  /// Polls until `finished()`; at `deadline` calls `at_deadline()`, flushes (withdraws `ids`)
  /// and waits, bounded, for the flush. True if the deadline passed.
  bool wait_for(const std::function<bool()>& finished, Clock::time_point deadline,
                std::chrono::milliseconds timeout, const uint64_t* ids, size_t id_count,
                const std::function<void()>& at_deadline);
  /// Invariant 1: ERR, drain, withdraw the call's queued ops `ids`.
  void withdraw_after_timeout(std::chrono::milliseconds timeout, const uint64_t* ids,
                              size_t id_count);
  /// Progresses until no work request is outstanding, or fails with kTimeout.
  Status drain(std::chrono::milliseconds timeout);
  std::string timeout_message(OpKind kind, uint64_t bytes, std::chrono::milliseconds timeout) const;

  RdmaQueuePair& qp_;
  detail::QpState& state_;
  QpCompletions& completions_;
  std::chrono::milliseconds drain_timeout_;
};

}  // namespace caf_rdma
