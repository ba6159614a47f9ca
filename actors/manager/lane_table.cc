// LaneTable (see lane_table.h).
#include "actors/manager/lane_table.h"

#include "actors/detail/manager_state.h"
#include "actors/op_texts.h"

namespace caf_rdma::detail {

caf::result<LaneGrant> LaneTable::open_lane(BufferHandle remote, uint32_t timeout_ms,
                                            uint8_t priority) {
  auto refuse = [&](const std::string& why) {
    return make_rdma_error(ErrorCode::kNoDevice,
                           "no direct lane to the owner of " + describe(remote) + ": " + why);
  };
  if (!remote.owner)
    return make_rdma_error(ErrorCode::kInvalidArgument,
                           "remote " + describe(remote) + " names no owner manager");
  // The same choice as the manager's own ops (path_choice.h): a lane is RDMA or nothing.
  TransferOp op;
  op.remote = remote;
  PathFacts f =
      device_facts(op, m_.options().mode, m_.nic().domain != nullptr, m_.nic().no_rdma_reason,
                   m_.nic().port_down, m_.nic().domain && m_.nic().domain->port().is_ethernet);
  f.local_registered = true;  // each op's local buffer is checked by the lane (DirectRegistry)
  if (m_.options().mode == TransportMode::kFallback)
    return refuse("this manager runs the fallback transport only");
  if (std::string why = why_not_rdma(op, f); !why.empty())
    return refuse(why);
  if (timeout_ms == 0)
    return make_rdma_error(ErrorCode::kInvalidArgument, "lane timeout must be > 0 ms");
  const auto cls = priority_from_wire(priority);
  if (!cls)
    return make_rdma_error(ErrorCode::kInvalidArgument, unknown_priority_text(priority));
  timeout_ms = m_.capped(timeout_ms);
  // The client polls its lane in its own threads: a CQ of its own, not the shared one.
  QpOptions o;
  o.drain_timeout = m_.options().drain_timeout;
  o.traffic = m_.options().traffic_of(*cls);
  auto created = QpHandshakes::make_qp(m_.nic().domain, o);
  if (!created.ok())
    return to_caf_error(created.error().with_context("creating a direct lane's queue pair"));
  std::shared_ptr<QpEndpoint> qp = std::move(*created);
  uint64_t id = next_lane_++;
  auto me = caf::actor_cast<caf::actor>(m_.self());
  if (m_.peer_table.owns(remote.owner)) {
    Status st = qp->connect_loopback();
    if (!st.ok())
      return to_caf_error(st.error().with_context("connecting a loopback direct lane"));
    std::weak_ptr<QpEndpoint> weak_qp = qp;
    auto lane = std::make_shared<DirectLane>(id, std::move(qp), m_.registry(), me, remote.owner,
                                             m_.options().name, m_.capped(UINT32_MAX));
    m_.nic().lanes.emplace(id, LaneRecord{m_.self()->address(), weak_qp, lane});
    return LaneGrant{std::move(lane), m_.options().verify, 0};  // a loopback lane: never striped
  }
  Peer& p = m_.peer_table.peer_for(remote.owner, remote.owner_name);
  if (!p.down_reason.empty())
    return m_.peer_table.peer_down_error(p);
  if (p.reconnecting)
    return m_.peer_table.link_lost_error(p);
  ++m_.counters().handshakes;
  auto key = remote.owner.address();
  auto rp = m_.self()->make_response_promise<LaneGrant>();
  auto timeout = std::min(m_.options().handshake_timeout, std::chrono::milliseconds(timeout_ms));
  QpInfoMsg mine = m_.handshakes.to_msg(qp->local_info(), id);
  mine.priority = priority;
  uint64_t held = m_.handshakes.hold_opening(std::move(qp));
  m_.peer_table.peer_request(p.manager, timeout, qp_connect_atom::value, std::move(mine))
      .then(
          [this, rp, key, held, id, me, owner = remote.owner](QpInfoMsg& info) mutable {
            auto qp = m_.handshakes.take_opening(held);
            auto it = m_.peer_table.peers().find(key);
            std::string name =
                it != m_.peer_table.peers().end() ? it->second.name : caf::to_string(key);
            if (!qp) {
              // Made on a device this manager lost meanwhile.
              send_lane_drop(owner, id);
              rp.deliver(make_rdma_error(ErrorCode::kNoDevice,
                                         "no direct lane to peer manager " + name +
                                             ": this manager's RDMA device went away during "
                                             "the handshake (" +
                                             m_.nic().no_rdma_reason + ")"));
              return;
            }
            Status st = info.gid.size() == 16
                            ? qp->connect(from_msg(info))
                            : Status(Error(ErrorCode::kInternal,
                                           "peer " + name + " answered without a GID"));
            if (!st.ok()) {
              send_lane_drop(owner, id);
              rp.deliver(to_caf_error(st.error().with_context("connecting a direct lane to peer " +
                                                              name + " (" + info.device + ")")));
              return;
            }
            std::weak_ptr<QpEndpoint> weak_qp = qp;
            auto lane = std::make_shared<DirectLane>(id, std::move(qp), m_.registry(), me, owner,
                                                     name, m_.capped(UINT32_MAX));
            m_.nic().lanes.emplace(id, LaneRecord{key, weak_qp, lane});
            const bool stripes = !m_.nic().rails.empty() || m_.options().stripe_qps > 1;
            rp.deliver(LaneGrant{std::move(lane), m_.options().verify,
                                 stripes ? m_.options().stripe_min_bytes : 0,
                                 m_.options().stripe_qps > 1});
          },
          [this, rp, key, held, id, owner = remote.owner, timeout](caf::error& err) mutable {
            (void)m_.handshakes.take_opening(held);
            // It may still have made its side: have it drop that.
            send_lane_drop(owner, id);
            std::string name = m_.peer_table.peer_name(key);
            bool timed_out = err == caf::sec::request_timeout;
            if (!timed_out && error_code(err) != ErrorCode::kInternal) {
              rp.deliver(make_rdma_error(error_code(err), "direct lane to peer manager " + name +
                                                              " refused: " + error_message(err)));
              return;
            }
            rp.deliver(make_rdma_error(
                timed_out ? ErrorCode::kTimeout : ErrorCode::kPeerUnavailable,
                handshake_failed_text(name, timed_out, timeout.count(), error_message(err))));
          });
  return rp;
}

Result<QpInfoMsg> LaneTable::accept_lane(Peer& p, const QpInfoMsg& remote) {
  if (p.qps.lanes.size() >= kMaxLanesPerPeer && p.qps.lanes.count(remote.lane) == 0)
    return Error(ErrorCode::kResourceExhausted, m_.options().name + " already has " +
                                                    std::to_string(kMaxLanesPerPeer) +
                                                    " direct lanes from " + p.name);
  const auto cls = priority_from_wire(remote.priority);
  if (!cls)
    return Error(ErrorCode::kInvalidArgument, "direct lane " + std::to_string(remote.lane) +
                                                  " from " + p.name + ": " +
                                                  unknown_priority_text(remote.priority));
  CAF_RDMA_ASSIGN_OR_RETURN(
      std::shared_ptr<QpEndpoint> qp,
      QpHandshakes::make_qp(m_.nic().domain, m_.handshakes.shared_qp_options(*cls)));
  Status st = qp->connect(from_msg(remote));
  if (!st.ok())
    return st.error().with_context("accepting direct lane " + std::to_string(remote.lane) +
                                   " from " + p.name);
  p.qps.lanes[remote.lane] = qp;  // replaces a stale one of the same id
  return m_.handshakes.to_msg(qp->local_info(), remote.lane);
}

void LaneTable::close_lane(uint64_t lane) {
  auto it = m_.nic().lanes.find(lane);
  if (it == m_.nic().lanes.end())
    return;
  auto key = it->second.owner;
  m_.nic().lanes.erase(it);
  if (key == m_.self()->address())
    return;
  auto p = m_.peer_table.peers().find(key);
  if (p != m_.peer_table.peers().end() && p->second.down_reason.empty())
    send_lane_drop(p->second.manager, lane);
}

void LaneTable::send_lane_drop(const caf::actor& peer, uint64_t lane) {
  m_.peer_table.peer_send(peer, lane_drop_atom::value, lane);
}

void LaneTable::drop_lane(uint64_t lane) {
  // Only the lane's initiator (the sender) can drop it: lanes are kept per peer.
  const auto& sender = m_.self()->current_sender();
  if (!sender)
    return;
  auto p = m_.peer_table.peers().find(caf::actor_cast<caf::actor_addr>(sender));
  if (p != m_.peer_table.peers().end())
    p->second.qps.lanes.erase(lane);
}

}  // namespace caf_rdma::detail
