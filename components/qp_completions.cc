#include "components/qp_completions.h"

#include <endian.h>

#include <algorithm>
#include <vector>

#include "primitives/ibverbs_error.h"

namespace caf_rdma {

using detail::PostedWr;
using detail::QpOp;

// -- retiring ---------------------------------------------------------------------------------

void QpCompletions::take_locked(const ibv_wc* wcs, int count, Done& done) {
  detail::QpState& s = state_;
  for (int i = 0; i < count; ++i) {
    const ibv_wc& wc = wcs[i];
    const bool recv = (wc.wr_id & detail::kRecvBit) != 0;
    const uint64_t seq = wc.wr_id & ~detail::kRecvBit;
    detail::RingQueue<PostedWr>& in_flight = recv ? s.recv_in_flight : s.send_in_flight;
    // This completion retires every earlier request of its queue (invariant 1).
    while (!in_flight.empty() && in_flight.front().seq <= seq) {
      PostedWr w = in_flight.front();
      in_flight.pop_front();
      if (s.router)
        s.router->release(1);
      auto it = s.ops.find(w.op_id);
      if (it != s.ops.end())
        retire_locked(*it->second, w.seq == seq ? &wc : nullptr, done);
    }
  }
  s.stats.completions += static_cast<uint64_t>(count);
}

void QpCompletions::retire_locked(QpOp& op, const ibv_wc* wc, Done& done) {
  --op.in_flight;
  const bool failed = wc != nullptr && wc->status != IBV_WC_SUCCESS;
  // In order, before the first that failed (RdmaQueuePair invariant 13): a request that
  // completed well landed even after the op was failed for another reason (its timeout's
  // flush: completions still in the queue then are counted as they retire).
  if (!failed && !op.wr_failed)
    ++op.retired_ok;
  if (failed) {
    op.wr_failed = true;
    // The op's own cause before the queue pair's ERR, which would call it interrupted.
    if (!op.error && wc->status != IBV_WC_WR_FLUSH_ERR)
      record_failure_locked(op, *wc);
    if (!state_.error)
      enter_error_locked(completion_error(*wc, state_.name).message());
    if (!op.error)
      record_failure_locked(op, *wc);
    op.aborted = true;
  } else if (wc != nullptr && op.op.kind == OpKind::kRecv) {
    op.bytes = wc->byte_len;
    if (wc->opcode == IBV_WC_RECV_RDMA_WITH_IMM && (wc->wc_flags & IBV_WC_WITH_IMM) != 0) {
      op.with_imm = true;
      op.imm = be32toh(wc->imm_data);
    }
  }
  finish_if_done_locked(op.id, done);
}

void QpCompletions::record_failure_locked(QpOp& op, const ibv_wc& wc) {
  const std::string what = to_string(op.op.kind);
  if (wc.status == IBV_WC_WR_FLUSH_ERR) {
    op.fault = OpFault::kFlushed;
    op.error =
        Error(ErrorCode::kWorkCompletion, what + " flushed (IBV_WC_WR_FLUSH_ERR): " + state_.name +
                                              " entered ERR: " + state_.error_cause);
    return;
  }
  Error e = completion_error(wc, state_.name);
  op.fault = wc.status == IBV_WC_REM_ACCESS_ERR || wc.status == IBV_WC_REM_INV_REQ_ERR
                 ? OpFault::kRemoteAccess
                 : OpFault::kOther;
  std::string hint;
  if (wc.status == IBV_WC_REM_ACCESS_ERR)
    hint = "; the remote region " + op.op.remote.describe() +
           " rejected the access (wrong rkey, deregistered or released region, or missing "
           "remote permission)";
  else if (wc.status == IBV_WC_RETRY_EXC_ERR)
    hint = "; the peer did not answer (peer QP gone, or no route to " +
           to_string(state_.remote.gid) + ")";
  op.error = Error(e.code(), what + " failed: " + e.message() + hint);
}

// -- finishing --------------------------------------------------------------------------------

void QpCompletions::finish_if_done_locked(uint64_t op_id, Done& done) {
  detail::QpState& s = state_;
  auto it = s.ops.find(op_id);
  if (it == s.ops.end())
    return;
  QpOp& op = *it->second;
  if (op.in_flight > 0 || (!op.aborted && op.posted < op.wr_count))
    return;
  OpResult result = result_locked(op);
  if (op.op.kind == OpKind::kRecv)
    --s.receives;  // RdmaQueuePair invariant 12
  else if (s.router)
    s.router->op_finished();
  if (op.atomic_slot >= 0)
    atomics_.release(op.atomic_slot);
  auto pit = std::find(s.pending.begin(), s.pending.end(), op_id);
  if (pit != s.pending.end())
    s.pending.erase(pit);
  done.emplace_back(std::move(op.done), std::move(result));
  s.ops.erase(it);
}

uint64_t QpCompletions::list_landed(const QpOp& op) const {
  if (!op.op.is_list())
    return 0;
  // Ranges whose every work request retired before the first that failed (cut as posting
  // cuts them: qp_posting.h invariant 6).
  size_t wrs = 0;
  uint64_t landed = 0;
  for (size_t i = 0; i < op.op.list.count; ++i) {
    wrs += detail::list_requests(op.op.list[i].length, state_.max_message);
    if (wrs > op.retired_ok)
      break;
    ++landed;
  }
  return landed;
}

OpResult QpCompletions::result_locked(const QpOp& op) {
  OpResult result;
  if (op.error) {
    result.status = *op.error;
    result.fault = op.fault;
    result.list_landed = list_landed(op);
    ++state_.stats.ops_failed;
    return result;
  }
  if (detail::is_atomic(op.op.kind)) {
    result.atomic_value = atomics_.value(op.atomic_slot);
    result.bytes = 8;
  } else {
    result.bytes = op.op.kind == OpKind::kRecv ? op.bytes : op.op.local_length();
    result.with_imm = op.with_imm;
    result.imm = op.imm;
    result.list_landed = op.op.list.count;
  }
  state_.stats.bytes += result.bytes;
  ++state_.stats.ops_completed;
  return result;
}

void QpCompletions::run(Done& done) {
  for (auto& [cb, result] : done)
    if (cb)
      cb(std::move(result));
  done.clear();
}

// -- errors and flushes -----------------------------------------------------------------------

void QpCompletions::enter_error_locked(const std::string& cause) {
  detail::QpState& s = state_;
  if (!s.error) {
    s.error = true;
    s.error_cause = cause;
  }
  if (s.qp)
    (void)s.qp->to_error();
  // Ops not posted at all stay queued (they complete as flushed when the QP is destroyed).
  // Partly posted ops cannot be resumed: they fail.
  for (uint64_t id : s.pending) {
    auto it = s.ops.find(id);
    if (it == s.ops.end() || it->second->posted == 0)
      continue;
    QpOp& op = *it->second;
    op.aborted = true;
    if (!op.error) {
      op.fault = OpFault::kFlushed;
      op.error = Error(ErrorCode::kWorkCompletion, std::string(to_string(op.op.kind)) +
                                                       " interrupted: " + s.name +
                                                       " entered ERR: " + cause);
    }
  }
}

void QpCompletions::fail_all_locked(const Error& error, Done& done) {
  detail::QpState& s = state_;
  forget_in_flight_locked();
  s.pending.clear();
  std::vector<uint64_t> ids;
  ids.reserve(s.ops.size());
  for (auto& [id, op] : s.ops)
    ids.push_back(id);
  std::sort(ids.begin(), ids.end());
  for (uint64_t id : ids) {
    QpOp& op = *s.ops[id];
    op.in_flight = 0;
    op.aborted = true;
    if (!op.error)
      op.error = Error(error.code(), std::string(to_string(op.op.kind)) + " on " + s.name + ": " +
                                         error.message());
    finish_if_done_locked(id, done);
  }
}

void QpCompletions::mark_flushed_locked() {
  // Another op's error took the QP to ERR: the ops still outstanding would have been flushed,
  // and are so reported (retryable on a new QP), their flush completions not waited for.
  for (auto& [id, op] : state_.ops)
    if (!op->error) {
      op->fault = OpFault::kFlushed;
      op->error = Error(ErrorCode::kWorkCompletion,
                        std::string(to_string(op->op.kind)) + " on " + state_.name +
                            " flushed: the queue pair entered ERR (" + state_.error_cause +
                            ") and was destroyed before the op's flush completion");
    }
}

void QpCompletions::forget_in_flight_locked() {
  // Their completions may still come (or sit in the CQ): the credits come back once the CQ
  // was found empty after now (CompletionRouter invariant 1). The poll lock is held.
  if (state_.router)
    state_.router->park(state_.send_in_flight.size() + state_.recv_in_flight.size());
  state_.send_in_flight.clear();
  state_.recv_in_flight.clear();
}

}  // namespace caf_rdma
