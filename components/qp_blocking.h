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
//  4. A call given a stop flag ends early once the flag is set, exactly as at its deadline
//     (invariant 1: ERR, drained or destroyed, before it returns), answering kCancelled for
//     each op not finished when the flag was seen; an op that finished first keeps its result.
//     A flag set before the call posts nothing: kCancelled, the queue pair untouched.
#pragma once

#include <atomic>
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

  /// `stop`: null, or a flag whose setting ends the call early (invariant 4).
  OpResult execute(RdmaOp op, std::chrono::milliseconds timeout,
                   const std::atomic<bool>* stop = nullptr);
  std::vector<OpResult> execute_batch(std::vector<RdmaOp> ops, std::chrono::milliseconds timeout);

private:
  /// An error when the QP is in ERR (invariant 2).
  Status refuse_if_in_error() const;
  /// How a wait ended.
  enum class Ended { kFinished, kDeadline, kStopped };
  /// Polls until `finished()`; at `deadline`, or once `*stop` is set, calls `at_deadline()`,
  /// flushes (withdraws `ids`) and waits, bounded, for the flush.
  Ended wait_for(const std::function<bool()>& finished, Clock::time_point deadline,
                 std::chrono::milliseconds timeout, const std::atomic<bool>* stop,
                 const uint64_t* ids, size_t id_count, const std::function<void()>& at_deadline);
  /// Invariant 1: ERR, drain, withdraw the call's queued ops `ids` (with `code`: kTimeout or
  /// kCancelled); `why` names the cause.
  void withdraw_after_timeout(ErrorCode code, const std::string& why, const uint64_t* ids,
                              size_t id_count);
  /// Progresses until no work request is outstanding, or fails with kTimeout.
  Status drain(std::chrono::milliseconds timeout);
  std::string timeout_message(OpKind kind, uint64_t bytes, std::chrono::milliseconds timeout) const;
  std::string stopped_message(OpKind kind, uint64_t bytes) const;

  RdmaQueuePair& qp_;
  detail::QpState& state_;
  QpCompletions& completions_;
  std::chrono::milliseconds drain_timeout_;
};

}  // namespace caf_rdma
