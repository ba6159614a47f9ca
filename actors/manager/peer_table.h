// PeerTable: the peer managers this manager knows, the requests it sends them (through its
// facade, never in its own name: manager invariant 6) and the questions open with each, each
// answered exactly once: by the peer, by its timeout, or at once when the peer goes down.
//
// A part of the manager (actors/manager/manager_part.h) that keeps the peers (below).
#pragma once

#include "actors/detail/manager_tables.h"
#include "actors/manager/manager_part.h"

namespace caf_rdma::detail {

class PeerTable : public ManagerPart {
public:
  using ManagerPart::ManagerPart;

  Peer& peer_for(const caf::actor& manager, const std::string& name);
  std::string peer_name(const caf::actor_addr& key) const;
  caf::result<std::string> peer_state(const caf::actor& peer) const;
  /// The error of every operation on a peer that is down.
  caf::error peer_down_error(const Peer& p) const;
  /// The error of what cannot wait for a lost link to be made again (questions, lanes).
  caf::error link_lost_error(const Peer& p) const;
  caf::error no_owner_error(const BufferHandle& remote) const;
  /// Sends a request to peer manager `peer` (named `name`) and calls `ok` with its answer or
  /// `fail` with its error, exactly once: with peer_unavailable at once if the peer is down or
  /// goes down before it answers, with the request's error at `timeout`.
  template <class T, class... Ts>
  void ask_peer(const caf::actor& peer, const std::string& name, std::chrono::milliseconds timeout,
                std::function<void(T&)> ok, std::function<void(const caf::error&)> fail,
                Ts&&... xs);
  /// Asks the owner of `remote` (a peer manager) with `xs` within `timeout` and relays its
  /// answer or error (as ask_peer: peer_unavailable at once if it is or goes down).
  template <class T, class... Ts>
  caf::result<T> relay_to_owner(const BufferHandle& remote, std::chrono::milliseconds timeout,
                                Ts&&... xs);
  /// The peer of remote op `id`, if the op may go to it now; else the op failed (peer down)
  /// or waits for its lost link (parked, invariant 13), and this is null.
  Peer* reachable(OpId id);
  /// The fail callback of question `q` to peer `key`, removed; empty if already answered.
  std::function<void(const caf::error&)> take_question(const caf::actor_addr& key, uint64_t q);
  /// For a client of this process (RdmaClient's lanes): asks the owner of `remote` about an
  /// access its NIC refused (buf_check, within `timeout`: what is left of the op's time) or
  /// for its checksum of a range (verify mode). Fails with peer_unavailable naming the owner as
  /// soon as it is known to be down.
  caf::result<TransferOutcome> ask_owner_check(const BufferHandle& remote, uint64_t offset,
                                               uint64_t length, uint8_t kind,
                                               std::chrono::milliseconds timeout);
  caf::result<uint64_t> ask_owner_checksum(const BufferHandle& remote, uint64_t offset,
                                           uint64_t length);
  /// A request to peer manager `dest`, sent by the facade in its own name (the manager's
  /// handle never leaves the process); its answer or error comes back as a request's would.
  template <class... Ts>
  auto peer_request(const caf::actor& dest, std::chrono::milliseconds timeout, Ts&&... xs);
  /// A message to peer manager `dest`, sent by the facade (after every earlier peer message).
  template <class... Ts>
  void peer_send(const caf::actor& dest, Ts&&... xs);
  /// Where messages to peer manager `dest` go: its current proxy (a reconnect replaces the one
  /// handles carry, invariant 13), or `dest` itself when it is no known peer.
  const caf::actor& route(const caf::actor& dest) const;
  /// Whether `owner` (a handle's) is this manager, as peers know it: its facade.
  bool owns(const caf::actor& owner) const;
  /// The peers, by the address of their manager (as this manager first met it): each its
  /// connection state and, in Peer::qps, its RDMA state. Entries are never erased before the
  /// manager goes (a peer that went down stays, down).
  std::map<caf::actor_addr, Peer>& peers() { return peers_; }
  const std::map<caf::actor_addr, Peer>& peers() const { return peers_; }

private:
  uint64_t next_question_ = 1;
  std::map<caf::actor_addr, Peer> peers_;
};

}  // namespace caf_rdma::detail
