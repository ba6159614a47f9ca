// RdmaManagerActor: the one reply point of transfers (manager invariant 5). Every op of every
// path ends here, exactly once (actors/transfer/transfer_path.h, invariant 1): finish_op marks it
// done, has its path forget it, counts it, replies once its transfer has no open op, and only
// then releases its local buffer (a release waiting for the buffer is answered after the
// transfer). It also records the op in the manager's telemetry (manager/telemetry.h).
#include "actors/detail/manager_state.h"
#include "actors/op_texts.h"

namespace caf_rdma::detail {

TransferOutcome outcome_of(const caf::error& err) {
  TransferOutcome o;
  o.code = static_cast<uint8_t>(request_error_code(err));  // the one mapping (rdma_errors.h)
  o.message = error_message(err);
  return o;
}

TransferOutcome outcome_of(const Error& err) {
  TransferOutcome o;
  o.code = static_cast<uint8_t>(err.code());
  o.message = err.message();
  return o;
}

namespace {

/// An op ended early by its transfer's cancel (manager invariant 24) or its timeout.
TransferOutcome ended_early(bool cancelled, std::string message) {
  TransferOutcome out;
  out.code = static_cast<uint8_t>(cancelled ? ErrorCode::kCancelled : ErrorCode::kTimeout);
  out.message = std::move(message);
  return out;
}

}  // namespace

TransferOutcome ManagerState::timed_out(OpId id, const std::string& more) const {
  const Transfer& t = transfer_of(id);
  const OpRecord& o = t.ops[id.index];
  return ended_early(t.cancelled, t.cancelled ? cancelled_text(o.op, o.length, more)
                                              : timed_out_text(o.op, o.length, t.timeout_ms, more));
}

TransferOutcome ManagerState::flushed(OpId id) const {
  const Transfer& t = transfer_of(id);
  const OpRecord& o = t.ops[id.index];
  return ended_early(t.cancelled, t.cancelled ? cancelled_flushed_text(o.op, o.length)
                                              : timeout_message(o.op, o.length, t.timeout_ms));
}

TransferOutcome ManagerState::stream_stopped(OpId id, const std::string& why) const {
  const Transfer& t = transfer_of(id);
  const OpRecord& o = t.ops[id.index];
  return ended_early(t.cancelled, t.cancelled
                                      ? cancelled_stream_text(o.op, o.length, why)
                                      : stream_timed_out_text(o.op, o.length, t.timeout_ms));
}

void ManagerState::fail_op(OpId id, const caf::error& err) {
  finish_op(id, outcome_of(err));
}

void ManagerState::finish_op(OpId id, TransferOutcome outcome) {
  OpRecord* o = op_record(id);
  if (o == nullptr)
    return;
  if (o->notifying && notices.waiting(id)) {
    // Ended from elsewhere (its peer or our device went) while its notice was on its way: the
    // error says that its bytes were written (invariant 15).
    return notices.end(
        id, Error(outcome.ok() ? ErrorCode::kInternal : static_cast<ErrorCode>(outcome.code),
                  outcome.message));
  }
  if (outcome.ok() && o->op.notify && is_write(o->op) && !o->notifying) {
    // Its bytes moved: the owner is told before the reply (invariants 15, 16).
    o->notifying = true;
    std::weak_ptr<QpEndpoint> qp;
    if (RdmaPath* rp = rdma_path(o->path))
      qp = rp->queue_pair_of(id);
    path(o->path).forget(id);
    return notices.after_write(id, std::move(outcome), qp);
  }
  o->done = true;
  path(o->path).forget(id);  // a staged op's bounce buffer goes back: the NIC is done with it
  if (outcome.ok()) {
    outcome.bytes = o->length;
    outcome.path = reply_path(o->path);
    if (rdma_path(o->path) != nullptr) {
      ++counters_.rdma_ops;
      counters_.rdma_bytes += o->length;
    } else {
      ++counters_.fallback_ops;
      counters_.fallback_bytes += o->length;
    }
  } else {
    ++counters_.errors;
    outcome.path = reply_path(o->path);
  }
  Transfer& t = transfer_of(id);
  OpSample sample = sample_of(o->op);
  sample.path = outcome.path;
  sample.ok = outcome.ok();
  sample.bytes = outcome.bytes;
  sample.code = static_cast<ErrorCode>(outcome.code);
  sample.message = outcome.message;
  sample.latency = std::chrono::duration_cast<std::chrono::nanoseconds>(now() - t.started);
  telemetry_.record(sample);
  t.outcomes[id.index] = std::move(outcome);
  const bool holds_local = o->holds_local;
  const uint64_t local_id = o->op.local.id;
  o->holds_local = false;
  --t.remaining;
  // Reply first: a release waiting for this buffer must be answered after the transfer.
  maybe_reply(id.ticket);
  if (holds_local)
    buffer_table.buffer_done(local_id);
}

void ManagerState::maybe_reply(uint64_t ticket) {
  auto it = transfers_.find(ticket);
  if (it == transfers_.end() || it->second.remaining > 0)
    return;
  Transfer t = std::move(it->second);
  transfers_.erase(it);
  if (t.deadline != deadlines_.end())
    deadlines_.erase(t.deadline);
  if (t.asked_by.first)
    requests_.erase(t.asked_by);  // invariant 24: a later cancel finds nothing
  if (t.batch) {
    t.many.deliver(std::move(t.outcomes));
    return;
  }
  TransferOutcome& o = t.outcomes.front();
  if (o.ok())
    t.single.deliver(TransferReply{o.bytes, o.path});
  else
    t.single.deliver(make_rdma_error(static_cast<ErrorCode>(o.code), std::move(o.message)));
}

}  // namespace caf_rdma::detail
