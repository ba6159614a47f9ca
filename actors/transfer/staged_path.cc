// StagedPath: RDMA through bounce buffers for GPU memory the NIC cannot register (see
// staged_path.h).
#include "actors/transfer/staged_path.h"

#include <algorithm>
#include <cstdio>

#include "actors/detail/manager_state.h"
#include "actors/op_texts.h"
#include "primitives/log.h"

namespace caf_rdma::detail {

void StagedPath::start(OpId id) {
  auto it = ops_.find(id);
  if ((it == ops_.end() || it->second.slot < 0) && !waiters_.empty()) {
    // Invariant 4: behind the ops waiting, in their order: the first it can serve of them,
    // this one included, takes what there is now.
    m_.enqueue_waiting(waiters_, id);
    return hand_on();
  }
  begin(id);
}

void StagedPath::begin(OpId id) {
  if (!m_.nic().domain ||
      !m_.nic().port_down.empty())  // lost (or port down) while it waited for a slot
    return m_.reroute(id, rdma_unusable_text(m_.nic().domain != nullptr, m_.nic().no_rdma_reason,
                                             m_.nic().port_down));
  OpRecord& o = *m_.op_record(id);
  StagedOp& s = ops_[id];
  if (s.slot >= 0)
    return connect(id);  // it waited for a lost link (TransferPath invariant 3)
  const int gpu = m_.buffer_table.buffers().at(o.op.local.id).gpu;
  s = StagedOp{};
  if (o.length <= chunk_bytes()) {
    auto piece = take_piece(s, o.length, gpu);  // invariant 5
    if (!piece.ok())
      return m_.fail_op(id, to_caf_error(piece.error()));
  } else {
    auto slot = take_slot(gpu);
    if (!slot.ok())
      return m_.fail_op(id, to_caf_error(slot.error()));
    s.slot = *slot;
  }
  if (s.slot < 0) {
    m_.enqueue_waiting(waiters_, id);  // invariant 4: by class, earliest deadline first
    return;
  }
  s.chunks = plan_staging(o.length, chunk_bytes());
  connect(id);
}

uint64_t StagedPath::piece_bytes(uint64_t length) const {
  constexpr uint64_t kAlign = 64;
  const uint64_t aligned = (std::max<uint64_t>(length, 1) + kAlign - 1) / kAlign * kAlign;
  return std::min(aligned, m_.options().staging_bytes);
}

Result<bool> StagedPath::take_piece(StagedOp& s, uint64_t length, int gpu) {
  const uint64_t bytes = piece_bytes(length);
  if (open_ < 0 || slots_[open_].cut + bytes > m_.options().staging_bytes) {
    auto slot = take_slot(gpu);
    if (!slot.ok())
      return slot.error();
    if (*slot < 0)
      return false;  // the open one keeps its room for smaller ops
    open_ = *slot;   // the full one goes back when its last op leaves it
  }
  Slot& slot = slots_[open_];
  s.slot = open_;
  s.base = slot.cut;
  slot.cut += bytes;
  ++slot.tenants;
  ++m_.counters().staged_pieces;
  return true;
}

bool StagedPath::room_for(uint64_t length) const {
  if (length <= chunk_bytes() && open_ >= 0 &&
      slots_[open_].cut + piece_bytes(length) <= m_.options().staging_bytes)
    return true;
  if (slots_.size() < m_.options().staging_buffers)
    return true;
  return std::any_of(slots_.begin(), slots_.end(), [](const Slot& x) { return !x.busy; });
}

Result<int> StagedPath::take_slot(int gpu) {
  for (size_t i = 0; i < slots_.size(); ++i)
    if (!slots_[i].busy) {
      slots_[i].busy = true;
      return static_cast<int>(i);
    }
  if (slots_.size() >= m_.options().staging_buffers)
    return -1;
  Slot slot;
  const ManagerOptions& opt = m_.options();
  auto memory = BounceBuffer::allocate(opt.staging_bytes, opt.device_memory, gpu);
  if (!memory.ok())
    return memory.error().with_context("allocating a staging buffer");
  slot.memory = std::move(*memory);
  if (!slot.memory->page_locked() && !lock_reported_) {
    lock_reported_ = true;  // once: every buffer would say the same
    log_line(LogLevel::kWarn,
             "%s: staging buffers stay pageable, so GPU copies go through the driver's own "
             "staging (slower): %s",
             opt.name.c_str(), slot.memory->lock_error().c_str());
  }
  auto b = m_.nic().domain->register_local(slot.memory->data(), opt.staging_bytes);
  if (!b.ok())
    return b.error().with_context("registering a staging buffer");
  slot.rdma = *b;
  slot.busy = true;
  slots_.push_back(std::move(slot));
  return static_cast<int>(slots_.size() - 1);
}

size_t StagedPath::halves() const {
  // Two, so one chunk's GPU copy overlaps the other's RDMA (a 1-byte buffer has one).
  return m_.options().staging_bytes >= 2 ? 2 : 1;
}

uint64_t StagedPath::chunk_bytes() const {
  return m_.options().staging_bytes / halves();
}

void StagedPath::post(OpId id, const std::shared_ptr<QpEndpoint>& qp) {
  post_chunks(id, ops_.at(id), qp);
  settle(id);
}

void StagedPath::post_chunks(OpId id, StagedOp& s, const std::shared_ptr<QpEndpoint>& qp) {
  const OpRecord& o = *m_.op_record(id);
  const TransferOp& op = o.op;
  const bool is_read = o.is_read();
  const uint64_t bytes = chunk_bytes();
  const size_t n_halves = halves();
  bool posted = false;
  while (!s.error && s.next_chunk < s.chunks.size() && !s.half_busy[s.next_chunk % n_halves]) {
    const auto chunk = static_cast<uint32_t>(s.next_chunk);
    const StagingChunk& c = s.chunks[chunk];
    const size_t half = chunk % n_halves;
    const uint64_t at = s.base + half * bytes;
    Slot& slot = slots_[s.slot];
    if (!is_read) {
      // Out of the GPU into this half while the NIC may still move the other half's chunk.
      if (s.chunks_on_nic > 0)
        ++m_.counters().staged_overlapped;
      Status st =
          m_.buffer_table.copy_out(m_.buffer_table.buffers().at(op.local.id),
                                   op.local_offset + c.offset, slot.memory->data() + at, c.length);
      if (!st.ok()) {
        s.error.emplace(
            outcome_of(st.error().with_context("rdma-staged write from " + describe(op.local))),
            OpFault::kNone);
        break;
      }
    }
    RemoteBuffer remote{op.remote.addr, op.remote.size, op.remote.rkey, op.remote.device,
                        op.remote.incarnation};
    LocalSlice slice{slot.rdma, at, c.length};
    RdmaOp rop =
        is_read ? RdmaOp::read(std::move(slice), std::move(remote), op.remote_offset + c.offset)
                : RdmaOp::write(std::move(slice), std::move(remote), op.remote_offset + c.offset);
    Status st = submit(id, chunk, qp, std::move(rop), nullptr);
    if (!st.ok()) {
      s.error.emplace(outcome_of(st.error()), OpFault::kNone);
      break;
    }
    s.half_busy[half] = true;
    ++s.chunks_on_nic;
    ++s.next_chunk;
    posted = true;
  }
  if (posted && !m_.nic().batching)
    m_.nic().poller->wake();
}

void StagedPath::completed(OpId id, TransferOutcome outcome, OpFault fault, uint32_t chunk) {
  auto it = ops_.find(id);
  if (it == ops_.end() || m_.op_record(id) == nullptr)
    return;  // not an op of this path (any more): RdmaPath invariant 8
  StagedOp& s = it->second;
  if (s.slot < 0 || chunk >= s.chunks.size() || s.chunks_on_nic == 0)
    return;  // not one of its chunks on the NIC (e.g. a late completion of a destroyed QP)
  chunk_done(id, s, chunk, std::move(outcome), fault);
  settle(id);
}

void StagedPath::chunk_done(OpId id, StagedOp& s, uint32_t chunk, TransferOutcome outcome,
                            OpFault fault) {
  const OpRecord& o = *m_.op_record(id);
  const bool timed_out = m_.transfer_of(id).timed_out;
  // A cancel that left its shared queue pair alone (rdma_path.h invariant 12): the chunks on
  // the NIC still count (and a read's are copied in), so that what landed is said, and an op
  // whose every chunk landed answers its success. No further chunk is posted.
  const bool counts = !timed_out || m_.transfer_of(id).cancelled;
  const size_t half = chunk % halves();
  --s.chunks_on_nic;
  if (!outcome.ok()) {
    if (!s.error)
      s.error.emplace(std::move(outcome), fault);
    // Its QP in ERR goes now: a chunk posted after the error (while we copied) would otherwise
    // wait in it for a recovery nobody runs; destroyed, it completes as flushed.
    drop_if_broken(id);
  } else if (!s.error && counts) {
    if (o.is_read()) {
      // Into the GPU from this half while the NIC may still fill the other one.
      if (s.chunks_on_nic > 0)
        ++m_.counters().staged_overlapped;
      const StagingChunk& c = s.chunks[chunk];
      Status st = m_.buffer_table.copy_in(
          m_.buffer_table.buffers().at(o.op.local.id), o.op.local_offset + c.offset,
          slots_[s.slot].memory->data() + s.base + half * chunk_bytes(), c.length);
      if (!st.ok())
        s.error.emplace(
            outcome_of(st.error().with_context("rdma-staged read into " + describe(o.op.local))),
            OpFault::kNone);
    }
    if (!s.error) {
      ++s.chunks_done;
      ++m_.counters().staged_chunks;
    }
  }
  s.half_busy[half] = false;
  if (s.error || timed_out || s.next_chunk >= s.chunks.size())
    return;
  if (auto qp = s.qp.lock(); qp && !qp->needs_recovery())
    post_chunks(id, s, qp);
  else if (s.chunks_on_nic == 0)  // else the chunk still out brings the QP's own error
    s.error.emplace(outcome_of(Error(ErrorCode::kPeerUnavailable,
                                     "the queue pair of an rdma-staged transfer to " +
                                         o.op.remote.owner_name + " is gone")),
                    OpFault::kNone);
}

void StagedPath::settle(OpId id) {
  const OpRecord* o = m_.op_record(id);
  auto it = ops_.find(id);
  if (o == nullptr || it == ops_.end())
    return;
  StagedOp& s = it->second;
  if (s.chunks_on_nic > 0)
    return;  // the NIC may still use the bounce buffer: answer when its last chunk is back
  if (s.chunks_done == s.chunks.size()) {
    if (!m_.options().verify)
      return m_.finish_op(id, TransferOutcome{});
    // The NIC is done with the bounce buffer: another transfer may have it while the owner
    // computes its checksum.
    int slot = s.slot;
    s.slot = -1;
    leave_slot(slot);
    return verify(id);
  }
  TransferOutcome out;
  OpFault fault = OpFault::kNone;
  if (s.error) {
    out = std::move(s.error->first);
    fault = s.error->second;
  } else {
    // Timed out or cancelled between chunks (a chunk that completed after the deadline is not
    // enough): none of its chunks is on the NIC any more.
    out = m_.transfer_of(id).cancelled
              ? m_.timed_out(id, "; none of its chunks is on the NIC any more, " +
                                     std::to_string(s.chunks_done) + " of " +
                                     std::to_string(s.chunks.size()) + " had landed")
              : m_.flushed(id);
  }
  // The NIC is done with the bounce buffer: another transfer may have it while the owner is
  // asked why this one failed (rdma_path.h invariant 11).
  const int slot = s.slot;
  s.slot = -1;
  if (slot >= 0)
    leave_slot(slot);
  failed(id, std::move(out), fault);
}

void StagedPath::forget(OpId id) {
  // Not waiting any more: the waiters hold live ops only (manager invariant 25).
  waiters_.erase_if([id](OpId w) { return w == id; });
  auto it = ops_.find(id);
  if (it == ops_.end())
    return;
  const int slot = it->second.slot;
  ops_.erase(it);
  if (slot >= 0)
    leave_slot(slot);  // the NIC is done with it: the op completed or was flushed
}

bool StagedPath::posted_any(OpId id) const {
  auto it = ops_.find(id);
  return it != ops_.end() && it->second.next_chunk > 0;
}

void StagedPath::withdraw(OpId id) {
  waiters_.erase_if([id](OpId w) { return w == id; });
  auto it = ops_.find(id);
  if (it == ops_.end())
    return;
  const int slot = it->second.slot;
  ops_.erase(it);
  if (slot < 0)
    return;
  // Freed now, handed to a waiter from the next message: handing it over here could nest (the
  // waiter may be rerouted too, freeing it again) as deep as there are waiters.
  Slot& x = slots_[slot];
  if (x.tenants > 0 && --x.tenants > 0)
    return;  // other ops still hold pieces of it
  x.busy = false;
  x.cut = 0;
  if (open_ == slot)
    open_ = -1;
  if (!waiters_.empty())
    m_.self()->send(m_.self(), StagingFreed{});
}

void StagedPath::leave_slot(int slot) {
  Slot& x = slots_[slot];
  if (x.tenants > 0 && --x.tenants > 0)
    return;  // other ops still hold pieces of it (invariant 2)
  x.busy = false;
  x.cut = 0;
  if (open_ == slot)
    open_ = -1;
  hand_on();
}

void StagedPath::hand_on() {
  // A waiter may not take what it was given (rerouted to the fallback, or failed): then the
  // next one that fits may. One that fits always takes its slot or piece (or leaves), so this
  // ends.
  const auto now = m_.now();
  while (!waiters_.empty()) {
    auto id = waiters_.take_next_if(
        [this](OpId w) {
          const OpRecord* o = m_.op_record(w);
          return o == nullptr || room_for(o->length);  // an ended one just leaves
        },
        now);
    if (!id)
      return;
    if (m_.op_record(*id) != nullptr)
      begin(*id);
  }
}

void StagedPath::slots_freed() {
  hand_on();
}

void StagedPath::drop_device() {
  // No op may give back a slot that is gone (one waiting for its owner's answer after a refused
  // access still holds its slot).
  waiters_.clear();
  open_ = -1;
  for (auto& [id, s] : ops_)
    s.slot = -1;
  slots_.clear();
}

uint64_t StagedPath::slots_busy() const {
  uint64_t n = 0;
  for (const auto& slot : slots_)
    n += slot.busy ? 1 : 0;
  return n;
}

}  // namespace caf_rdma::detail
