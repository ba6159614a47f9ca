// QpHandshakes (see qp_handshakes.h).
#include "actors/manager/qp_handshakes.h"

#include <caf/io/middleman.hpp>
#include <cstdio>
#include "actors/op_texts.h"
#include "actors/rdma_node.h"

#include "actors/detail/manager_state.h"
#include "actors/manager/direct_link.h"

namespace caf_rdma::detail {

uint64_t QpHandshakes::hold_opening(std::shared_ptr<QpEndpoint> qp) {
  uint64_t n = m_.nic().next_opening++;
  m_.nic().opening.emplace(n, std::move(qp));
  return n;
}

std::shared_ptr<QpEndpoint> QpHandshakes::take_opening(uint64_t n) {
  auto it = m_.nic().opening.find(n);
  if (it == m_.nic().opening.end())
    return nullptr;
  auto qp = std::move(it->second);
  m_.nic().opening.erase(it);
  return qp;
}

QpInfoMsg QpHandshakes::to_msg(const QpInfo& info, uint64_t lane) const {
  QpInfoMsg m;
  m.qp_num = info.qp_num;
  m.lid = info.lid;
  m.gid.assign(info.gid.begin(), info.gid.end());
  m.psn = info.psn;
  m.mtu = info.mtu;
  m.ethernet = info.is_ethernet;
  m.max_dest_rd_atomic = info.max_dest_rd_atomic;
  m.incarnation = info.incarnation;
  m.device = m_.nic().domain ? m_.nic().domain->device_name() : "";
  m.manager = m_.facade();
  m.lane = lane;
  return m;
}

QpInfo from_msg(const QpInfoMsg& m) {
  QpInfo info;
  info.qp_num = m.qp_num;
  info.lid = m.lid;
  std::copy(m.gid.begin(), m.gid.end(), info.gid.begin());
  info.psn = m.psn;
  info.mtu = m.mtu;
  info.is_ethernet = m.ethernet;
  info.max_dest_rd_atomic = m.max_dest_rd_atomic;
  info.incarnation = m.incarnation;
  return info;
}

Result<QpOptions> QpHandshakes::shared_qp_options(Priority cls) {
  return shared_qp_options(m_.nic().domain, m_.nic().completions, cls);
}

Result<QpOptions> QpHandshakes::shared_qp_options(const std::shared_ptr<Nic>& domain,
                                                  std::shared_ptr<CompletionRouter>& completions,
                                                  Priority cls) {
  QpOptions o;
  o.drain_timeout = m_.options().drain_timeout;
  o.traffic = m_.options().traffic_of(cls);
  if (!completions) {
    // Room for 16 QPs' full send queues (each request holds an entry until retired); more
    // queue their requests until entries come back. 1 MiB on mlx5 (64-byte entries). A device
    // without shared completion queues (a fake NIC) gives null: its QPs take their own.
    constexpr int kSharedCqEntries = 16384;
    CAF_RDMA_ASSIGN_OR_RETURN(completions, domain->shared_completions(kSharedCqEntries));
  }
  o.completions = completions;
  return o;
}

Result<std::shared_ptr<QpEndpoint>> QpHandshakes::make_qp(const std::shared_ptr<Nic>& domain,
                                                          const Result<QpOptions>& options) {
  if (!options.ok())
    return options.error();
  return domain->make_qp(*options);
}

Result<std::shared_ptr<QpEndpoint>> QpHandshakes::loopback_qp() {
  if (m_.nic().loopback && !m_.nic().loopback->needs_recovery())
    return m_.nic().loopback;
  if (m_.nic().loopback) {
    m_.nic().poller->remove(m_.nic().loopback.get());
    m_.nic().loopback.reset();
  }
  CAF_RDMA_ASSIGN_OR_RETURN(auto shared, make_qp(m_.nic().domain, shared_qp_options()));
  CAF_RDMA_RETURN_IF_ERROR(shared->connect_loopback());
  m_.nic().poller->add(shared);
  m_.nic().loopback = shared;
  return shared;
}

void QpHandshakes::fail_waiting(Peer& peer, const caf::error& err) {
  auto waiting = std::move(peer.qps.waiting);
  peer.qps.waiting.clear();
  for (OpId id : waiting)
    m_.fail_op(id, err);
}

void QpHandshakes::drop_qp_of(const caf::actor_addr& key, const std::shared_ptr<QpEndpoint>& qp) {
  if (qp == m_.nic().loopback) {
    m_.nic().poller->remove(qp.get());
    m_.nic().loopback.reset();
  } else if (auto p = m_.peer_table.peers().find(key); p != m_.peer_table.peers().end()) {
    drop_qp(p->second, qp);
    m_.rails.drop(key, qp);  // a class's or a stripe's queue pair (rails.h)
  }
}

void QpHandshakes::drop_qp(Peer& peer, const std::shared_ptr<QpEndpoint>& qp) {
  if (!qp)
    return;
  if (m_.nic().poller)
    m_.nic().poller->remove(qp.get());
  m_.receipts.disarm(qp.get());
  // Keep it alive until both references are gone; the last one destroys the QP (the NIC
  // stops, and anything still outstanding completes with an error).
  // `qp` may be one of the two members reset below; the copy keeps the QP alive and the
  // comparisons valid (hence the NOLINT: the copy is the point).
  std::shared_ptr<QpEndpoint> keep = qp;  // NOLINT(performance-unnecessary-copy-initialization)
  if (peer.qps.initiated == keep)
    peer.qps.initiated.reset();
  if (peer.qps.accepted == keep)
    peer.qps.accepted.reset();
}

void QpHandshakes::handshake(const caf::actor_addr& key) {
  Peer& p = m_.peer_table.peers().at(key);
  auto created = make_qp(m_.nic().domain, shared_qp_options());
  if (!created.ok())
    return fail_waiting(
        p, to_caf_error(created.error().with_context("creating a queue pair for peer " + p.name)));
  std::shared_ptr<QpEndpoint> created_qp = std::move(*created);
  QpInfoMsg mine = to_msg(created_qp->local_info());
  uint64_t held = hold_opening(std::move(created_qp));
  p.qps.handshaking = true;
  ++m_.counters().handshakes;
  auto timeout = m_.options().handshake_timeout;
  m_.peer_table.peer_request(p.manager, timeout, qp_connect_atom::value, std::move(mine))
      .then(
          [this, key, held](QpInfoMsg& remote) {
            auto qp = take_opening(held);
            auto it = m_.peer_table.peers().find(key);
            if (it == m_.peer_table.peers().end())
              return;
            Peer& p = it->second;
            if (!qp) {
              // Made on a device this manager lost meanwhile: its ops were failed; ops since
              // wait for a handshake on the device we have now.
              if (!p.qps.handshaking && m_.nic().domain && !p.qps.waiting.empty())
                handshake(key);
              return;
            }
            p.qps.handshaking = false;
            if (!p.down_reason.empty())
              return fail_waiting(p, make_rdma_error(ErrorCode::kPeerUnavailable,
                                                     peer_down_text(p.name, p.down_reason)));
            if (remote.gid.size() != 16)
              return fail_waiting(
                  p, make_rdma_error(ErrorCode::kInternal,
                                     "peer " + p.name + " answered the handshake without a GID"));
            Status st = qp->connect(from_msg(remote));
            if (!st.ok())
              return fail_waiting(
                  p, to_caf_error(st.error().with_context("connecting to peer " + p.name + " (" +
                                                          remote.device + ")")));
            p.qps.initiated = qp;
            m_.nic().poller->add(qp);
            auto waiting = std::move(p.qps.waiting);
            p.qps.waiting.clear();
            for (OpId id : waiting)
              if (const OpRecord* o = m_.op_record(id))
                m_.rdma_path(o->path)->qp_ready(id, qp);
          },
          [this, key, timeout, held](caf::error& err) {
            auto qp = take_opening(held);
            auto it = m_.peer_table.peers().find(key);
            if (it == m_.peer_table.peers().end() || !qp)
              return;  // not found, or made on a device lost meanwhile (see above)
            Peer& p = it->second;
            p.qps.handshaking = false;
            if (error_code(err) == ErrorCode::kNoDevice &&
                m_.options().mode != TransportMode::kRdma) {
              // The owner has no RDMA device (now): its buffers move through it.
              auto waiting = std::move(p.qps.waiting);
              p.qps.waiting.clear();
              for (OpId id : waiting)
                m_.reroute(id,
                           "peer manager " + p.name + " has no RDMA device: " + error_message(err));
              return;
            }
            bool timed_out = err == caf::sec::request_timeout;
            fail_waiting(
                p, make_rdma_error(timed_out ? ErrorCode::kTimeout : ErrorCode::kPeerUnavailable,
                                   handshake_failed_text(p.name, timed_out, timeout.count(),
                                                         error_message(err))));
          });
}

caf::result<QpInfoMsg> QpHandshakes::accept_connect(const QpInfoMsg& remote) {
  if (!m_.nic().domain)
    return make_rdma_error(
        ErrorCode::kNoDevice,
        "manager " + m_.options().name + " has no RDMA device: " + m_.nic().no_rdma_reason);
  if (!m_.nic().port_down.empty())
    return make_rdma_error(ErrorCode::kNoDevice, "manager " + m_.options().name +
                                                     "'s RDMA port is down: " + m_.nic().port_down);
  // The peer is the actor that sent the handshake, not one the message names: a peer cannot
  // replace another's queue pair or lanes by naming it.
  auto sender = caf::actor_cast<caf::actor>(m_.self()->current_sender());
  if (!sender || remote.gid.size() != 16)
    return make_rdma_error(ErrorCode::kInvalidArgument,
                           "queue-pair handshake from an anonymous sender or without a 16-byte "
                           "GID");
  if (remote.manager && remote.manager.address() != sender.address())
    return make_rdma_error(ErrorCode::kPermissionDenied,
                           "queue-pair handshake from " + caf::to_string(sender.address()) +
                               " names another manager (" +
                               caf::to_string(remote.manager.address()) + ") as its sender");
  // Invariant 22 before a sender never seen is taken for a peer: a refused handshake leaves no
  // trace (a flood of senders does not grow the peer table).
  if (m_.peer_table.peers().count(sender.address()) == 0)
    if (Status room = accept_room(sender.node(), caf::to_string(sender.address())); !room.ok())
      return to_caf_error(room.error());
  Peer& p = m_.peer_table.peer_for(sender, "");
  if (caf::actor_cast<caf::actor_addr>(p.manager).get() ==
      caf::actor_cast<caf::actor_addr>(sender).get()) {
    if (!p.down_reason.empty())
      return m_.peer_table.peer_down_error(p);
    if (p.reconnecting)
      return m_.peer_table.link_lost_error(p);
    auto info = finish_accept(p, remote);
    if (!info.ok())
      return to_caf_error(info.error());
    return *info;
  }
  // A new proxy of a known peer: its old link is gone and it reached us over a new one. BASP
  // lets a third node claim any node id over its own connection, so it is taken for the peer
  // (invariant 13) only if the middleman (whose routing table no peer writes) has a direct
  // connection to that node.
  auto rp = m_.self()->make_response_promise<QpInfoMsg>();
  const caf::actor_addr key = sender.address();
  ask_direct_link(
      m_.self(), sender.node(),
      [this, rp, sender, remote, key](caf::expected<bool> direct) mutable {
        if (!direct) {
          rp.deliver(std::move(direct.error()));
          return;
        }
        auto it = m_.peer_table.peers().find(key);
        if (it == m_.peer_table.peers().end()) {
          rp.deliver(make_rdma_error(
              ErrorCode::kPeerUnavailable,
              "queue-pair handshake from " + caf::to_string(key) + ": the peer is gone"));
          return;
        }
        Peer& peer = it->second;
        if (!*direct) {
          rp.deliver(make_rdma_error(
              ErrorCode::kPermissionDenied,
              "queue-pair handshake from " + peer.name + " (" + caf::to_string(key) +
                  ") refused by " + m_.options().name +
                  ": it came over a link that is not a direct connection to that node, "
                  "and the peer's own link ended"));
          return;
        }
        if (caf::actor_cast<caf::actor_addr>(peer.manager).get() !=
            caf::actor_cast<caf::actor_addr>(sender).get())
          m_.links.adopt(peer, sender);
        auto info = finish_accept(peer, remote);
        if (!info.ok())
          rp.deliver(to_caf_error(info.error()));
        else
          rp.deliver(std::move(*info));
      },
      m_.options().handshake_timeout);
  return rp;
}

Status QpHandshakes::accept_room(const caf::node_id& node, const std::string& who) const {
  uint64_t of_node = 0, all = 0;
  for (const auto& [key, peer] : m_.peer_table.peers()) {
    const uint64_t n =
        (peer.qps.accepted ? 1 : 0) + peer.qps.lanes.size() + peer.qps.stripes_accepted.size();
    all += n;
    if (peer.manager.node() == node)
      of_node += n;
  }
  const auto& o = m_.options();
  if (of_node < o.max_qps_per_node && all < o.max_qps)
    return {};
  const bool node_full = of_node >= o.max_qps_per_node;
  return Error(
      ErrorCode::kResourceExhausted,
      "queue-pair handshake from " + who + " (node " + caf::to_string(node) + ") refused by " +
          o.name + ": " +
          (node_full ? "that node has " + std::to_string(of_node) +
                           " queue pairs accepted here (max_qps_per_node " +
                           std::to_string(o.max_qps_per_node) + ")"
                     : std::to_string(all) + " queue pairs are accepted from peers (max_qps " +
                           std::to_string(o.max_qps) + ")"));
}

Result<QpInfoMsg> QpHandshakes::finish_accept(Peer& p, const QpInfoMsg& remote) {
  // Invariant 22: a handshake replacing a queue pair its sender has adds none.
  const bool adds = remote.lane != 0     ? p.qps.lanes.count(remote.lane) == 0
                    : remote.stripe != 0 ? p.qps.stripes_accepted.count(remote.stripe) == 0
                                         : !p.qps.accepted;
  if (adds)
    CAF_RDMA_RETURN_IF_ERROR(accept_room(p.manager.node(), p.name));
  if (remote.lane != 0)
    return m_.lanes.accept_lane(p, remote);
  if (remote.stripe != 0)
    return m_.rails.accept(p, remote);
  CAF_RDMA_ASSIGN_OR_RETURN(std::shared_ptr<QpEndpoint> qp,
                            make_qp(m_.nic().domain, shared_qp_options()));
  Status st = qp->connect(from_msg(remote));
  if (!st.ok())
    return st.error().with_context("accepting a queue pair from " + p.name);
  // Its notify writes' receipts (write_receipts.h invariant 4): without them, no queue pair.
  if (Status armed = m_.receipts.arm(qp, caf::to_string(p.manager.node())); !armed.ok())
    return armed.error().with_context("accepting a queue pair from " + p.name);
  if (p.qps.accepted)
    drop_qp(p, p.qps.accepted);  // the peer replaced its QP: ours is stale
  p.qps.accepted = qp;
  return to_msg(qp->local_info());
}

}  // namespace caf_rdma::detail
