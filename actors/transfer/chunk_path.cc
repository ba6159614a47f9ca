// ChunkPath: the fallback in CAF messages (see chunk_path.h).
#include "actors/transfer/chunk_path.h"

#include <algorithm>
#include <tuple>
#include <utility>

#include "actors/detail/manager_state.h"
#include "actors/op_texts.h"

namespace caf_rdma::detail {

void ChunkPath::start(OpId id) {
  if (m_.peer_table.reachable(id) == nullptr)
    return;  // failed (down) or parked until its link is made again
  ops_.try_emplace(id);
  if (m_.nic().batching && packable(id)) {
    held_.push_back(id);  // invariant 5: leaves with the batch's other small ops (send_held)
    return;
  }
  pump(id);
}

bool ChunkPath::packable(OpId id) const {
  const OpRecord& o = *m_.op_record(id);
  // A write into GPU memory could land in part (a failed copy at its owner): not whole or
  // nothing, so not packed.
  return !is_atomic(o.op) && !o.op.notify && o.length > 0 &&
         o.length < m_.options().fallback_chunk_bytes && (o.is_read() || !o.op.remote.on_gpu());
}

void ChunkPath::send_held() {
  std::vector<OpId> held;
  held.swap(held_);
  // One pack open per owner, buffer (id and secret), direction and class (a pack waits for its
  // owner's window as one: manager invariant 25); a full one leaves at once.
  using Key = std::tuple<caf::actor_addr, uint64_t, uint64_t, uint64_t, bool, uint8_t>;
  std::map<Key, Pack> open;
  const uint64_t most = m_.options().fallback_chunk_bytes;
  for (OpId id : held) {
    const OpRecord* o = m_.op_record(id);
    if (o == nullptr || ops_.count(id) == 0)
      continue;  // ended while the batch started (its transfer failed)
    const BufferRef ref = ref_of(o->op.remote);
    Pack& p = open[Key{o->peer, ref.id, ref.secret_hi, ref.secret_lo, o->is_read(),
                       static_cast<uint8_t>(priority_of(o->op))}];
    if (!p.ops.empty() && (p.bytes + o->length > most || p.ops.size() == kMaxPackedRanges))
      launch_pack(std::exchange(p, Pack{}));
    p.ops.push_back(id);
    p.bytes += o->length;
  }
  for (auto& [key, p] : open)
    launch_pack(std::move(p));
}

void ChunkPath::launch_pack(Pack p) {
  // Ops that ended while the pack waited (timed out, cancelled, failed) leave it.
  auto ended = [this](OpId id) { return m_.op_record(id) == nullptr || ops_.count(id) == 0; };
  p.ops.erase(std::remove_if(p.ops.begin(), p.ops.end(), ended), p.ops.end());
  if (p.ops.empty())
    return;
  if (p.ops.size() == 1) {  // alone: a chunk of its own, as any op
    ops_.at(p.ops.front()).next_offset = 0;
    return pump(p.ops.front());
  }
  p.bytes = 0;
  for (OpId id : p.ops) {
    ops_.at(id).next_offset = m_.op_record(id)->length;  // its bytes leave in the pack only
    p.bytes += m_.op_record(id)->length;
  }
  const OpId lead = p.ops.front();
  const OpRecord& o = *m_.op_record(lead);
  if (!o.is_read()) {
    if (m_.now() >= m_.transfer_of(lead).due) {  // invariant 1: nothing leaves past it
      for (OpId id : p.ops)
        pump(id);  // each settles as past its deadline, nothing stored
      return;
    }
    return send_store_pack(p);
  }
  Peer& owner = m_.peer_table.peers().at(o.peer);
  const uint64_t charge = std::max(p.bytes, kWindowMinCharge);
  if (owner.fetching > 0 && owner.fetching + charge > m_.options().peer_window_bytes) {
    ops_.at(lead).fetch_queued = true;  // invariant 2, the pack as one entry
    queued_packs_[lead] = std::move(p);
    m_.enqueue_waiting(owner.fetch_queue, lead);
    return;
  }
  owner.fetching += charge;
  ask_fetch_pack(p, charge);
}

void ChunkPath::ask_fetch_pack(const Pack& p, uint64_t charge) {
  const OpRecord& lead = *m_.op_record(p.ops.front());
  const caf::actor_addr key = lead.peer;
  const uint64_t link = m_.peer_table.peers().at(key).link;
  std::vector<PackedRange> ranges;
  std::vector<std::pair<OpId, uint64_t>> parts;  // each op and its length, in request order
  ranges.reserve(p.ops.size());
  parts.reserve(p.ops.size());
  for (OpId id : p.ops) {
    const OpRecord& o = *m_.op_record(id);
    ranges.push_back(PackedRange{o.op.remote_offset, o.length});
    parts.emplace_back(id, o.length);
    ++ops_.at(id).in_flight;
  }
  ++m_.counters().packed_chunks;
  m_.counters().packed_ops += p.ops.size();
  m_.peer_table
      .peer_request(lead.op.remote.owner, chunk_timeout(p.ops.front()), fetch_list_atom::value,
                    ref_of(lead.op.remote), std::move(ranges))
      .then(
          [this, parts, total = p.bytes, key, charge, link](ByteChunk& data) {
            fetch_answered(key, charge, link);
            uint64_t at = 0;  // the answer holds each op's bytes in request order
            for (const auto& [id, n] : parts) {
              const uint64_t from = at;
              at += n;
              const OpRecord* o = m_.op_record(id);
              if (o == nullptr || ops_.count(id) == 0)
                continue;                // ended meanwhile: its late data is dropped (invariant 1)
              if (data.size != total) {  // invariant 3
                m_.finish_op(id, outcome_of(Error(
                                     ErrorCode::kInternal,
                                     "fallback read chunk of " + std::to_string(total) +
                                         " bytes (a pack of " + std::to_string(parts.size()) +
                                         " reads) came back with " + std::to_string(data.size))));
                continue;
              }
              Status st = m_.buffer_table.copy_in(m_.buffer_table.buffers().at(o->op.local.id),
                                                  o->op.local_offset, data.data + from, n);
              if (!st.ok()) {
                m_.finish_op(id, outcome_of(st.error()));
                continue;
              }
              chunk_done(id, n);
            }
          },
          [this, ops = p.ops, key, charge, link](caf::error& err) {
            fetch_answered(key, charge, link);
            for (OpId id : ops)
              chunk_failed(id, err);
          });
}

void ChunkPath::send_store_pack(const Pack& p) {
  const OpRecord& lead = *m_.op_record(p.ops.front());
  // A copy (the ops' bytes side by side), out of host or GPU memory alike.
  ByteChunk bytes = ByteChunk::allocate(p.bytes);
  std::optional<TransferOutcome> failed;
  if (!bytes.owned)
    failed = outcome_of(
        Error(ErrorCode::kResourceExhausted, ByteChunk::no_memory(p.bytes, "packed store chunk")));
  std::vector<PackedRange> ranges;
  ranges.reserve(p.ops.size());
  uint64_t at = 0;
  for (OpId id : p.ops) {
    const OpRecord& o = *m_.op_record(id);
    ranges.push_back(PackedRange{o.op.remote_offset, o.length});
    ++ops_.at(id).in_flight;
    if (!failed) {
      Status st = m_.buffer_table.copy_out(m_.buffer_table.buffers().at(o.op.local.id),
                                           o.op.local_offset, bytes.owned.get() + at, o.length);
      if (!st.ok())
        failed = outcome_of(st.error());
    }
    at += o.length;
  }
  if (failed) {  // nothing left: each op fails with it (stored 0)
    for (OpId id : p.ops)
      if (auto it = ops_.find(id); it != ops_.end() && m_.op_record(id) != nullptr)
        write_chunk_failed(id, it->second, *failed);
    return;
  }
  ++m_.counters().packed_chunks;
  m_.counters().packed_ops += p.ops.size();
  m_.peer_table
      .peer_request(lead.op.remote.owner, chunk_timeout(p.ops.front()), store_list_atom::value,
                    ref_of(lead.op.remote), std::move(ranges), std::move(bytes),
                    left_ms(p.ops.front()))
      .then(
          [this, parts = p.ops, total = p.bytes](uint64_t stored) {
            // The owner stores every range or none (invariant 5): all of them landed.
            if (stored != total) {
              const caf::error wrong =
                  make_rdma_error(ErrorCode::kInternal,
                                  "the owner answered a packed store of " + std::to_string(total) +
                                      " bytes with " + std::to_string(stored) + " bytes stored");
              for (OpId id : parts)
                chunk_failed(id, wrong);
              return;
            }
            for (OpId id : parts)
              if (const OpRecord* o = m_.op_record(id); o != nullptr)
                chunk_done(id, o->length);
          },
          [this, ops = p.ops](caf::error& err) {
            for (OpId id : ops)
              chunk_failed(id, err);
          });
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
  if (auto pk = queued_packs_.find(id); pk != queued_packs_.end()) {  // its owner's window opened
    Pack p = std::move(pk->second);
    queued_packs_.erase(pk);
    return launch_pack(std::move(p));
  }
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
    ops_.erase(it);
    // A pack it stood for in the queue: the next of its ops that waits stands for it now.
    if (auto pk = queued_packs_.find(id); pk != queued_packs_.end()) {
      Pack rest = std::move(pk->second);
      queued_packs_.erase(pk);
      // The first that still waits (ended ones further on are dropped when it leaves).
      auto live = std::find_if(rest.ops.begin(), rest.ops.end(), [this](OpId w) {
        return m_.op_record(w) != nullptr && ops_.count(w) != 0;
      });
      rest.ops.erase(rest.ops.begin(), live);
      if (!rest.ops.empty() && p != m_.peer_table.peers().end()) {
        const OpId next = rest.ops.front();
        ops_.at(next).fetch_queued = true;
        queued_packs_[next] = std::move(rest);
        m_.enqueue_waiting(p->second.fetch_queue, next);
      }
    }
    return;
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
