// RdmaManagerActor: direct lanes — queue pairs of their own that threads of this process drive
// themselves (RdmaClient), opened with one handshake and closed when the lane is dropped.
#include "actors/detail/manager_state.h"

namespace caf_rdma::detail {

caf::result<LaneGrant> ManagerState::open_lane(BufferHandle remote, uint32_t timeout_ms) {
  auto refuse = [&](const std::string& why) {
    return make_rdma_error(ErrorCode::kNoDevice,
                           "no direct lane to the owner of " + describe(remote) + ": " + why);
  };
  if (options_.mode == TransportMode::kFallback)
    return refuse("this manager runs the fallback transport only");
  if (!domain_)
    return refuse("this manager has no RDMA device (" + no_rdma_reason_ + ")");
  if (!port_down_.empty())
    return refuse("its RDMA port is down (" + port_down_ + ")");
  if (!remote.owner)
    return make_rdma_error(ErrorCode::kInvalidArgument,
                           "remote " + describe(remote) + " names no owner manager");
  if (!remote.has_rdma())
    return refuse("its owner registered it without an RDMA device");
  if (remote.memory == static_cast<uint8_t>(BufferMemory::kGpuStaged))
    return refuse("its owner's NIC cannot register that GPU memory");
  if (remote.ethernet != domain_->port().is_ethernet)
    return refuse("the owner is on another kind of fabric (RoCE vs InfiniBand)");
  if (timeout_ms == 0)
    return make_rdma_error(ErrorCode::kInvalidArgument, "lane timeout must be > 0 ms");
  timeout_ms = capped(timeout_ms);
  // The client polls its lane in its own threads: a CQ of its own, not the shared one.
  RdmaQueuePair::Options o;
  o.drain_timeout = options_.drain_timeout;
  auto created = RdmaQueuePair::create(domain_, o);
  if (!created.ok())
    return to_caf_error(created.error().with_context("creating a direct lane's queue pair"));
  std::shared_ptr<RdmaQueuePair> qp(std::move(*created));
  uint64_t id = next_lane_++;
  auto me = caf::actor_cast<caf::actor>(self_);
  if (owns(remote.owner)) {
    Status st = qp->connect_loopback();
    if (!st.ok())
      return to_caf_error(st.error().with_context("connecting a loopback direct lane"));
    std::weak_ptr<RdmaQueuePair> weak_qp = qp;
    auto lane = std::make_shared<DirectLane>(id, std::move(qp), registry_, me, remote.owner,
                                             options_.name, capped(UINT32_MAX));
    lanes_.emplace(id, LaneRecord{self_->address(), weak_qp, lane});
    return LaneGrant{std::move(lane), options_.verify};
  }
  Peer& p = peer_for(remote.owner, remote.owner_name);
  if (!p.down_reason.empty())
    return make_rdma_error(ErrorCode::kPeerUnavailable,
                           "peer manager " + p.name + " is down (" + p.down_reason + ")");
  if (p.reconnecting)
    return link_lost_error(p);
  ++counters_.handshakes;
  auto key = remote.owner.address();
  auto rp = self_->make_response_promise<LaneGrant>();
  auto timeout = std::min(options_.handshake_timeout, std::chrono::milliseconds(timeout_ms));
  QpInfoMsg mine = to_msg(qp->local_info(), id);
  uint64_t held = hold_opening(std::move(qp));
  peer_request(p.manager, timeout, qp_connect_atom::value, std::move(mine))
      .then(
          [this, rp, key, held, id, me, owner = remote.owner](QpInfoMsg& info) mutable {
            auto qp = take_opening(held);
            auto it = peers_.find(key);
            std::string name = it != peers_.end() ? it->second.name : caf::to_string(key);
            if (!qp) {
              // Made on a device this manager lost meanwhile.
              send_lane_drop(owner, id);
              rp.deliver(make_rdma_error(ErrorCode::kNoDevice,
                                         "no direct lane to peer manager " + name +
                                             ": this manager's RDMA device went away during "
                                             "the handshake (" +
                                             no_rdma_reason_ + ")"));
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
            std::weak_ptr<RdmaQueuePair> weak_qp = qp;
            auto lane = std::make_shared<DirectLane>(id, std::move(qp), registry_, me, owner, name,
                                                     capped(UINT32_MAX));
            lanes_.emplace(id, LaneRecord{key, weak_qp, lane});
            rp.deliver(LaneGrant{std::move(lane), options_.verify});
          },
          [this, rp, key, held, id, owner = remote.owner, timeout](caf::error& err) mutable {
            (void)take_opening(held);
            // It may still have made its side: have it drop that.
            send_lane_drop(owner, id);
            std::string name = peer_name(key);
            bool timed_out = err == caf::sec::request_timeout;
            if (!timed_out && error_code(err) != ErrorCode::kInternal) {
              rp.deliver(make_rdma_error(error_code(err), "direct lane to peer manager " + name +
                                                              " refused: " + error_message(err)));
              return;
            }
            rp.deliver(make_rdma_error(
                timed_out ? ErrorCode::kTimeout : ErrorCode::kPeerUnavailable,
                "queue-pair handshake with peer manager " + name +
                    (timed_out ? " timed out after " + std::to_string(timeout.count()) + " ms"
                               : " failed: " + error_message(err))));
          });
  return rp;
}

Result<QpInfoMsg> ManagerState::accept_lane(Peer& p, const QpInfoMsg& remote) {
  if (p.lanes.size() >= kMaxLanesPerPeer && p.lanes.count(remote.lane) == 0)
    return Error(ErrorCode::kResourceExhausted, options_.name + " already has " +
                                                    std::to_string(kMaxLanesPerPeer) +
                                                    " direct lanes from " + p.name);
  CAF_RDMA_ASSIGN_OR_RETURN(auto o, shared_qp_options());
  CAF_RDMA_ASSIGN_OR_RETURN(auto created, RdmaQueuePair::create(domain_, o));
  std::shared_ptr<RdmaQueuePair> qp(std::move(created));
  Status st = qp->connect(from_msg(remote));
  if (!st.ok())
    return st.error().with_context("accepting direct lane " + std::to_string(remote.lane) +
                                   " from " + p.name);
  p.lanes[remote.lane] = qp;  // replaces a stale one of the same id
  return to_msg(qp->local_info(), remote.lane);
}

void ManagerState::close_lane(uint64_t lane) {
  auto it = lanes_.find(lane);
  if (it == lanes_.end())
    return;
  auto key = it->second.owner;
  lanes_.erase(it);
  if (key == self_->address())
    return;
  auto p = peers_.find(key);
  if (p != peers_.end() && p->second.down_reason.empty())
    send_lane_drop(p->second.manager, lane);
}

void ManagerState::send_lane_drop(const caf::actor& peer, uint64_t lane) {
  peer_send(peer, lane_drop_atom::value, lane);
}

void ManagerState::drop_lane(uint64_t lane) {
  // Only the lane's initiator (the sender) can drop it: lanes are kept per peer.
  const auto& sender = self_->current_sender();
  if (!sender)
    return;
  auto p = peers_.find(caf::actor_cast<caf::actor_addr>(sender));
  if (p != peers_.end())
    p->second.lanes.erase(lane);
}

}  // namespace caf_rdma::detail
