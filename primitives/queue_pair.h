// QueuePair: RAII owner of an RC ibv_qp, and its state transitions.
//
// Destruction order: the QP is destroyed before the CQs and PD it holds shared_ptrs to.
// Invariants:
//  1. `connect` moves RESET -> INIT -> RTR -> RTS with the attributes of `IbverbsConfig`
//     (already clamped by the caller: timeout, retries, traffic class, service level) and the
//     peer's `QpInfo`.
//  2. `reset` returns the QP to RESET from any state (used to recover from ERR).
#pragma once

#include <infiniband/verbs.h>

#include <memory>
#include <string>

#include "primitives/completion_queue.h"
#include "primitives/ibverbs_config.h"
#include "primitives/protection_domain.h"
#include "primitives/qp_info.h"

namespace caf_rdma {

class QueuePair {
public:
  /// Creates an RC QP with the work request, SGE and inline limits of `config` (without inline
  /// data where the device refuses it); `caps()` holds what the device granted, which may be
  /// more than requested.
  static Result<std::unique_ptr<QueuePair>> create(std::shared_ptr<ProtectionDomain> pd,
                                                   std::shared_ptr<CompletionQueue> send_cq,
                                                   std::shared_ptr<CompletionQueue> recv_cq,
                                                   const IbverbsConfig& config);

  QueuePair(const QueuePair&) = delete;
  QueuePair& operator=(const QueuePair&) = delete;
  ~QueuePair();

  ibv_qp* get() const { return qp_; }
  uint32_t qp_num() const { return qp_->qp_num; }
  const ibv_qp_cap& caps() const { return caps_; }
  /// "rxe0 QP 17", for messages.
  std::string describe() const;

  /// RESET -> INIT -> RTR -> RTS towards `remote`. `local_psn` is this side's send PSN
  /// (the one sent to the peer in our QpInfo); `gid_index` the local GID index (RoCE/GRH).
  Status connect(const IbverbsConfig& config, const QpInfo& remote, uint32_t local_psn,
                 int gid_index);

  /// Moves to ERR: outstanding work requests complete with IBV_WC_WR_FLUSH_ERR.
  Status to_error();

  /// Moves to RESET from any state.
  Status reset();

  /// Current state (ibv_query_qp).
  Result<ibv_qp_state> state() const;

  /// READs/atomics this QP may have outstanding as initiator (ibv_query_qp max_rd_atomic).
  Result<uint8_t> max_rd_atomic() const;

  /// The address vector it was connected with (ibv_query_qp IBV_QP_AV): service level, and
  /// the GRH's traffic class where it has one.
  Result<ibv_ah_attr> address() const;

  /// ibv_post_send; the error names the failing work request id.
  Status post_send(ibv_send_wr* wr);

  /// ibv_post_recv.
  Status post_recv(ibv_recv_wr* wr);

private:
  QueuePair(std::shared_ptr<ProtectionDomain> pd, std::shared_ptr<CompletionQueue> send_cq,
            std::shared_ptr<CompletionQueue> recv_cq, ibv_qp* qp, const ibv_qp_cap& caps)
      : pd_(std::move(pd)),
        send_cq_(std::move(send_cq)),
        recv_cq_(std::move(recv_cq)),
        qp_(qp),
        caps_(caps) {}

  Status modify(ibv_qp_attr& attr, int mask, const char* what);

  std::shared_ptr<ProtectionDomain> pd_;
  std::shared_ptr<CompletionQueue> send_cq_;
  std::shared_ptr<CompletionQueue> recv_cq_;
  ibv_qp* qp_;
  ibv_qp_cap caps_;
};

/// Name of a QP state ("RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR").
const char* to_string(ibv_qp_state state);

}  // namespace caf_rdma
