// QpPosting: the part of an RdmaQueuePair that cuts accepted ops into work requests and posts
// them: chains of send work requests (one doorbell each), flow control (the send and receive
// limits, credits of a shared CQ), selective signaling and inline data. Not used alone: the
// queue pair owns one, and calls it with its mutex held.
//
// Invariants:
//  1. Ops are posted in submission order; an op is posted whole before the next one starts
//     (a later op never overtakes one that waits for send slots, credits or an atomic slot).
//  2. At most `limits.send` send and `limits.receive` receive work requests are outstanding;
//     on a shared CQ each posted request holds one of the router's credits, taken at most
//     kCreditBatch at a time, and the credits not used by a posting round go back at its end.
//  3. Every posted chain ends signaled, and so does every `signal_interval`-th request, so
//     the slots of a long chain are retired before it ends.
//  4. A WRITE or SEND work request of 1 to `limits.inline_bytes` bytes is posted inline.
//  5. A chain the device refuses in part moves the QP to ERR (the accepted prefix might end
//     unsignaled: nothing could retire it otherwise); the refused requests are taken back and
//     their ops fail with the ibv_post_send error. Nothing is posted on a QP in ERR.
//  6. A list (RdmaOp::list) is cut into work requests as it is posted: one per range (more for
//     a range over the maximum message), read from the shared table where it stands; nothing
//     is allocated per range, at submit or at post (the chain's vectors are reused).
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "components/completion_router.h"
#include "components/detail/atomic_scratch.h"
#include "components/detail/qp_state.h"
#include "components/qp_completions.h"

namespace caf_rdma {

class QpPosting {
public:
  using Done = CompletedOps;

  /// `target`: the queue pair, as the shared CQ's router knows it (to wait for credits).
  QpPosting(detail::QpState& state, QpCompletions& completions, detail::AtomicScratch& atomics,
            CompletionTarget& target)
      : state_(state), completions_(completions), atomics_(atomics), target_(target) {}

  /// The work requests of a validated op into `into` (ops larger than the maximum message are
  /// split); a list's are only counted (invariant 6). `caps`: the QP's, read under the queue
  /// pair's mutex.
  Status plan(const RdmaOp& op, const ibv_qp_cap& caps, detail::QpOp& into) const;
  /// Posts queued ops, as one chain of send work requests, as far as the limits allow.
  void post_locked(Done& done);
  /// Posts after the router returned credits this queue pair waited for (its turn first).
  void resume_locked(Done& done);

private:
  enum class Step { kNext, kStop };

  /// Posts (or chains) the work requests of the first queued op. kStop: nothing more fits.
  Step post_front_locked(Done& done);
  Step post_receive_locked(detail::QpOp& op, Done& done);
  Step append_sends_locked(detail::QpOp& op);
  /// The work requests of one op that is not a list.
  Result<std::vector<PlannedWorkRequest>> plan_one(const RdmaOp& op, const ibv_qp_cap& caps) const;
  /// Appends the op's next work request to the chain (invariants 3 and 4): `length` bytes to
  /// or from `remote_addr`, gathered from or scattered to `sges`.
  void append_send_locked(detail::QpOp& op, uint64_t remote_addr, uint64_t length,
                          const PlannedSge* sges, size_t sges_in);
  /// Appends a list's next work request: the next piece of its current range (invariant 6).
  void append_list_send_locked(detail::QpOp& op);
  /// Posts the chain built so far (invariant 5) and empties it.
  void flush_chain_locked(Done& done);
  /// The requests from `first` on were not posted (`rc`): takes them back, fails their ops.
  void take_back_locked(size_t first, int rc, Done& done);
  /// One credit for the next work request (invariant 2); false: none left, the router calls
  /// `take_credit` on the target once there are.
  bool take_credit_locked(uint32_t want);
  /// The id of the next work request (from the router on a shared CQ).
  uint64_t next_wr_id_locked();

  detail::QpState& state_;
  QpCompletions& completions_;
  detail::AtomicScratch& atomics_;
  CompletionTarget& target_;
  uint64_t next_wr_seq_ = 1;  ///< ids of a CQ of its own
  uint64_t posted_wrs_ = 0;   ///< send work requests posted (for the signal interval)
  uint32_t credit_ = 0;       ///< router credits taken and not yet used (invariant 2)
  bool resuming_ = false;     ///< in resume_locked: the router serves waiting QPs first
  // One chain of send work requests being built (reused from call to call: the hot path).
  std::vector<ibv_send_wr> chain_;
  std::vector<ibv_sge> chain_sges_;
  std::vector<std::pair<uint32_t, uint32_t>> chain_sge_spans_;  ///< (first SGE, count) per WR
  std::vector<uint64_t> chain_ops_;
};

}  // namespace caf_rdma
