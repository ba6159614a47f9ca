// RdmaPath: one-sided RDMA READ or WRITE between the registered buffers themselves, on the QP
// to the owner (nic_path.h has what it shares with the staged path).
//
// Invariants:
//  1. One work-request chain per op; a single small transfer (at most kInlinePollMaxBytes, not
//     in a batch) is polled for on the manager's thread for up to inline_poll before the
//     poller thread is woken (its OpDone then waits in our own mailbox).
//  2. While a batch starts, its ops are queued on their QPs and posted together, one chain per
//     QP (ManagerState::batch).
#pragma once

#include <map>

#include "actors/transfer/nic_path.h"

namespace caf_rdma::detail {

class RdmaPath final : public NicPath {
public:
  using NicPath::NicPath;

  void start(OpId id) override;
  void completed(OpId id, TransferOutcome outcome, OpFault fault, uint32_t chunk) override;
  void forget(OpId id) override { ops_.erase(id); }

private:
  NicUse* use(OpId id) override;
  const NicUse* use(OpId id) const override;
  std::vector<OpId> ops() const override;
  void post(OpId id, const std::shared_ptr<RdmaQueuePair>& qp) override;
  bool may_retry() const override { return true; }

  std::map<OpId, NicUse> ops_;
};

}  // namespace caf_rdma::detail
