// LinkRecovery: the ends of peer managers' proxies: a dead peer fails what was open with it; a
// lost link is connected again.
//
// A part of the manager (actors/manager/manager_part.h); what is its own is below.
//
// Invariants (numbered as the manager's, which lists them all):
// 13. A lost link is not a dead peer (this file): when the proxy of a peer manager ends
//     with remote_link_unreachable, and its address is known (a handle's host:port) and the node
//     gave a connector (UseConnector), everything on its way over the link fails at once
//     (peer_unavailable naming the peer and the lost link), new ops wait (each until its own
//     timeout), and the address is connected again, at most kReconnectAttempts times. Only a
//     connect that reaches the same manager (same node id and actor id) makes the link again:
//     the waiting ops resume on it (by class, then deadline: manager invariant 25), and every
//     later message goes to the new proxy (handles
//     keep naming the old one: peer_request and peer_send route by address). Nothing there,
//     no answer, or another node at that address (the peer restarted: a new manager) after the
//     last attempt declares the peer down for good. Any other end of a proxy (the peer's actor
//     or node gone) is down for good at once. A peer whose handshake reaches us over a new
//     link is taken back (its new proxy replaces the old one, accept_connect) only if the
//     middleman has a direct connection to its node: BASP lets a third node claim any node id
//     for what it routes, so a new proxy reached through another node proves nothing.
#pragma once

#include "actors/detail/manager_tables.h"
#include "actors/manager/manager_part.h"

namespace caf_rdma::detail {

class LinkRecovery : public ManagerPart {
public:
  using ManagerPart::ManagerPart;

  void on_down(const caf::down_msg& msg);
  /// Fails everything open with peer `key` with `err` and drops its queue pairs and lanes: it
  /// went down, or the link that carried all that was lost.
  void cut_off(const caf::actor_addr& key, Peer& p, const caf::error& err);
  /// Whether a lost link to `p` can be made again (invariant 13).
  bool may_reconnect(const Peer& p) const;
  /// Attempt `attempt` to make the lost link to peer `key` again (invariant 13).
  void reconnect(const caf::actor_addr& key, uint32_t attempt);
  /// The answer to attempt `attempt` was not the link: try again, or declare `key` down (why).
  void reconnect_failed(const caf::actor_addr& key, uint32_t attempt, const std::string& why);
  /// Ends a reconnect: the peer is down for good (why), its waiting ops fail.
  void give_up(const caf::actor_addr& key, Peer& p, const std::string& why);
  /// The peer's manager is reachable through `proxy` (a new link): later messages go there,
  /// and ops waiting for the link resume.
  void adopt(Peer& p, const caf::actor& proxy);
  /// The middleman actor to reconnect lost links with (invariant 13).
  void use_connector(caf::io::middleman_actor connector, std::chrono::milliseconds timeout);

private:
  /// Invariant 13: the node's middleman actor (connect_atom) and its connect timeout; null: a
  /// lost link leaves its peer down.
  caf::io::middleman_actor connector_;
  std::chrono::milliseconds connect_timeout_{0};
};

}  // namespace caf_rdma::detail
