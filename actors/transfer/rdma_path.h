// RdmaPath: one-sided RDMA READ or WRITE between the registered buffers themselves, on the queue
// pair to the op's owner: the QP (the loopback QP, the peer's initiated QP, or a wait for its
// handshake), posting on it, its completion, the error path of a failed op, the owner's answers
// (why its NIC refused an access, verify mode's checksums) and the flush at the deadline. The
// staged path (staged_path.h) is RDMA too, through bounce buffers: it derives from this one and
// replaces how an op is posted and completes.
//
// Invariants:
//  1. One work-request chain per op; a single small transfer (at most kInlinePollMaxBytes, not
//     in a batch) is polled for on the manager's thread for up to inline_poll before the
//     poller thread is woken (its OpDone then waits in our own mailbox).
//  2. While a batch starts, its ops are queued on their QPs and posted together, one chain per
//     QP (ManagerState::batch).
//  3. Manager invariant 3: ops to one peer wait for that peer's one handshake (PeerQps::waiting)
//     and are posted only on the QP this manager initiated.
//  4. Manager invariant 4: a QP in ERR that an op meets is dropped (destroyed, so the NIC
//     stops and whatever it held completes flushed); the next op makes a new one.
//  5. An op flushed because another op took its QP to ERR runs once more on a new QP, where
//     the path allows it (reads and writes are idempotent; a staged op's bounce buffer is not).
//     An atomic never runs twice: a flushed one may have been applied by the responder, so it
//     fails (answered by invariant 11). Verify mode does not checksum atomics (a shared word).
//  9. An atomic is the NIC's FETCH_ADD or CMP_SWAP; its result lands in the QP's scratch word
//     and is copied into the op's local range when it completes, before the manager hears of
//     it (so before the reply).
//  6. Manager invariant 5: at the deadline the op's QP is flushed and the reply waits for the
//     flush; a flush that overruns drain_timeout destroys the QP before the reply.
//  7. An op whose handle names another incarnation of its owner's device than the QP is
//     connected to is never posted (its remote key is not for this connection): it is rerouted.
//  8. A completion goes to the path that posted it (OpDone names it); one for an op that path
//     no longer keeps (ended, rerouted) is ignored.
// 10. Manager invariant 19: a striped op (manager/rails.h) ends once every slice completed;
//     a slice that failed on a rail runs once more on the managers' own queue pair; at the
//     deadline every queue pair with a slice of it is flushed (destroyed when that overruns).
// 11. A failure the NIC reported is explained by asking the op's owner (by the op's deadline),
//     unless the op's time is up, its peer is known down, or it runs once more (invariant 5);
//     the answer is owner_verdict.h's: the rule RdmaClient's direct lanes answer by too, so an
//     op fails with the same code and words on either.
// 12. Manager invariant 24: a cancel (DeadlineStage::kCancelled) flushes the op's queue pairs
//     as its timeout does, unless an op of another transfer is on one of them: then the op
//     ends by its own completion (a success stands; a failure answers `cancelled`), and its
//     timeout still flushes it should that come first.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include "actors/manager/rails.h"
#include "actors/rdma_messages.h"
#include "actors/transfer/transfer_path.h"
#include "components/qp_endpoint.h"
#include "components/rdma_op.h"

namespace caf_rdma::detail {

/// One slice of a striped op (invariant 10): its part of the op, the queue pair and rail it
/// runs on.
struct OpSlice {
  uint64_t offset = 0;  ///< into the op's range
  uint64_t length = 0;
  std::weak_ptr<QpEndpoint> qp;
  uint32_t rail = 0;
  bool done = false;
  bool failed_over = false;  ///< its rail failed; it runs again on the managers' own QP
};

/// What an RDMA op keeps of its use of the NIC.
struct NicUse {
  std::weak_ptr<QpEndpoint> qp;  ///< the QP it was posted on (peers own QPs)
  bool retried = false;          ///< flushed once (another op's error) and posted again
  bool awaiting_owner = false;   ///< the NIC is done; waiting for the owner's answer
  /// Its deadline or cancel flushed its queue pairs: kDrainOverdue may destroy them (a cancel
  /// that left a shared queue pair alone did not: invariant 12).
  bool flushed = false;
  /// A striped op's slices (empty: not striped), how many are still on the NIC, and the first
  /// error one ended with (the op's, once all ended).
  std::vector<OpSlice> slices;
  size_t open_slices = 0;
  std::optional<std::pair<TransferOutcome, OpFault>> slice_error;
};

class RdmaPath : public TransferPath {
public:
  using TransferPath::TransferPath;

