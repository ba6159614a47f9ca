// StreamGrants (see stream_grants.h).
#include "actors/manager/stream_grants.h"

#include "actors/detail/manager_state.h"

namespace caf_rdma::detail {

caf::result<StreamGrantMsg> StreamGrants::stream_grant(const BufferRef& ref, uint64_t offset,
                                                       uint64_t length, uint8_t kind,
                                                       uint32_t timeout_ms) {
  if (!is_read_kind(kind) && !is_write_kind(kind))  // atomics never take the stream channel
    return make_rdma_error(
        ErrorCode::kInvalidArgument,
        "stream grant of kind " + std::to_string(kind) + " is neither read (0) nor write (1)");
  if (timeout_ms == 0)
    return make_rdma_error(ErrorCode::kInvalidArgument, "stream grant timeout must be > 0 ms");
  bool write = is_write_kind(kind);
  auto b = m_.buffer_table.owner_access(ref, offset, length, write);
  if (!b.ok())
    return to_caf_error(b.error());
  LocalBuffer& buf = **b;
  const bool gpu = buf.memory != BufferMemory::kHost;
  if (!m_.stream_server() || (gpu && !m_.options().device_memory))
    return StreamGrantMsg{};  // port 0: use fetch/store chunks
  // Counted per node (a node can speak through many actors).
  const auto& sender = m_.self()->current_sender();
  caf::node_id peer = sender ? sender->node() : caf::node_id{};
  uint32_t& peer_grants = grants_per_peer_[peer];
  if (buf.grants >= kMaxGrantsPerBuffer || peer_grants >= kMaxGrantsPerPeer) {
    if (peer_grants == 0)
      grants_per_peer_.erase(peer);
    return make_rdma_error(
        ErrorCode::kResourceExhausted,
        "stream grant on buffer " + std::to_string(ref.id) + " of " + m_.options().name +
            " refused: " +
            (buf.grants >= kMaxGrantsPerBuffer
                 ? "the buffer has " + std::to_string(kMaxGrantsPerBuffer) + " grants outstanding"
                 : "the peer has " + std::to_string(kMaxGrantsPerPeer) + " grants outstanding"));
  }
  // Same host, GPU to GPU: the grant carries the buffer's export (gpu_exports.h invariant 1).
  StagedMemory staged;
  if (gpu) {
    staged = StagedMemory{m_.options().device_memory, buf.gpu};
    if (!m_.stream_server()->unix_name().empty())
      if (auto e = m_.exports.export_of(buf)) {
        staged.exported = e;
        staged.in_export = e->offset + offset;
        staged.handed_out = std::make_shared<std::atomic<bool>>(false);
      }
  }
  const uint32_t limit_ms = m_.capped(timeout_ms);
  caf::actor_addr me = m_.self()->address();
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(limit_ms);
  uint64_t token = m_.stream_server()->grant(
      reinterpret_cast<uint8_t*>(buf.addr) + offset, length,
      write ? StreamDirection::kIntoOwner : StreamDirection::kOutOfOwner, deadline,
      [me, handed = staged.handed_out](uint64_t token, const Status&, uint64_t bytes) {
        const bool exported = handed && handed->load(std::memory_order_acquire);
        if (auto h = caf::actor_cast<caf::actor>(me))
          caf::anon_send(h, StreamServed{token, bytes, exported});
      },
      buf.withdrawal, staged);
  // Held (released only after the grant was used or withdrawn), by its token.
  ++buf.in_use;
  ++buf.grants;
  ++peer_grants;
  grants_.emplace(
      token, GrantHold{ref.id, peer, write, offset, length, caf::actor_cast<caf::actor>(sender)});
  // Withdrawn if nobody claims it in time (the requester timed out or died).
  m_.self()->delayed_send(m_.self(), std::chrono::milliseconds(limit_ms) + kRequestBackstop,
                          StreamExpire{token});
  return StreamGrantMsg{token, m_.stream_server()->host(), m_.stream_server()->port(),
                        m_.stream_server()->host_id(), m_.stream_server()->unix_name()};
}

void StreamGrants::end_grant(uint64_t token) {
  auto it = grants_.find(token);
  if (it == grants_.end())
    return;
  GrantHold hold = it->second;
  grants_.erase(it);
  auto p = grants_per_peer_.find(hold.peer);
  if (p != grants_per_peer_.end() && --p->second == 0)
    grants_per_peer_.erase(p);
  if (auto b = m_.buffer_table.buffers().find(hold.buffer);
      b != m_.buffer_table.buffers().end() && b->second.grants > 0)
    --b->second.grants;
  m_.buffer_table.buffer_done(hold.buffer);
}

void StreamGrants::revoke_unclaimed_grants(uint64_t buffer) {
  if (!m_.stream_server())
    return;
  std::vector<uint64_t> tokens;
  for (const auto& [token, hold] : grants_)
    if (hold.buffer == buffer)
      tokens.push_back(token);
  for (uint64_t token : tokens)
    if (m_.stream_server()->revoke(token))
      end_grant(token);
}

void StreamGrants::stream_served(uint64_t token, uint64_t bytes, bool exported) {
  auto it = grants_.find(token);
  if (it == grants_.end())
    return;
  if (exported)
    if (auto b = m_.buffer_table.buffers().find(it->second.buffer);
        b != m_.buffer_table.buffers().end())
      m_.exports.imported(b->second, it->second.requester);
  m_.counters().served_fallback_bytes += bytes;
  const GrantHold& g = it->second;
  if (g.write && bytes == g.length)  // every byte landed: what a notice may claim
    m_.receipts.stream_landed(
        g.peer == caf::node_id{} ? std::string("anonymous") : caf::to_string(g.peer), token,
        g.buffer, g.offset, g.length);
  end_grant(token);
}

void StreamGrants::stream_expire(uint64_t token) {
  // Claimed grants end with StreamServed (the server calls `done` once it stops touching the
  // memory); an unclaimed one is withdrawn here.
  if (m_.stream_server() && m_.stream_server()->revoke(token))
    end_grant(token);
}

}  // namespace caf_rdma::detail
