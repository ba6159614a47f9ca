// RdmaPath: one-sided RDMA between the registered buffers (see rdma_path.h).
#include "actors/transfer/rdma_path.h"

#include "actors/detail/manager_state.h"

namespace caf_rdma::detail {

void RdmaPath::start(OpId id) {
  ops_.try_emplace(id);
  connect(id);
}

void RdmaPath::post(OpId id, const std::shared_ptr<RdmaQueuePair>& qp) {
  OpRecord& o = *m_.op_record(id);
  const TransferOp& op = o.op;
  // Accepted before any release of the buffer: the entry (and its region) lives until we finish.
  LocalBuffer& local = m_.buffers_.at(op.local.id);
  RemoteBuffer remote{op.remote.addr, op.remote.size, op.remote.rkey, op.remote.device,
                      op.remote.incarnation};
  LocalSlice slice{local.rdma, op.local_offset, o.length};
  RdmaOp rop = o.is_read() ? RdmaOp::read(std::move(slice), std::move(remote), op.remote_offset)
                           : RdmaOp::write(std::move(slice), std::move(remote), op.remote_offset);
  // Invariant 1: a single small transfer is polled for here; `landed` tells when it completed.
  const bool poll_inline = m_.options_.inline_poll.count() > 0 &&
                           !m_.transfers_.at(id.ticket).batch && o.length <= kInlinePollMaxBytes;
  std::shared_ptr<std::atomic<bool>> landed;
  if (poll_inline)
    landed = std::make_shared<std::atomic<bool>>(false);
  Status st = submit(id, 0, qp, std::move(rop), landed);
  if (!st.ok())
    return m_.fail_op(id, to_caf_error(st.error()));
  if (m_.batching_)
    return;  // invariant 2: posted with the rest of the batch
  if (poll_inline) {
    auto until = std::chrono::steady_clock::now() + m_.options_.inline_poll;
    while (!landed->load(std::memory_order_acquire) && std::chrono::steady_clock::now() < until)
      qp->progress();
    if (landed->load(std::memory_order_acquire))
      return;
  }
  m_.poller_->wake();
}

void RdmaPath::completed(OpId id, TransferOutcome outcome, OpFault fault, uint32_t chunk) {
  (void)chunk;
  if (!outcome.ok())
    return failed(id, std::move(outcome), fault);
  if (m_.options_.verify)
    return verify(id);
  m_.finish_op(id, std::move(outcome));
}

NicUse* RdmaPath::use(OpId id) {
  return find_use(ops_, id);
}

const NicUse* RdmaPath::use(OpId id) const {
  return find_use(ops_, id);
}

std::vector<OpId> RdmaPath::ops() const {
  return keys(ops_);
}

}  // namespace caf_rdma::detail
