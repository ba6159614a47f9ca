// LinkRecovery (see link_recovery.h).
#include "actors/manager/link_recovery.h"

#include <caf/io/middleman.hpp>
#include <cstdio>
#include "actors/op_texts.h"
#include "actors/rdma_node.h"

#include "actors/detail/manager_state.h"
#include "primitives/log.h"

namespace caf_rdma::detail {

void LinkRecovery::on_down(const caf::down_msg& msg) {
  if (m_.facade() && msg.source == m_.facade().address()) {
    // Only CAF's `kill` stops it (see peer_facade.h); this node's own actors are unaffected.
    log_line(LogLevel::kError,
             "%s: the published facade stopped (%s): other nodes can no longer reach this "
             "manager; its own node's actors still can",
             m_.options().name.c_str(), caf::to_string(msg.reason).c_str());
    return;
  }
  m_.windows.window_sender_down(msg.source);  // its node's fetch window, if any (invariant 12)
  auto it = m_.peer_table.peers().find(msg.source);
  if (it == m_.peer_table.peers().end())
    return;
  Peer& p = it->second;
  // The end of a proxy that a new link already replaced says nothing about the peer.
  if (caf::actor_cast<caf::actor_addr>(p.manager).get() != msg.source.get())
    return;
  const std::string reason = caf::to_string(msg.reason);
  if (msg.reason == caf::exit_reason::remote_link_unreachable && may_reconnect(p)) {
    // Invariant 13: the link is gone, maybe not the peer. What was on its way is lost.
    p.reconnecting = true;
    p.link_lost = reason;
    ++m_.counters().links_lost;
    cut_off(msg.source, p,
            make_rdma_error(ErrorCode::kPeerUnavailable, "the link to peer manager " + p.name +
                                                             " was lost (" + reason +
                                                             ") while this was on its way"));
    m_.self()->delayed_send(m_.self(), kReconnectPause[0], Reconnect{msg.source, 1});
    return;
  }
  p.down_reason = reason;
  cut_off(msg.source, p, m_.peer_table.peer_down_error(p));
}

void LinkRecovery::cut_off(const caf::actor_addr& key, Peer& p, const caf::error& err) {
  m_.stream_endpoints()->forget(key);  // stream_endpoints.h invariant 2
  p.endpoint_tried = false;            // learned again over the next link
  m_.handshakes.fail_waiting(p, err);
  // Questions it will never answer (why it refused an access, its checksum): fail them now.
  auto questions = std::move(p.questions);
  p.questions.clear();
  for (auto& [q, fail] : questions)
    fail(err);
  // Destroy its queue pairs: the NIC stops, and nothing polls their completions any more.
  m_.handshakes.drop_qp(p, p.qps.initiated);
  m_.handshakes.drop_qp(p, p.qps.accepted);
  m_.rails.drop_peer(p, err);
  p.qps.lanes.clear();  // its side of the lanes is gone with it
  // Our lanes to it: flush them, so their clients fail now, not at their timeouts.
  for (auto& [id, lane] : m_.nic().lanes)
    if (lane.owner == key)
      if (auto qp = lane.qp.lock())
        (void)qp->abort(error_message(err));
  // Every op still open with it (RDMA ops on the destroyed queue pairs, fallback ops, ops
  // waiting for its answer or for the link) gets no completion and no answer: fail them now.
  // A stream job is left to end instead (a queued one is cancelled now, a running one ends when
  // its connection to the dead peer fails, at the latest at its deadline): its op fails
  // (naming the peer) from stream_done, once the job no longer writes into the local buffer,
  // so no byte of it lands after the reply.
  p.parked.clear();
  // The fetches asked of it will not be answered over that link: a new one starts with an
  // empty window (invariant 12), and the old ones' timeouts release nothing (Peer::link).
  p.fetching = 0;
  p.fetch_queue.clear();
  ++p.link;
  std::vector<OpId> victims;
  for (auto& [ticket, t] : m_.transfers())
    for (uint32_t i = 0; i < t.ops.size(); ++i) {
      const OpRecord& o = t.ops[i];
      if (o.done || o.path == PathKind::kNone || o.peer != key)
        continue;
      if (o.path == PathKind::kStream &&
          m_.stream_path().peer_down(OpId{ticket, i}, "its peer is down"))
        continue;
      victims.push_back(OpId{ticket, i});
    }
  for (OpId id : victims) {
    if (!m_.chunk_path().requests_out(id)) {
      m_.fail_op(id, err);
      continue;
    }
    // chunk_path.h invariant 1: stores or an atomic in the owner's mailbox may still be applied.
    TransferOutcome out = outcome_of(err);
    out.message += link_lost_unknown_text();
    m_.finish_op(id, std::move(out));
  }
}

bool LinkRecovery::may_reconnect(const Peer& p) const {
  return connector_ && parse_host_port(p.name).ok();
}

void LinkRecovery::reconnect(const caf::actor_addr& key, uint32_t attempt) {
  auto it = m_.peer_table.peers().find(key);
  if (it == m_.peer_table.peers().end() || !it->second.reconnecting)
    return;  // made again meanwhile (the peer reached us), or given up
  auto where = parse_host_port(it->second.name);  // may_reconnect checked it
  m_.self()
      ->request(connector_, connect_timeout_, caf::connect_atom::value, where->first, where->second)
      .then(
          [this, key, attempt](const caf::node_id&, caf::strong_actor_ptr& ptr,
                               const std::set<std::string>&) {
            auto it = m_.peer_table.peers().find(key);
            if (it == m_.peer_table.peers().end() || !it->second.reconnecting)
              return;
            Peer& p = it->second;
            if (!ptr)
              return reconnect_failed(key, attempt, "nothing is published there any more");
            if (ptr->node() != key.node() || ptr->id() != key.id())
              // Not the manager we lost: it died, and this one is new (a handle of it is
              // needed to reach it).
              return give_up(key, p,
                             p.name + " is now another manager (" + caf::to_string(ptr->node()) +
                                 "): the peer restarted");
            auto proxy = caf::actor_cast<caf::actor>(std::move(ptr));
            if (caf::actor_cast<caf::actor_addr>(proxy).get() ==
                caf::actor_cast<caf::actor_addr>(p.manager).get())
              // The connector still knew the lost link (it learns of its end on its own).
              return reconnect_failed(key, attempt, "the lost link was still cached");
            adopt(p, proxy);
          },
          [this, key, attempt](caf::error& err) {
            reconnect_failed(key, attempt, error_message(err));
          });
}

void LinkRecovery::reconnect_failed(const caf::actor_addr& key, uint32_t attempt,
                                    const std::string& why) {
  auto it = m_.peer_table.peers().find(key);
  if (it == m_.peer_table.peers().end() || !it->second.reconnecting)
    return;
  if (attempt < kReconnectAttempts) {
    m_.self()->delayed_send(m_.self(), kReconnectPause[attempt], Reconnect{key, attempt + 1});
    return;
  }
  give_up(
      key, it->second,
      std::to_string(attempt) + " connects to " + it->second.name + " failed, the last: " + why);
}

void LinkRecovery::give_up(const caf::actor_addr& key, Peer& p, const std::string& why) {
  p.reconnecting = false;
  p.down_reason = p.link_lost + "; " + why;
  cut_off(key, p, m_.peer_table.peer_down_error(p));  // the ops that waited for the link
}

void LinkRecovery::adopt(Peer& p, const caf::actor& proxy) {
  p.manager = proxy;
  m_.self()->monitor(proxy);
  p.monitored = true;
  if (p.reconnecting || !p.down_reason.empty())
    ++m_.counters().reconnects;
  p.reconnecting = false;
  p.link_lost.clear();
  p.down_reason.clear();
  ClassQueue<OpId> parked;  // all of them, most urgent class first, by deadline (invariant 25)
  for (OpId id : p.parked)
    if (m_.op_record(id) != nullptr)  // else it ended while it waited
      m_.enqueue_waiting(parked, id);
  p.parked.clear();
  for (OpId id : parked.take_all())
    m_.resume_op(id);
}

void LinkRecovery::use_connector(caf::io::middleman_actor connector,
                                 std::chrono::milliseconds timeout) {
  connector_ = std::move(connector);
  connect_timeout_ = timeout;
}

}  // namespace caf_rdma::detail
