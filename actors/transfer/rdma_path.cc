// RdmaPath: one-sided RDMA between the registered buffers (see rdma_path.h).
#include "actors/transfer/rdma_path.h"

#include <algorithm>
#include <cstring>

#include "actors/detail/manager_state.h"
#include "actors/op_texts.h"
#include "actors/transfer/owner_verdict.h"
#include "actors/transfer/stripe_plan.h"
#include "actors/transfer_checks.h"
#include "primitives/log.h"

namespace caf_rdma::detail {

void RdmaPath::start(OpId id) {
  ops_.try_emplace(id);
  connect(id);
}

void RdmaPath::connect(OpId id) {
  OpRecord* o = m_.op_record(id);
  if (o == nullptr)
    return;
  if (!m_.nic().domain || !m_.nic().port_down.empty())  // lost (or port down) since the op started
    return m_.reroute(id, rdma_unusable_text(m_.nic().domain != nullptr, m_.nic().no_rdma_reason,
                                             m_.nic().port_down));
  if (o->peer == m_.facade().address()) {
    auto qp = m_.handshakes.loopback_qp();
    if (!qp.ok())
      return m_.fail_op(id, to_caf_error(qp.error()));
    return qp_ready(id, *qp);
  }
  Peer* p = m_.peer_table.reachable(id);
  if (p == nullptr)
    return;  // failed (down) or parked until its link is made again
  if (p->qps.initiated && p->qps.initiated->needs_recovery())
    m_.handshakes.drop_qp(*p, p->qps.initiated);
  if (p->qps.initiated)
    return qp_ready(id, p->qps.initiated);
  p->qps.waiting.push_back(id);
  if (!p->qps.handshaking)
    m_.handshakes.handshake(o->peer);
}

void RdmaPath::qp_ready(OpId id, const std::shared_ptr<QpEndpoint>& qp) {
  OpRecord* o = m_.op_record(id);
  if (o == nullptr)
    return;
  const TransferOp& op = o->op;
  if (op.remote.incarnation != 0 && op.remote.incarnation != qp->remote_incarnation()) {
    // Usually a handle from before its owner's device came back; rarely (a handle faster than
    // the owner's device_gone notice) a connection from before. Either way its remote key is
    // not for this connection: the owner moves the bytes (invariant 7).
    char both[96];
    std::snprintf(both, sizeof(both), "handle's incarnation %016llx, connection's %016llx",
                  static_cast<unsigned long long>(op.remote.incarnation),
                  static_cast<unsigned long long>(qp->remote_incarnation()));
    return m_.reroute(id, "the owner " + op.remote.owner_name +
                              "'s RDMA device went away and came back between the registration "
                              "of " +
                              describe(op.remote) + " and this connection (" + both +
                              "), so its remote key is not for this connection");
  }
  post(id, qp);
}

void RdmaPath::post(OpId id, const std::shared_ptr<QpEndpoint>& managers) {
  OpRecord& o = *m_.op_record(id);
  const TransferOp& op = o.op;
  // Manager invariant 26: a latency or background op on its class's queue pair.
  std::shared_ptr<QpEndpoint> qp = managers;
  if (kind() == PathKind::kRdma && !m_.rails.class_lane(id, &qp))
    return;  // waits for its class queue pair's handshake
  if (kind() == PathKind::kRdma && !is_atomic(op) && qp == managers) {
    std::vector<StripeLane> lanes;
    bool whole = false;
    if (m_.rails.stripes(id, &lanes, &whole)) {
      if (lanes.empty())
        return;  // waits for a striping handshake (manager/rails.h invariant 20)
      if (!whole)
        return post_striped(id, qp, lanes);
      // Manager invariant 19: an op of a batch that stripes by its bytes together.
      StripeLane lane = Rails::least_busy_of(qp, lanes);
      if (lane.qp != qp)
        return post_striped(id, qp, {lane}, false);
    } else if (o.length > kInlinePollMaxBytes && priority_of(op) == Priority::kBulk) {
      // Manager invariant 19: whole, on the least busy queue pair to the owner (a class's
      // op whose queue pair is held off stays on the managers': invariant 26).
      StripeLane lane = m_.rails.least_busy(id, qp);
      if (lane.qp != qp)
        return post_striped(id, qp, {lane}, false);
    }
  }
  // Accepted before any release of the buffer: the entry (and its region) lives until we finish.
  LocalBuffer& local = m_.buffer_table.buffers().at(op.local.id);
  RemoteBuffer remote{op.remote.addr, op.remote.size, op.remote.rkey, op.remote.device,
                      op.remote.incarnation};
  RdmaOp rop;
  uint8_t* old_value = nullptr;  // an atomic's: where its old value lands (host memory)
  if (is_atomic(op)) {
    // The QP's own scratch word takes the NIC's result; the completion copies it into the
    // local buffer, which this op holds until its reply (manager invariant 14).
    rop = op.kind == wire_kind(TransferKind::kFetchAdd)
              ? RdmaOp::fetch_add(std::move(remote), op.remote_offset, op.operand)
              : RdmaOp::compare_swap(std::move(remote), op.remote_offset, op.compare, op.operand);
    old_value = reinterpret_cast<uint8_t*>(local.addr) + op.local_offset;
  } else {
    LocalSlice slice{local.rdma, op.local_offset, o.length};
    rop = o.is_read() ? RdmaOp::read(std::move(slice), std::move(remote), op.remote_offset)
                      : RdmaOp::write(std::move(slice), std::move(remote), op.remote_offset);
  }
  // Invariant 1: a single small transfer is polled for here; `landed` tells when it completed.
  const auto window = std::max(m_.options().inline_poll, m_.options().busy_poll);
  const bool poll_inline =
      window.count() > 0 && !m_.transfer_of(id).batch && o.length <= kInlinePollMaxBytes;
  std::shared_ptr<std::atomic<bool>> landed;
  if (poll_inline)
    landed = std::make_shared<std::atomic<bool>>(false);
  Status st = submit(id, 0, qp, std::move(rop), landed, old_value);
  if (!st.ok())
    return m_.fail_op(id, to_caf_error(st.error()));
  if (m_.nic().batching)
    return;  // invariant 2: posted with the rest of the batch
  if (poll_inline) {
    auto until = std::chrono::steady_clock::now() + window;
    while (!landed->load(std::memory_order_acquire) && std::chrono::steady_clock::now() < until)
      qp->progress();
    if (landed->load(std::memory_order_acquire))
      return;
  }
  m_.nic().poller->wake();
}

Status RdmaPath::submit(OpId id, uint32_t chunk, const std::shared_ptr<QpEndpoint>& qp, RdmaOp rop,
                        const std::shared_ptr<std::atomic<bool>>& landed, uint8_t* old_value,
                        bool slice) {
  caf::actor_addr me = m_.self()->address();
  const auto path = static_cast<uint8_t>(kind());
  auto callback = [me, id, chunk, path, landed, old_value](const OpResult& r) {
    TransferOutcome out;
    if (!r.status.ok()) {
      out.code = static_cast<uint8_t>(r.status.error().code());
      out.message = r.status.error().message();
    } else if (old_value != nullptr) {
      // An atomic's old value, as the NIC would have written it: before the manager hears of
      // the completion (the message below orders the store before its reply).
      std::memcpy(old_value, &r.atomic_value, kAtomicBytes);
    }
    // Runs on the poller thread (or ours, polling inline): report to the manager if it still
    // exists.
    if (auto h = caf::actor_cast<caf::actor>(me))
      caf::anon_send(h, OpDone{id.ticket, id.index, path, std::move(out),
                               static_cast<uint8_t>(r.fault), chunk});
    if (landed)
      landed->store(true, std::memory_order_release);
  };
  Status st = m_.nic().batching ? qp->submit_queued(std::move(rop), std::move(callback))
                                : qp->submit(std::move(rop), std::move(callback));
  if (!st.ok())
    return st;
  if (!slice)
    use(id)->qp = qp;
  auto& queued = m_.nic().queued_on;
  if (m_.nic().batching && std::find(queued.begin(), queued.end(), qp) == queued.end())
    queued.push_back(qp);
  return {};
}

void RdmaPath::completed(OpId id, TransferOutcome outcome, OpFault fault, uint32_t chunk) {
  if (m_.op_record(id) == nullptr || use(id) == nullptr)
    return;  // ended (timed out, its peer down) or rerouted before it came back: invariant 8
  if (!use(id)->slices.empty())
    return slice_completed(id, chunk, std::move(outcome), fault);
  if (!outcome.ok())
    return failed(id, std::move(outcome), fault);
  if (m_.options().verify && !is_atomic(m_.op_record(id)->op))  // a shared word: no checksum
    return verify(id);
  m_.finish_op(id, std::move(outcome));
}

void RdmaPath::failed(OpId id, TransferOutcome outcome, OpFault fault) {
  OpRecord* o = m_.op_record(id);
  if (o == nullptr)
    return;
  const Transfer& t = m_.transfer_of(id);
  drop_if_broken(id);
  NicUse& u = *use(id);
  auto p = m_.peer_table.peers().find(o->peer);
  if (p != m_.peer_table.peers().end() && !p->second.down_reason.empty()) {
    outcome.code = static_cast<uint8_t>(ErrorCode::kPeerUnavailable);
    outcome.message = op_peer_down_text(o->op.kind, p->second.name, p->second.down_reason);
  } else if (t.timed_out) {
    outcome = m_.flushed(id);  // its timeout's or its cancel's flush (manager invariant 24)
  } else if (fault == OpFault::kFlushed && !u.retried && may_retry() && !is_atomic(o->op)) {
    // Not this op's fault: another op on the queue pair failed and took the QP to ERR
    // (invariant 5).
    u.retried = true;
    u.qp.reset();
    return connect(id);
  } else if (asks_owner(fault)) {
    return explain_refusal(id, std::move(outcome), fault);
  }
  m_.finish_op(id, std::move(outcome));
}

void RdmaPath::drop_if_broken(OpId id) {
  // A QP in ERR is replaced, not reused (the next transfer makes a new one). Destroying it
  // completes whatever it still holds (flushed), so no op waits on a QP nobody will recover.
  const NicUse* u = use(id);
  const OpRecord* o = m_.op_record(id);
  auto qp = u != nullptr ? u->qp.lock() : nullptr;
  if (!qp || !qp->needs_recovery() || o == nullptr)
    return;
  m_.handshakes.drop_qp_of(o->peer, qp);
}

void RdmaPath::explain_refusal(OpId id, TransferOutcome outcome, OpFault fault) {
  OpRecord& o = *m_.op_record(id);
  const TransferOp& op = o.op;
  // The rule RdmaClient's lanes answer by too (owner_verdict.h).
  const Error nic(static_cast<ErrorCode>(outcome.code), std::move(outcome.message));
  if (o.peer == m_.facade().address()) {
    TransferOutcome owner =
        m_.buffer_table.check_access(ref_of(op.remote), op.remote_offset, o.length, op.kind);
    return m_.finish_op(id, outcome_of(owner_verdict(op, nic, fault, owner)));
  }
  // The answer comes before the transfer's deadline, or the deadline ends the op.
  use(id)->awaiting_owner = true;
  ManagerState& m = m_;
  m_.peer_table.ask_peer<TransferOutcome>(
      op.remote.owner, op.remote.owner_name, request_timeout(m_.transfer_of(id)),
      [&m, id, nic, fault](TransferOutcome& owner) {
        if (const OpRecord* r = m.op_record(id))
          m.finish_op(id, outcome_of(owner_verdict(r->op, nic, fault, owner)));
      },
      [&m, id, nic, fault](const caf::error& err) {
        if (const OpRecord* r = m.op_record(id))
          m.finish_op(id, outcome_of(owner_verdict(r->op, nic, fault, to_error(err))));
      },
      buf_check_atom::value, ref_of(op.remote), op.remote_offset, o.length, op.kind);
}

void RdmaPath::verify(OpId id) {
  OpRecord& o = *m_.op_record(id);
  const TransferOp& op = o.op;
  auto mine = m_.buffer_table.local_checksum(m_.buffer_table.buffers().at(op.local.id),
                                             op.local_offset, o.length);
  if (!mine.ok())
    return m_.finish_op(id, outcome_of(mine.error()));
  std::string where = op.local.device;
  if (auto qp = use(id)->qp.lock())
    where = qp->describe();
  ManagerState& m = m_;
  auto compare = [&m, id, op, where, length = o.length, local = *mine](uint64_t remote) {
    if (local == remote)
      return m.finish_op(id, TransferOutcome{});
    TransferOutcome bad;
    bad.code = static_cast<uint8_t>(ErrorCode::kDataMismatch);
    bad.message = data_mismatch_text(op, length, local, remote, where);
    m.finish_op(id, std::move(bad));
  };
  if (o.peer == m_.facade().address()) {
    auto rb = m_.buffer_table.owner_access(ref_of(op.remote), op.remote_offset, o.length, false);
    if (!rb.ok())
      return m_.finish_op(id, outcome_of(rb.error()));
    auto theirs = m_.buffer_table.local_checksum(**rb, op.remote_offset, o.length);
    if (!theirs.ok())
      return m_.finish_op(id, outcome_of(theirs.error()));
    return compare(*theirs);
  }
  use(id)->awaiting_owner = true;
  m_.peer_table.ask_peer<uint64_t>(
      op.remote.owner, op.remote.owner_name, request_timeout(m_.transfer_of(id)),
      [compare](uint64_t& remote) { compare(remote); },
      [&m, id, op](const caf::error& err) {
        TransferOutcome out = outcome_of(err);
        out.message = "verifying " + std::string(kind_name(op.kind)) + " with the owner of " +
                      describe(op.remote) + " failed: " + out.message;
        m.finish_op(id, std::move(out));
      },
      buf_sum_atom::value, ref_of(op.remote), op.remote_offset, o.length);
}

bool RdmaPath::deadline(OpId id, DeadlineStage stage) {
  OpRecord* o = m_.op_record(id);
  NicUse* u = use(id);
  if (o == nullptr)
    return false;
  // An op whose RDMA is over and that waits for its owner's answer has nothing to flush.
  auto qp = u == nullptr || u->awaiting_owner ? nullptr : u->qp.lock();
  // A striped op's unfinished slices, on whatever queue pairs (invariant 10), also when the
  // primary's is gone: none may be on a NIC at the reply.
  std::vector<std::shared_ptr<QpEndpoint>> others;
  if (u != nullptr)
    for (const OpSlice& slice : u->slices)
      if (auto sq = slice.qp.lock(); sq && !slice.done && sq != qp &&
                                     std::find(others.begin(), others.end(), sq) == others.end())
        others.push_back(std::move(sq));
  if (stage == DeadlineStage::kCancelled && u != nullptr && u->awaiting_owner)
    return false;  // invariant 12: its RDMA is over; the owner's answer (a success) stands
  if (!qp && others.empty())
    return TransferPath::deadline(id, stage);
  if (stage == DeadlineStage::kDrainOverdue && !u->flushed)
    return false;  // invariant 12: a cancel left its shared queue pairs alone; kDue flushes them
  if (stage == DeadlineStage::kCancelled) {
    // Invariant 12: a queue pair another transfer's ops are on is not flushed for a cancel.
    std::vector<std::shared_ptr<QpEndpoint>> mine = others;
    if (qp)
      mine.push_back(qp);
    if (others_on(id, mine))
      return false;
  }
  if (stage != DeadlineStage::kDrainOverdue) {
    // Flush: every outstanding request completes (with an error), then we reply.
    const Transfer& t = m_.transfer_of(id);
    const std::string why =
        t.cancelled ? "a transfer was cancelled"
                    : "a transfer timed out after " + std::to_string(t.timeout_ms) + " ms";
    if (qp)
      (void)qp->abort(why);
    for (const auto& sq : others)
      (void)sq->abort(why);
    u->flushed = true;
    return true;
  }
  // The flush did not finish in time: destroy the QPs so the NIC stops for sure (invariant 6).
  if (qp)
    m_.handshakes.drop_qp_of(o->peer, qp);
  for (const auto& sq : others)
    m_.rails.drop(o->peer, sq);
  others.clear();
  TransferOutcome out = m_.timed_out(id, "; its queue pair was destroyed");
  // Ours was the last reference: the QP is gone (the NIC stopped) before finish_op hands a
  // staged op's bounce buffer to another transfer.
  qp.reset();
  m_.finish_op(id, std::move(out));
  return false;
}

bool RdmaPath::others_on(OpId id, const std::vector<std::shared_ptr<QpEndpoint>>& qps) const {
  auto among = [&qps](const std::weak_ptr<QpEndpoint>& q) {
    auto p = q.lock();
    return p && std::find(qps.begin(), qps.end(), p) != qps.end();
  };
  // Both RDMA paths post on the same queue pairs (the staged path's chunks too).
  for (const RdmaPath* path : {static_cast<const RdmaPath*>(&m_.rdma_path()),
                               static_cast<const RdmaPath*>(&m_.staged_path())})
    for (OpId other : path->ops()) {
      const NicUse* u = path->use(other);
      if (other.ticket == id.ticket || u == nullptr || u->awaiting_owner)
        continue;
      if (among(u->qp))
        return true;
      for (const OpSlice& slice : u->slices)
        if (!slice.done && among(slice.qp))
          return true;
    }
  // A notify write's fence, posted after its path forgot it (write_notices.h invariant 15).
  return m_.notices.fences_on(id.ticket, qps);
}

std::vector<OpId> RdmaPath::on_nic() const {
  std::vector<OpId> out;
  for (OpId id : ops())
    if (const NicUse* u = use(id); u != nullptr && !u->awaiting_owner)
      out.push_back(id);
  return out;
}

void RdmaPath::post_striped(OpId id, const std::shared_ptr<QpEndpoint>& primary,
                            const std::vector<StripeLane>& lanes, bool with_primary) {
  OpRecord& o = *m_.op_record(id);
  NicUse& u = *use(id);
  std::vector<StripeLane> all;
  if (with_primary)
    all.push_back(StripeLane{primary, 0});
  all.insert(all.end(), lanes.begin(), lanes.end());
  auto spans = plan_slices(o.length, all.size());
  u.qp = primary;
  u.slices.clear();
  u.slice_error.reset();
  for (size_t i = 0; i < spans.size(); ++i)
    u.slices.push_back(OpSlice{spans[i].offset, spans[i].length, all[i].qp, all[i].rail});
  u.open_slices = u.slices.size();
  if (with_primary) {
    ++m_.counters().striped_ops;
    m_.counters().stripe_slices += u.slices.size();
  } else {
    ++m_.counters().spread_ops;
  }
  for (uint32_t i = 0; i < u.slices.size(); ++i) {
    Status st = post_slice(id, i, all[i].qp, all[i].rail);
    if (st.ok())
      continue;
    TransferOutcome why = outcome_of(st.error());
    // Its queue pair refused the post: the primary takes it.
    if (all[i].qp != primary && fail_over(id, i, &why))
      continue;
    end_slice(u, i, std::move(why), OpFault::kNone);
  }
  if (u.open_slices == 0)
    return slices_ended(id);
  if (!m_.nic().batching)
    m_.nic().poller->wake();
}

bool RdmaPath::fail_over(OpId id, uint32_t i, TransferOutcome* why) {
  NicUse& u = *use(id);
  u.slices[i].failed_over = true;
  ++m_.counters().stripe_failovers;
  auto primary = u.qp.lock();
  if (!primary || primary->needs_recovery())
    return false;
  Status st = post_slice(id, i, primary, 0);
  if (!st.ok())
    *why = outcome_of(st.error());
  return st.ok();
}

bool RdmaPath::end_slice(NicUse& u, uint32_t i, TransferOutcome outcome, OpFault fault) {
  u.slices[i].done = true;
  --u.open_slices;
  if (!outcome.ok() && !u.slice_error)
    u.slice_error.emplace(std::move(outcome), fault);
  return u.open_slices == 0;
}

Status RdmaPath::post_slice(OpId id, uint32_t i, const std::shared_ptr<QpEndpoint>& qp,
                            uint32_t rail) {
  OpRecord& o = *m_.op_record(id);
  const TransferOp& op = o.op;
  OpSlice& slice = use(id)->slices[i];
  const LocalBuffer& local = m_.buffer_table.buffers().at(op.local.id);
  const bool primary = rail == 0;
  const RailKey* key = primary ? nullptr : &op.remote.rails.at(rail - 1);
  RemoteBuffer remote{op.remote.addr, op.remote.size, primary ? op.remote.rkey : key->rkey,
                      primary ? op.remote.device : key->device,
                      primary ? op.remote.incarnation : key->incarnation};
  LocalSlice part{Rails::region(local, rail), op.local_offset + slice.offset, slice.length};
  RdmaOp rop =
      o.is_read()
          ? RdmaOp::read(std::move(part), std::move(remote), op.remote_offset + slice.offset)
          : RdmaOp::write(std::move(part), std::move(remote), op.remote_offset + slice.offset);
  slice.qp = qp;
  slice.rail = rail;
  return submit(id, i, qp, std::move(rop), nullptr, nullptr, true);
}

void RdmaPath::slice_completed(OpId id, uint32_t i, TransferOutcome outcome, OpFault fault) {
  NicUse& u = *use(id);
  if (i >= u.slices.size() || u.slices[i].done)
    return;
  OpSlice& slice = u.slices[i];
  const OpRecord& o = *m_.op_record(id);
  auto slice_qp = slice.qp.lock();
  const bool on_primary = slice_qp && slice_qp == u.qp.lock();
  if (!outcome.ok() && !on_primary && !slice.failed_over && !m_.transfer_of(id).timed_out) {
    // Invariant 10: a striping queue pair failed (in ERR, its port down, the owner's rail
    // gone, even a key refused there): the managers' own queue pair moves this slice once
    // more, so the op still moves every byte; its answer is the op's.
    if (slice_qp && slice_qp->needs_recovery())
      m_.rails.drop(o.peer, slice_qp);
    slice_qp.reset();
    log_line(LogLevel::kWarn,
             "%s: a slice of %llu bytes on rail %u to %s failed (%s); "
             "it runs again on %s",
             m_.options().name.c_str(), static_cast<unsigned long long>(slice.length), slice.rail,
             o.op.remote.owner_name.c_str(), outcome.message.c_str(),
             m_.nic().domain ? m_.nic().domain->device_name().c_str() : "the primary device");
    if (fail_over(id, i, &outcome)) {
      if (!m_.nic().batching)
        m_.nic().poller->wake();
      return;
    }
  }
  if (end_slice(u, i, std::move(outcome), fault))
    slices_ended(id);
}

void RdmaPath::slices_ended(OpId id) {
  NicUse& u = *use(id);
  auto error = std::move(u.slice_error);
  u.slices.clear();
  u.slice_error.reset();
  if (error)
    return failed(id, std::move(error->first), error->second);
  if (m_.options().verify)
    return verify(id);
  m_.finish_op(id, TransferOutcome{});
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
