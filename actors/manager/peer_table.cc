// PeerTable (see peer_table.h).
#include "actors/manager/peer_table.h"

#include <caf/io/middleman.hpp>
#include <cstdio>
#include "actors/op_texts.h"
#include "actors/rdma_node.h"

#include "actors/detail/manager_state.h"

namespace caf_rdma::detail {

std::string PeerTable::peer_name(const caf::actor_addr& key) const {
  auto it = peers_.find(key);
  return it != peers_.end() ? it->second.name : caf::to_string(key);
}

Peer& PeerTable::peer_for(const caf::actor& manager, const std::string& name) {
  auto key = manager.address();
  auto it = peers_.find(key);
  if (it == peers_.end()) {
    Peer p;
    p.manager = manager;
    p.name = name.empty() ? caf::to_string(manager) : name;
    it = peers_.emplace(key, std::move(p)).first;
  } else if (!name.empty() && it->second.name != name &&
             it->second.name == caf::to_string(it->second.manager)) {
    // Known from its handshake only (named by its actor id): a handle tells its name
    // (host:port), which is what errors must say, and where a lost link is made again. Once
    // named, a peer keeps its name: a handle someone else made for it cannot move it.
    it->second.name = name;
  }
  if (!it->second.monitored) {
    m_.self()->monitor(manager);
    it->second.monitored = true;
  }
  return it->second;
}

caf::result<std::string> PeerTable::peer_state(const caf::actor& peer) const {
  if (!peer)
    return std::string();
  auto it = peers_.find(peer.address());
  if (it == peers_.end())
    return std::string();
  if (it->second.reconnecting)
    return "link lost (" + it->second.link_lost + "); reconnecting";
  return it->second.down_reason;
}

caf::error PeerTable::peer_down_error(const Peer& p) const {
  return make_rdma_error(ErrorCode::kPeerUnavailable, peer_down_text(p.name, p.down_reason));
}

caf::error PeerTable::link_lost_error(const Peer& p) const {
  return make_rdma_error(ErrorCode::kPeerUnavailable, "the link to peer manager " + p.name +
                                                          " was lost (" + p.link_lost +
                                                          ") and is being made again");
}

std::function<void(const caf::error&)> PeerTable::take_question(const caf::actor_addr& key,
                                                                uint64_t q) {
  auto p = peers_.find(key);
  if (p == peers_.end())
    return {};
  auto it = p->second.questions.find(q);
  if (it == p->second.questions.end())
    return {};
  auto f = std::move(it->second);
  p->second.questions.erase(it);
  return f;
}

caf::error PeerTable::no_owner_error(const BufferHandle& remote) const {
  return make_rdma_error(ErrorCode::kInvalidArgument,
                         "handle " + describe(remote) + " names no owner");
}

caf::result<TransferOutcome> PeerTable::ask_owner_check(const BufferHandle& remote, uint64_t offset,
                                                        uint64_t length, uint8_t kind,
                                                        std::chrono::milliseconds timeout) {
  if (!remote.owner)
    return no_owner_error(remote);
  if (owns(remote.owner))
    return m_.buffer_table.check_access(ref_of(remote), offset, length, kind);
  return relay_to_owner<TransferOutcome>(remote, timeout, buf_check_atom::value, ref_of(remote),
                                         offset, length, kind);
}

caf::result<uint64_t> PeerTable::ask_owner_checksum(const BufferHandle& remote, uint64_t offset,
                                                    uint64_t length) {
  if (!remote.owner)
    return no_owner_error(remote);
  if (owns(remote.owner))
    return m_.buffer_table.checksum(ref_of(remote), offset, length);
  return relay_to_owner<uint64_t>(remote, m_.options().handshake_timeout, buf_sum_atom::value,
                                  ref_of(remote), offset, length);
}

const caf::actor& PeerTable::route(const caf::actor& dest) const {
  auto it = peers_.find(dest.address());
  return it != peers_.end() && it->second.manager ? it->second.manager : dest;
}

bool PeerTable::owns(const caf::actor& owner) const {
  return owner && owner.address() == m_.facade().address();
}

Peer* PeerTable::reachable(OpId id) {
  OpRecord& o = m_.transfer_of(id).ops[id.index];
  Peer& p = peer_for(o.op.remote.owner, o.op.remote.owner_name);
  if (!p.down_reason.empty()) {
    m_.fail_op(id,
               make_rdma_error(ErrorCode::kPeerUnavailable, peer_down_text(p.name, p.down_reason)));
    return nullptr;
  }
  if (p.reconnecting) {  // invariant 13: until the link is made again (or its timeout)
    p.parked.push_back(id);
    return nullptr;
  }
  return &p;
}

}  // namespace caf_rdma::detail
