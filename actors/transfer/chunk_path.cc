// ChunkPath: the fallback in CAF messages (see chunk_path.h).
#include "actors/transfer/chunk_path.h"

#include <algorithm>

#include "actors/detail/manager_state.h"
#include "actors/op_texts.h"

namespace caf_rdma::detail {

void ChunkPath::start(OpId id) {
  if (m_.peer_table.reachable(id) == nullptr)
    return;  // failed (down) or parked until its link is made again
  ops_.try_emplace(id);
  pump(id);
}

void ChunkPath::take_over(OpId id) {
  OpRecord* o = m_.op_record(id);
  if (o == nullptr)
    return;
  o->path = PathKind::kChunks;
  o->receipt = 0;  // a stream grant's token is not its chunks' receipt
  ops_[id] = ChunkOp{};
  pump(id);
}

std::chrono::milliseconds ChunkPath::chunk_timeout(OpId id) const {
  // A chunk's request ends by the transfer's deadline (plus the backstop): a timed-out write
  // that waits for its chunks (invariant 1) replies soon after its timeout.
  auto left = std::max(
      std::chrono::milliseconds(0),
      std::chrono::duration_cast<std::chrono::milliseconds>(m_.transfer_of(id).due - m_.now()));
  return left + kRequestBackstop;  // never more than request_timeout(t)
}

uint32_t ChunkPath::left_ms(OpId id) const {
  // Rounded up, and at least 1: the owner never refuses a request before its deadline.
  const auto left = m_.transfer_of(id).due - m_.now();
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(left).count();
  return static_cast<uint32_t>(std::clamp<int64_t>(ms, 1, UINT32_MAX));
}

void ChunkPath::pump(OpId id) {
  OpRecord* o = m_.op_record(id);
  auto it = ops_.find(id);
  if (o == nullptr || it == ops_.end())
    return;
  ChunkOp& c = it->second;
  const bool is_read = o->is_read();
  if (!is_read && !c.past_due && m_.now() >= m_.transfer_of(id).due) {
    // Invariant 1: past its deadline (the sweep may come a little later) nothing more leaves.
    c.past_due = true;
    if (c.in_flight == 0)
      settle(id, c);
    return;
  }
  if (c.past_due)
    return;
  if (is_atomic(o->op)) {  // invariant 4: one request
    if (c.in_flight == 0 && c.next_offset == 0) {
      c.next_offset = o->length;
      ++c.in_flight;
      ask_atomic(id);
    }
    return;
  }
  Peer& owner = m_.peer_table.peers().at(o->peer);
  const ManagerOptions& opt = m_.options();
  while (!c.error && c.in_flight < opt.fallback_window && c.next_offset < o->length) {
    const uint64_t off = c.next_offset;
    const uint64_t n = std::min<uint64_t>(opt.fallback_chunk_bytes, o->length - off);
    // Invariant 2: reads ask an owner for at most a window of answers at once; more wait here,
    // not at the owner.
    const uint64_t charge = std::max(n, kWindowMinCharge);
    if (is_read && owner.fetching > 0 && owner.fetching + charge > opt.peer_window_bytes) {
      if (!c.fetch_queued) {
        c.fetch_queued = true;
        m_.enqueue_waiting(owner.fetch_queue, id);  // invariant 2: by class, then deadline
      }
      break;
    }
    c.next_offset += n;
    ++c.in_flight;
    if (is_read) {
      owner.fetching += charge;
      ask_fetch(id, off, n, charge);
    } else {
      send_store(id, off, n);
      if (ops_.count(id) == 0 || m_.op_record(id) == nullptr)
        return;  // the op ended (a chunk that never left was its last)
    }
  }
}

void ChunkPath::ask_fetch(OpId id, uint64_t off, uint64_t n, uint64_t charge) {
  const OpRecord& o = *m_.op_record(id);
  const TransferOp& op = o.op;
  const caf::actor_addr key = o.peer;
  const uint64_t link = m_.peer_table.peers().at(key).link;
  const uint64_t local_off = op.local_offset + off;
  m_.peer_table
      .peer_request(op.remote.owner, chunk_timeout(id), fetch_atom::value, ref_of(op.remote),
                    op.remote_offset + off, n)
      .then(
          [this, id, local_off, n, key, charge, link](ByteChunk& data) {
            fetch_answered(key, charge, link);
            const OpRecord* o = m_.op_record(id);
            if (o == nullptr)
              return;            // timed out or failed: drop late data (invariant 1)
            if (data.size != n)  // invariant 3
              return m_.finish_op(
                  id, outcome_of(Error(ErrorCode::kInternal,
                                       "fallback read chunk of " + std::to_string(n) +
                                           " bytes came back with " + std::to_string(data.size))));
            Status st = m_.buffer_table.copy_in(m_.buffer_table.buffers().at(o->op.local.id),
                                                local_off, data.data, n);
            if (!st.ok())
              return m_.finish_op(id, outcome_of(st.error()));
            chunk_done(id, n);
          },
          [this, id, key, charge, link](caf::error& err) {
            fetch_answered(key, charge, link);
            chunk_failed(id, err);
          });
}

void ChunkPath::send_store(OpId id, uint64_t off, uint64_t n) {
  OpRecord& o = *m_.op_record(id);
  const TransferOp& op = o.op;
  LocalBuffer& local = m_.buffer_table.buffers().at(op.local.id);
  const uint64_t local_off = op.local_offset + off;
  // Zero-copy: the chunk points into the local buffer, which stays in use (so its release
  // waits) until the last copy of the message carrying it is destroyed, i.e. until it has been
  // serialized and sent (or dropped), whenever its reply comes: the pin's deleter tells us
  // (ChunkSent).
  ByteChunk bytes;
  const uint64_t local_id = op.local.id;
  if (local.memory == BufferMemory::kHost) {
    bytes.data = reinterpret_cast<uint8_t*>(local.addr) + local_off;
    bytes.size = n;
    ++local.in_use;
    caf::actor_addr me = m_.self()->address();
    bytes.pin = std::shared_ptr<void>(nullptr, [me, local_id](void*) {
      if (auto h = caf::actor_cast<caf::actor>(me))
        caf::anon_send(h, ChunkSent{local_id});
    });
  } else {  // GPU memory: copied to the host first
    bytes = ByteChunk::allocate(n);
    if (!bytes.owned)
      return write_chunk_failed(
          id, ops_.at(id),
          outcome_of(Error(ErrorCode::kResourceExhausted,
                           ByteChunk::no_memory(n, "store chunk (a copy of GPU memory)"))));
    if (Status st = m_.buffer_table.copy_out(local, local_off, bytes.owned.get(), n); !st.ok())
      return write_chunk_failed(id, ops_.at(id),
                                outcome_of(st.error()));  // earlier ones may be out
  }
  // A notify write's chunks carry its receipt: its owner records what of it landed.
  if (op.notify && o.receipt == 0)
    o.receipt = m_.receipts.next_chunk_receipt();
  m_.peer_table
      .peer_request(op.remote.owner, chunk_timeout(id), store_atom::value, ref_of(op.remote),
                    op.remote_offset + off, std::move(bytes), o.receipt, left_ms(id))
      .then([this, id](uint64_t stored) { chunk_done(id, stored); },
            [this, id](caf::error& err) { chunk_failed(id, err); });
}

void ChunkPath::ask_atomic(OpId id) {
  const TransferOp& op = m_.op_record(id)->op;
  m_.peer_table
      .peer_request(op.remote.owner, chunk_timeout(id), atomic_atom::value, ref_of(op.remote),
                    op.remote_offset, op.kind, op.operand, op.compare, left_ms(id))
      .then(
          [this, id](uint64_t old) {
            const OpRecord* o = m_.op_record(id);
            auto it = ops_.find(id);
            if (o == nullptr || it == ops_.end())
              return;
            if (!it->second.error) {  // applied, even past the deadline: the old value lands
              Status st = m_.buffer_table.copy_in(m_.buffer_table.buffers().at(o->op.local.id),
                                                  o->op.local_offset, &old, kAtomicBytes);
              if (!st.ok()) {
                TransferOutcome out = outcome_of(st.error());
                out.message = atomic_applied_text(o->op, old, out.message);
                return write_chunk_failed(id, it->second, std::move(out));
              }
            }
            chunk_done(id, kAtomicBytes);
          },
          [this, id](caf::error& err) { chunk_failed(id, err); });
}

void ChunkPath::chunk_done(OpId id, uint64_t bytes) {
  const OpRecord* o = m_.op_record(id);
  auto it = ops_.find(id);
  if (o == nullptr || it == ops_.end())
    return;
  ChunkOp& c = it->second;
  --c.in_flight;
  c.bytes_done += bytes;
  if (c.error || c.past_due) {  // answered once no request is on its way (invariant 1)
    if (c.in_flight == 0)
      settle(id, c);
    return;
  }
  if (c.bytes_done >= o->length)
    return m_.finish_op(id, TransferOutcome{});
  pump(id);
}

void ChunkPath::chunk_failed(OpId id, const caf::error& err) {
  const OpRecord* o = m_.op_record(id);
  auto it = ops_.find(id);
  if (o == nullptr || it == ops_.end())
    return;
  TransferOutcome out = outcome_of(err);
  if (out.code == static_cast<uint8_t>(ErrorCode::kPeerUnavailable) ||
      err.category() == caf::atom("system"))
    out.message = fallback_failed_text(o->op, out.message);
  if (o->is_read())  // late data of a failed read is dropped: nothing to wait for
    return m_.finish_op(id, std::move(out));
  if (err == caf::sec::request_timeout) {  // no answer by the deadline plus the backstop
    ChunkOp& c = it->second;
    --c.in_flight;
    ++c.unanswered;
    if (c.in_flight == 0)
      settle(id, c);
    return;
  }
  write_chunk_failed(id, it->second, std::move(out));
}

void ChunkPath::write_chunk_failed(OpId id, ChunkOp& c, TransferOutcome out) {
  --c.in_flight;
  if (!c.error)
    c.error = std::move(out);
  if (c.in_flight == 0)
    settle(id, c);
}

void ChunkPath::settle(OpId id, const ChunkOp& c) {
  const OpRecord& o = *m_.op_record(id);
  TransferOutcome out;
  if (c.unanswered > 0) {  // some may still be applied: nobody can say what landed
    out.code = static_cast<uint8_t>(ErrorCode::kPeerUnavailable);
    out.message = chunks_unknown_text(o.op, o.length, c.unanswered, kRequestBackstop) +
                  (c.error ? "; the owner's other answer: " + c.error->message : "");
  } else if (c.error && c.error->code != static_cast<uint8_t>(ErrorCode::kTimeout)) {
    out = *c.error;  // the first error (an owner's late refusal is said below)
    if (!is_atomic(o.op))
      out.message += "; " + stored_text(c.bytes_done, o.length);
  } else if (c.bytes_done >= o.length) {
    out = TransferOutcome{};  // every request took effect, some after the deadline
  } else {  // its time ran out (or its owner's did), every request answered: what landed is known
    const std::string why = c.error ? ": " + c.error->message : "";
    out =
        m_.timed_out(id, is_atomic(o.op) ? why : "; " + stored_text(c.bytes_done, o.length) + why);
  }
  m_.finish_op(id, std::move(out));
}

void ChunkPath::fetch_answered(const caf::actor_addr& key, uint64_t charge, uint64_t link) {
  auto p = m_.peer_table.peers().find(key);
  if (p == m_.peer_table.peers().end() || p->second.link != link)
    return;  // asked over a link lost since: forgotten with it (invariant 2)
  Peer& owner = p->second;
  owner.fetching -= std::min(owner.fetching, charge);
  // The reads waiting for this owner's window, by class and deadline (manager invariant 25),
  // each once; one that still does not fit queues again, and the window is full.
  for (size_t n = owner.fetch_queue.size(); n > 0 && !owner.fetch_queue.empty(); --n) {
    if (owner.fetching > 0 && owner.fetching + kWindowMinCharge > m_.options().peer_window_bytes)
      break;
    OpId id = owner.fetch_queue.pop(m_.now());
    auto it = ops_.find(id);
    if (m_.op_record(id) == nullptr || it == ops_.end())
      continue;  // finished (timed out, failed) while it waited
    it->second.fetch_queued = false;
    pump(id);
    if (auto again = ops_.find(id); again != ops_.end() && again->second.fetch_queued)
      break;
  }
}

void ChunkPath::forget(OpId id) {
  auto it = ops_.find(id);
  if (it == ops_.end())
    return;
  if (it->second.fetch_queued) {
    // Not waiting any more: the queue holds live ops only (manager invariant 25).
    auto p = m_.peer_table.peers().find(m_.transfer_of(id).ops[id.index].peer);
    if (p != m_.peer_table.peers().end())
      p->second.fetch_queue.erase_if([id](OpId w) { return w == id; });
  }
  ops_.erase(it);
}

bool ChunkPath::requests_out(OpId id) const {
  const OpRecord* o = m_.op_record(id);
  auto it = ops_.find(id);
  return o != nullptr && !o->is_read() && it != ops_.end() && it->second.in_flight > 0;
}

bool ChunkPath::deadline(OpId id, DeadlineStage stage) {
  if (requests_out(id)) {
    // Invariant 1: requests on their way: the reply waits for their answers (each bounded by
    // the deadline plus the backstop) and says what they did; no more are sent.
    ops_.at(id).past_due = true;
    return false;
  }
  return TransferPath::deadline(id, stage);
}

}  // namespace caf_rdma::detail
