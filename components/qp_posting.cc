#include "components/qp_posting.h"

#include <endian.h>

#include <algorithm>

#include "primitives/ibverbs_error.h"

namespace caf_rdma {

using detail::PostedWr;
using detail::QpOp;

namespace {

// Credits of a shared CQ taken at a time (invariant 2): few enough that one queue pair's
// backlog does not take them all from the others.
constexpr uint32_t kCreditBatch = 16;

void append_sges(const PlannedSge* sges, size_t count, std::vector<ibv_sge>& out) {
  for (size_t i = 0; i < count; ++i)
    out.push_back(ibv_sge{sges[i].addr, sges[i].length, sges[i].lkey});
}

}  // namespace

// -- planning ---------------------------------------------------------------------------------

Status QpPosting::plan(const RdmaOp& op, const ibv_qp_cap& caps, detail::QpOp& into) const {
  if (op.is_list()) {
    // Cut as posted (append_list_send_locked): only counted here, nothing allocated.
    into.wr_count = 0;
    for (size_t i = 0; i < op.list.count; ++i)
      into.wr_count += detail::list_requests(op.list[i].length, state_.max_message);
    return {};
  }
  CAF_RDMA_ASSIGN_OR_RETURN(into.wrs, plan_one(op, caps));
  into.wr_count = into.wrs.size();
  return {};
}

Result<std::vector<PlannedWorkRequest>> QpPosting::plan_one(const RdmaOp& op,
                                                            const ibv_qp_cap& caps) const {
  const uint64_t max_message = state_.max_message;
  const uint64_t remote_addr = op.remote.addr + op.remote_offset;
  std::vector<PlannedWorkRequest> wrs;
  if (op.local.empty() && op.with_imm) {  // zero bytes: one request with no gather list
    PlannedWorkRequest wr;
    wr.remote_addr = remote_addr;
    wrs.push_back(wr);
    return wrs;
  }
  if (detail::is_atomic(op.kind)) {
    PlannedWorkRequest wr;
    wr.remote_addr = remote_addr;
    wr.length = 8;
    wrs.push_back(wr);
    return wrs;
  }
  if (op.local.size() == 1 && op.local[0].length > 0 && op.local[0].length <= max_message &&
      op.local[0].length <= (uint64_t{1} << 31)) {
    // One slice that fits one work request (the common case): no plan needed.
    const LocalSlice& s = op.local[0];
    PlannedWorkRequest wr;
    wr.remote_addr = remote_addr;
    wr.length = s.length;
    wr.sges.push_back(
        PlannedSge{s.buffer.addr() + s.offset, static_cast<uint32_t>(s.length), s.buffer.lkey()});
    wrs.push_back(std::move(wr));
    return wrs;
  }
  std::vector<LocalSegment> segs;
  segs.reserve(op.local.size());
  for (const auto& s : op.local)
    segs.push_back(LocalSegment{s.buffer.addr() + s.offset, s.length, s.buffer.lkey()});
  // SEND and RECV are one message each (validated to fit); the others may be split.
  const bool single = op.kind == OpKind::kSend || op.kind == OpKind::kRecv;
  const uint32_t sge =
      single ? static_cast<uint32_t>(segs.size()) : static_cast<uint32_t>(caps.max_send_sge);
  return plan_work_requests(segs, remote_addr, single ? ~uint64_t{0} : max_message,
                            std::max<uint32_t>(1, sge));
}

// -- posting rounds ---------------------------------------------------------------------------

void QpPosting::post_locked(Done& done) {
  detail::QpState& s = state_;
  if (!s.qp || s.error || !s.connected)
    return;
  while (!s.pending.empty() && !s.error)
    if (post_front_locked(done) == Step::kStop)
      break;
  flush_chain_locked(done);
  if (credit_ > 0) {
    s.router->release(credit_);
    credit_ = 0;
  }
}

void QpPosting::resume_locked(Done& done) {
  resuming_ = true;
  post_locked(done);
  resuming_ = false;
}

QpPosting::Step QpPosting::post_front_locked(Done& done) {
  detail::QpState& s = state_;
  auto it = s.ops.find(s.pending.front());
  if (it == s.ops.end()) {
    s.pending.pop_front();
    return Step::kNext;
  }
  QpOp& op = *it->second;
  if (op.aborted) {
    s.pending.pop_front();
    completions_.finish_if_done_locked(op.id, done);
    return Step::kNext;
  }
  if (op.op.kind == OpKind::kRecv)
    return post_receive_locked(op, done);
  return append_sends_locked(op);
}

// -- receive work requests --------------------------------------------------------------------

QpPosting::Step QpPosting::post_receive_locked(QpOp& op, Done& done) {
  detail::QpState& s = state_;
  if (s.recv_in_flight.size() >= s.limits.receive || !take_credit_locked(1))
    return Step::kStop;
  std::vector<ibv_sge> sges;
  append_sges(op.wrs.front().sges.data(), op.wrs.front().sges.size(), sges);
  ibv_recv_wr wr{};
  uint64_t seq = next_wr_id_locked();
  wr.wr_id = seq | detail::kRecvBit;
  wr.sg_list = sges.data();
  wr.num_sge = static_cast<int>(sges.size());
  ibv_recv_wr* bad = nullptr;
  if (int rc = ibv_post_recv(s.qp->get(), &wr, &bad); rc != 0) {
    op.error = ibverbs_error("ibv_post_recv", rc, s.name);
    op.aborted = true;
    if (s.router)
      ++credit_;  // not posted: its credit stays ours
  } else {
    s.recv_in_flight.push_back(PostedWr{seq, op.id});
    op.posted = 1;
    ++op.in_flight;
  }
  s.pending.pop_front();
  completions_.finish_if_done_locked(op.id, done);
  return Step::kNext;
}

// -- chains of send work requests -------------------------------------------------------------

QpPosting::Step QpPosting::append_sends_locked(QpOp& op) {
  detail::QpState& s = state_;
  if (detail::is_atomic(op.op.kind) && op.atomic_slot < 0) {
    op.atomic_slot = atomics_.acquire();
    if (op.atomic_slot < 0)
      return Step::kStop;  // every slot in use: wait for an atomic to complete
  }
  const uint32_t max_send = s.limits.send;
  while (op.posted < op.wr_count && s.send_in_flight.size() < max_send) {
    if (!take_credit_locked(max_send - static_cast<uint32_t>(s.send_in_flight.size())))
      return Step::kStop;
    if (op.op.is_list()) {
      append_list_send_locked(op);
    } else {
      const PlannedWorkRequest& p = op.wrs[op.posted];
      append_send_locked(op, p.remote_addr, p.length, p.sges.data(), p.sges.size());
    }
  }
  if (op.posted < op.wr_count)
    return Step::kStop;  // the send queue is full
  s.pending.pop_front();
  return Step::kNext;
}

void QpPosting::append_list_send_locked(QpOp& op) {
  const ListEntry& e = op.op.list[op.list_at];
  const uint64_t length =
      std::min(e.length - op.list_within, detail::list_piece(state_.max_message));
  const RdmaBuffer& local = op.op.local[0].buffer;
  const PlannedSge sge{local.addr() + e.peer_offset + op.list_within, static_cast<uint32_t>(length),
                       local.lkey()};
  append_send_locked(op, op.op.remote.addr + e.offset + op.list_within, length, &sge, 1);
  op.list_within += length;
  if (op.list_within == e.length) {
    ++op.list_at;
    op.list_within = 0;
  }
}

void QpPosting::append_send_locked(QpOp& op, uint64_t remote_addr, uint64_t length,
                                   const PlannedSge* sges, size_t sges_in) {
  ibv_send_wr wr{};
  const uint64_t seq = next_wr_id_locked();
  wr.wr_id = seq;
  const auto first_sge = static_cast<uint32_t>(chain_sges_.size());
  switch (op.op.kind) {
    case OpKind::kWrite:
    case OpKind::kRead:
      wr.opcode = op.op.kind == OpKind::kWrite ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_READ;
      if (op.op.with_imm && op.posted + 1 == op.wr_count) {  // the write's last request
        wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
        wr.imm_data = htobe32(op.op.imm);
      }
      wr.wr.rdma.remote_addr = remote_addr;
      wr.wr.rdma.rkey = op.op.remote.rkey;
      append_sges(sges, sges_in, chain_sges_);
      break;
    case OpKind::kSend:
      wr.opcode = IBV_WR_SEND;
      append_sges(sges, sges_in, chain_sges_);
      break;
    default:  // atomics
      wr.opcode =
          op.op.kind == OpKind::kFetchAdd ? IBV_WR_ATOMIC_FETCH_AND_ADD : IBV_WR_ATOMIC_CMP_AND_SWP;
      wr.wr.atomic.remote_addr = remote_addr;
      wr.wr.atomic.rkey = op.op.remote.rkey;
      wr.wr.atomic.compare_add = op.op.compare_add;
      wr.wr.atomic.swap = op.op.swap;
      chain_sges_.push_back(atomics_.sge(op.atomic_slot));
      break;
  }
  const auto sge_count = static_cast<uint32_t>(chain_sges_.size()) - first_sge;
  wr.num_sge = static_cast<int>(sge_count);
  // Small WRITEs and SENDs travel inside the work request: no DMA read of the source.
  if ((op.op.kind == OpKind::kWrite || op.op.kind == OpKind::kSend) && length > 0 &&
      length <= state_.limits.inline_bytes)
    wr.send_flags |= IBV_SEND_INLINE;
  // Signal periodically so long chains retire slots before they end.
  if ((++posted_wrs_ % state_.signal_interval) == 0)
    wr.send_flags |= IBV_SEND_SIGNALED;
  chain_.push_back(wr);
  chain_sge_spans_.emplace_back(first_sge, sge_count);
  chain_ops_.push_back(op.id);
  state_.send_in_flight.push_back(PostedWr{seq, op.id});
  ++op.posted;
  ++op.in_flight;
}

void QpPosting::flush_chain_locked(Done& done) {
  if (chain_.empty())
    return;
  detail::QpState& s = state_;
  for (size_t i = 0; i < chain_.size(); ++i) {
    chain_[i].sg_list =
        chain_sge_spans_[i].second == 0 ? nullptr : chain_sges_.data() + chain_sge_spans_[i].first;
    chain_[i].next = i + 1 < chain_.size() ? &chain_[i + 1] : nullptr;
  }
  chain_.back().send_flags |= IBV_SEND_SIGNALED;
  ibv_send_wr* bad = nullptr;
  const int rc = ibv_post_send(s.qp->get(), chain_.data(), &bad);
  const bool bad_known =
      bad != nullptr && bad >= chain_.data() && bad < chain_.data() + chain_.size();
  const size_t ok = rc == 0     ? chain_.size()
                    : bad_known ? static_cast<size_t>(bad - chain_.data())
                                : 0;
  if (rc != 0 && (ok > 0 || !bad_known)) {
    // The accepted prefix must end signaled, or its slots would never be retired: there is
    // no way to change a posted request, so move the QP to ERR; everything flushes.
    completions_.enter_error_locked(
        bad_known ? "ibv_post_send accepted only part of a chain"
                  : "ibv_post_send failed without naming the request it refused");
  }
  for (size_t i = 0; i < ok; ++i) {
    ++s.stats.work_requests;
    if (chain_[i].send_flags & IBV_SEND_SIGNALED)
      ++s.stats.signaled;
    if (chain_[i].send_flags & IBV_SEND_INLINE)
      ++s.stats.inline_requests;
  }
  if (ok < chain_.size())
    take_back_locked(ok, rc, done);
  chain_.clear();
  chain_sges_.clear();
  chain_sge_spans_.clear();
  chain_ops_.clear();
}

void QpPosting::take_back_locked(size_t first, int rc, Done& done) {
  detail::QpState& s = state_;
  for (size_t i = first; i < chain_.size(); ++i) {
    // Not posted: undo the accounting for this request and fail its op.
    s.send_in_flight.pop_back();
    if (s.router)
      ++credit_;  // returned at the end of post_locked
    auto it = s.ops.find(chain_ops_[i]);
    if (it == s.ops.end())
      continue;
    QpOp& op = *it->second;
    --op.in_flight;
    --op.posted;
    op.aborted = true;
    if (!op.error)
      op.error = ibverbs_error("ibv_post_send", rc, s.name);
  }
  for (size_t i = first; i < chain_.size(); ++i)
    completions_.finish_if_done_locked(chain_ops_[i], done);
}

// -- flow control -----------------------------------------------------------------------------

bool QpPosting::take_credit_locked(uint32_t want) {
  detail::QpState& s = state_;
  if (!s.router)
    return true;
  if (credit_ == 0) {
    credit_ = s.router->acquire(std::clamp<uint32_t>(want, 1, kCreditBatch), resuming_);
    // One batch per turn: for more, wait behind the others again (CompletionRouter inv. 5).
    resuming_ = false;
    if (credit_ == 0) {
      s.router->wait_for_credit(&target_);
      return false;
    }
  }
  --credit_;
  return true;
}

uint64_t QpPosting::next_wr_id_locked() {
  return state_.router ? state_.router->next_wr_id() : next_wr_seq_++;
}

}  // namespace caf_rdma
