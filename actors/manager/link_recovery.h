// LinkRecovery: the ends of peer managers' proxies: a dead peer fails what was open with it; a lost
// link is connected again (manager invariant 13). A part of the manager
// (actors/detail/manager_state.h): it works on the tables the front keeps (manager_tables.h) and
// holds no state of its own unless said below.
#pragma once

#include "actors/detail/manager_tables.h"

namespace caf_rdma::detail {

class ManagerState;

class LinkRecovery {
public:
  explicit LinkRecovery(ManagerState& m) : m_(m) {}
  LinkRecovery(const LinkRecovery&) = delete;
  LinkRecovery& operator=(const LinkRecovery&) = delete;

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
  ManagerState& m_;
};

}  // namespace caf_rdma::detail
