// NicPath: what the two RDMA paths (rdma_path.h, staged_path.h) share: the queue pair to the
// op's owner (the loopback QP, the peer's initiated QP, or a wait for its handshake), posting
// on it, the error path of a failed RDMA op, the owner's answers (why its NIC refused an
// access, verify mode's checksums) and the flush at the deadline.
//
// Invariants:
//  1. Manager invariant 3: ops to one peer wait for that peer's one handshake (Peer::waiting)
//     and are posted only on the QP this manager initiated.
//  2. Manager invariant 4: a QP in ERR that an op meets is dropped (destroyed, so the NIC
//     stops and whatever it held completes flushed); the next op makes a new one.
//  3. An op flushed because another op took its QP to ERR runs once more on a new QP, where
//     the path allows it (reads and writes are idempotent; a staged op's bounce buffer is not).
//  4. Manager invariant 5: at the deadline the op's QP is flushed and the reply waits for the
//     flush; a flush that overruns drain_timeout destroys the QP before the reply.
//  5. An op whose handle names another incarnation of its owner's device than the QP is
//     connected to is never posted (its remote key is not for this connection): it is rerouted.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <type_traits>
#include <vector>

#include "actors/rdma_messages.h"
#include "actors/transfer/transfer_path.h"
#include "components/rdma_op.h"
#include "components/rdma_queue_pair.h"

namespace caf_rdma::detail {

/// What an RDMA op keeps of its use of the NIC.
struct NicUse {
  std::weak_ptr<RdmaQueuePair> qp;  ///< the QP it was posted on (peers own QPs)
  bool retried = false;             ///< flushed once (another op's error) and posted again
  bool awaiting_owner = false;      ///< the NIC is done; waiting for the owner's answer
};

class NicPath : public TransferPath {
public:
  using TransferPath::TransferPath;

  /// The QP to the op's owner is up (a handshake ended, or it was there): post the op on it,
  /// unless its handle is for another incarnation of the owner's device (invariant 5).
  void qp_ready(OpId id, const std::shared_ptr<RdmaQueuePair>& qp);
  /// A completion of the op (of its chunk `chunk`) came back from the NIC.
  virtual void completed(OpId id, TransferOutcome outcome, OpFault fault, uint32_t chunk) = 0;
  bool deadline(OpId id, DeadlineStage stage) override;
  /// Manager invariant 8: the ops of this path that the NIC may still be moving (not those
  /// waiting for their owner's answer).
  std::vector<OpId> on_nic() const;

protected:
  /// The op's NicUse (null when the path keeps nothing for it).
  virtual NicUse* use(OpId id) = 0;
  virtual const NicUse* use(OpId id) const = 0;
  virtual std::vector<OpId> ops() const = 0;
  /// Posts the op's work on `qp` (its incarnation checked).
  virtual void post(OpId id, const std::shared_ptr<RdmaQueuePair>& qp) = 0;
  /// Whether an op flushed by another op's error may run once more (invariant 3).
  virtual bool may_retry() const = 0;

  /// Finds the op's QP (invariant 1) and posts on it, now or once its handshake ended.
  void connect(OpId id);
  /// Posts `rop` for the op on `qp` (queued while a batch starts); its completion comes back
  /// as OpDone naming `chunk`; `landed` (may be null) is set when it did.
  Status submit(OpId id, uint32_t chunk, const std::shared_ptr<RdmaQueuePair>& qp, RdmaOp rop,
                const std::shared_ptr<std::atomic<bool>>& landed);
  /// Invariant 2: drops the op's QP if it is in ERR.
  void drop_if_broken(OpId id);
  /// The error path of a failed op: peer down, timeout, retry (invariant 3), the owner's
  /// refusal, or the NIC's error as it is.
  void failed(OpId id, TransferOutcome outcome, OpFault fault);
  /// The NIC refused the remote access: asks the owner why (one bounded request) and ends the
  /// op with the owner's reason, or `outcome` if it sees none.
  void explain_refusal(OpId id, TransferOutcome outcome);
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
};

}  // namespace caf_rdma::detail