  void start(OpId id) override;
  /// The QP to the op's owner is up (a handshake ended, or it was there): post the op on it,
  /// unless its handle is for another incarnation of the owner's device (invariant 7).
  void qp_ready(OpId id, const std::shared_ptr<QpEndpoint>& qp);
  /// OpDone: a completion of the op (of its chunk `chunk`) came back from the NIC (invariant 8).
  virtual void completed(OpId id, TransferOutcome outcome, OpFault fault, uint32_t chunk);
  bool deadline(OpId id, DeadlineStage stage) override;
  void forget(OpId id) override { ops_.erase(id); }
  /// The queue pair op `id` was last posted on (none: not posted, or gone).
  std::weak_ptr<QpEndpoint> queue_pair_of(OpId id) const {
    const NicUse* u = use(id);
    return u != nullptr ? u->qp : std::weak_ptr<QpEndpoint>{};
  }
  /// Manager invariant 8: the ops of this path that the NIC may still be moving (not those
  /// waiting for their owner's answer).
  std::vector<OpId> on_nic() const;
  /// Finds the op's QP (invariant 3) and posts on it, now or once its handshake ended.
  void connect(OpId id);

protected:
  /// Which path this is (OpDone names it: invariant 8).
  virtual PathKind kind() const { return PathKind::kRdma; }
  /// The op's NicUse (null when the path keeps nothing for it).
  virtual NicUse* use(OpId id);
  virtual const NicUse* use(OpId id) const;
  virtual std::vector<OpId> ops() const;
  /// Posts the op's work on `qp` (its incarnation checked).
  virtual void post(OpId id, const std::shared_ptr<QpEndpoint>& managers);
  /// Whether an op flushed by another op's error may run once more (invariant 5).
  virtual bool may_retry() const { return true; }

  /// Posts `rop` for the op on `qp` (queued while a batch starts); its completion comes back
  /// as OpDone naming this path and `chunk`; `landed` (may be null) is set when it did; an
  /// atomic's old value is copied to `old_value` (invariant 9).
  Status submit(OpId id, uint32_t chunk, const std::shared_ptr<QpEndpoint>& qp, RdmaOp rop,
                const std::shared_ptr<std::atomic<bool>>& landed, uint8_t* old_value = nullptr,
                bool slice = false);
  /// Invariant 12: whether an op of another transfer (on either RDMA path) may be on one of
  /// `qps`.
  bool others_on(OpId id, const std::vector<std::shared_ptr<QpEndpoint>>& qps) const;
  /// Invariant 4: drops the op's QP if it is in ERR.
  void drop_if_broken(OpId id);
  /// The error path of a failed op: peer down, timeout, retry (invariant 5), the owner's
  /// refusal, or the NIC's error as it is.
  void failed(OpId id, TransferOutcome outcome, OpFault fault);
  /// The NIC failed the op (`fault`): asks the owner (one request, by the op's deadline) and
  /// ends the op by owner_verdict (invariant 11).
  void explain_refusal(OpId id, TransferOutcome outcome, OpFault fault);
  /// Verify mode: compares both sides' checksums of the moved range, then ends the op.
  void verify(OpId id);

  /// The NicUse of `id` in a path's per-op map (null when the path keeps nothing for it), and
  /// the ops of such a map: what use() and ops() of each path return.
  template <class Map>
  static auto* find_use(Map& ops, OpId id) {
    auto it = ops.find(id);
    using Use = std::conditional_t<std::is_const_v<Map>, const NicUse, NicUse>;
    return it == ops.end() ? static_cast<Use*>(nullptr) : static_cast<Use*>(&it->second);
  }
  template <class Map>
  static std::vector<OpId> keys(const Map& ops) {
    std::vector<OpId> out;
    out.reserve(ops.size());
    for (const auto& entry : ops)
      out.push_back(entry.first);
    return out;
  }

private:
  /// Invariant 10: posts the op's slices on `primary` (unless not `with_primary`: the op goes
  /// whole to its one lane, `primary` taking it over if that fails) and `lanes`.
  void post_striped(OpId id, const std::shared_ptr<QpEndpoint>& primary,
                    const std::vector<StripeLane>& lanes, bool with_primary = true);
  /// Posts slice `i` of the op on `qp` (rail `rail`).
  Status post_slice(OpId id, uint32_t i, const std::shared_ptr<QpEndpoint>& qp, uint32_t rail);
  /// A completion of slice `i` of a striped op.
  void slice_completed(OpId id, uint32_t i, TransferOutcome outcome, OpFault fault);
  /// Invariant 10: slice `i` runs once more on the managers' own queue pair (counted as a
  /// failover); false when that queue pair is unusable or refused it (then `why` says so).
  bool fail_over(OpId id, uint32_t i, TransferOutcome* why);
  /// Slice `i` of `u` ended with `outcome` (the op keeps its first error); true when it was
  /// the last one still on a NIC.
  static bool end_slice(NicUse& u, uint32_t i, TransferOutcome outcome, OpFault fault);
  /// Ends a striped op once its last slice ended.
  void slices_ended(OpId id);

  std::map<OpId, NicUse> ops_;  ///< this path's own ops (the staged path keeps its own)
};

}  // namespace caf_rdma::detail
