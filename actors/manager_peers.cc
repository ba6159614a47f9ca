// RdmaManagerActor: peers — lazy one-round-trip queue-pair handshakes, monitoring, teardown.
#include "actors/detail/manager_state.h"

#include <cstdio>

namespace caf_rdma::detail {

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

QpInfoMsg ManagerState::to_msg(const QpInfo& info, uint64_t lane) const {
  QpInfoMsg m;
  m.qp_num = info.qp_num;
  m.lid = info.lid;
  m.gid.assign(info.gid.begin(), info.gid.end());
  m.psn = info.psn;
  m.mtu = info.mtu;
  m.ethernet = info.is_ethernet;
  m.max_dest_rd_atomic = info.max_dest_rd_atomic;
  m.incarnation = info.incarnation;
  m.device = domain_ ? domain_->device_name() : "";
  m.manager = facade_;
  m.lane = lane;
  return m;
}

std::string ManagerState::peer_name(const caf::actor_addr& key) const {
  auto it = peers_.find(key);
  return it != peers_.end() ? it->second.name : caf::to_string(key);
}

Peer& ManagerState::peer_for(const caf::actor& manager, const std::string& name) {
  auto key = manager.address();
  auto it = peers_.find(key);
  if (it == peers_.end()) {
    Peer p;
    p.manager = manager;
    p.name = name.empty() ? caf::to_string(manager) : name;
    it = peers_.emplace(key, std::move(p)).first;
  } else if (!name.empty() && it->second.name != name) {
    // Known from its handshake only (named by its actor id): a handle tells its name
    // (host:port), which is what errors must say.
    it->second.name = name;
  }
  if (!it->second.monitored) {
    self_->monitor(manager);
    it->second.monitored = true;
  }
  return it->second;
}

Result<RdmaQueuePair::Options> ManagerState::shared_qp_options() {
  RdmaQueuePair::Options o;
  o.drain_timeout = options_.drain_timeout;
  if (!completions_) {
    // Room for 16 QPs' full send queues (each request holds an entry until retired); more
    // queue their requests until entries come back. 1 MiB on mlx5 (64-byte entries).
    constexpr uint64_t kSharedCqEntries = 16384;
    uint64_t max_cqe = static_cast<uint64_t>(domain_->context()->device_attr().max_cqe);
    auto entries =
        static_cast<int>(max_cqe > 0 ? std::min(kSharedCqEntries, max_cqe) : kSharedCqEntries);
    auto made = CompletionRouter::create(domain_->context(), entries);
    if (!made.ok())
      return made.error().with_context("creating the shared completion queue of " +
                                       domain_->device_name());
    completions_ = *made;
  }
  o.completions = completions_;
  return o;
}

Result<std::shared_ptr<RdmaQueuePair>> ManagerState::loopback_qp() {
  if (loopback_ && !loopback_->needs_recovery())
    return loopback_;
  if (loopback_) {
    poller_->remove(loopback_.get());
    loopback_.reset();
  }
  CAF_RDMA_ASSIGN_OR_RETURN(auto o, shared_qp_options());
  CAF_RDMA_ASSIGN_OR_RETURN(auto qp, RdmaQueuePair::create(domain_, o));
  std::shared_ptr<RdmaQueuePair> shared(std::move(qp));
  CAF_RDMA_RETURN_IF_ERROR(shared->connect_loopback());
  poller_->add(shared);
  loopback_ = shared;
  return shared;
}

void ManagerState::fail_waiting(Peer& peer, const caf::error& err) {
  auto waiting = std::move(peer.waiting);
  peer.waiting.clear();
  for (auto [ticket, index] : waiting)
    fail_op(ticket, index, err);
}

void ManagerState::drop_qp(Peer& peer, const std::shared_ptr<RdmaQueuePair>& qp) {
  if (!qp)
    return;
  if (poller_)
    poller_->remove(qp.get());
  // Keep it alive until both references are gone; the last one destroys the QP (the NIC
  // stops, and anything still outstanding completes with an error).
  // `qp` may be one of the two members reset below; the copy keeps the QP alive and the
  // comparisons valid (hence the NOLINT: the copy is the point).
  std::shared_ptr<RdmaQueuePair> keep = qp;  // NOLINT(performance-unnecessary-copy-initialization)
  if (peer.initiated == keep)
    peer.initiated.reset();
  if (peer.accepted == keep)
    peer.accepted.reset();
}

void ManagerState::handshake(const caf::actor_addr& key) {
  Peer& p = peers_.at(key);
  auto o = shared_qp_options();
  auto created = o.ok() ? RdmaQueuePair::create(domain_, *o)
                        : Result<std::unique_ptr<RdmaQueuePair>>(o.error());
  if (!created.ok())
    return fail_waiting(
        p, to_caf_error(created.error().with_context("creating a queue pair for peer " + p.name)));
  std::shared_ptr<RdmaQueuePair> created_qp(std::move(*created));
  QpInfoMsg mine = to_msg(created_qp->local_info());
  uint64_t held = hold_opening(std::move(created_qp));
  p.handshaking = true;
  ++counters_.handshakes;
  auto timeout = options_.handshake_timeout;
  peer_request(p.manager, timeout, qp_connect_atom::value, std::move(mine))
      .then(
          [this, key, held](QpInfoMsg& remote) {
            auto qp = take_opening(held);
            auto it = peers_.find(key);
            if (it == peers_.end())
              return;
            Peer& p = it->second;
            if (!qp) {
              // Made on a device this manager lost meanwhile: its ops were failed; ops since
              // wait for a handshake on the device we have now.
              if (!p.handshaking && domain_ && !p.waiting.empty())
                handshake(key);
              return;
            }
            p.handshaking = false;
            if (!p.down_reason.empty())
              return fail_waiting(p, make_rdma_error(ErrorCode::kPeerUnavailable,
                                                     "peer manager " + p.name + " is down (" +
                                                         p.down_reason + ")"));
            if (remote.gid.size() != 16)
              return fail_waiting(
                  p, make_rdma_error(ErrorCode::kInternal,
                                     "peer " + p.name + " answered the handshake without a GID"));
            Status st = qp->connect(from_msg(remote), nullptr);
            if (!st.ok())
              return fail_waiting(
                  p, to_caf_error(st.error().with_context("connecting to peer " + p.name + " (" +
                                                          remote.device + ")")));
            p.initiated = qp;
            poller_->add(qp);
            auto waiting = std::move(p.waiting);
            p.waiting.clear();
            for (auto [ticket, index] : waiting)
              post_rdma(ticket, index, qp);
          },
          [this, key, timeout, held](caf::error& err) {
            auto qp = take_opening(held);
            auto it = peers_.find(key);
            if (it == peers_.end() || !qp)
              return;  // not found, or made on a device lost meanwhile (see above)
            Peer& p = it->second;
            p.handshaking = false;
            if (error_code(err) == ErrorCode::kNoDevice && options_.mode != TransportMode::kRdma) {
              // The owner has no RDMA device (now): its buffers move through it.
              auto waiting = std::move(p.waiting);
              p.waiting.clear();
              for (auto [ticket, index] : waiting)
                reroute(ticket, index,
                        "peer manager " + p.name + " has no RDMA device: " + error_message(err));
              return;
            }
            bool timed_out = err == caf::sec::request_timeout;
            fail_waiting(
                p, make_rdma_error(timed_out ? ErrorCode::kTimeout : ErrorCode::kPeerUnavailable,
                                   "queue-pair handshake with peer manager " + p.name +
                                       (timed_out ? " timed out after " +
                                                        std::to_string(timeout.count()) + " ms"
                                                  : " failed: " + error_message(err))));
          });
}

caf::result<QpInfoMsg> ManagerState::accept_connect(const QpInfoMsg& remote) {
  if (!domain_)
    return make_rdma_error(ErrorCode::kNoDevice,
                           "manager " + options_.name + " has no RDMA device: " + no_rdma_reason_);
  if (!port_down_.empty())
    return make_rdma_error(ErrorCode::kNoDevice,
                           "manager " + options_.name + "'s RDMA port is down: " + port_down_);
  // The peer is the actor that sent the handshake, not one the message names: a peer cannot
  // replace another's queue pair or lanes by naming it.
  auto sender = caf::actor_cast<caf::actor>(self_->current_sender());
  if (!sender || remote.gid.size() != 16)
    return make_rdma_error(ErrorCode::kInvalidArgument,
                           "queue-pair handshake from an anonymous sender or without a 16-byte "
                           "GID");
  if (remote.manager && remote.manager.address() != sender.address())
    return make_rdma_error(ErrorCode::kPermissionDenied,
                           "queue-pair handshake from " + caf::to_string(sender.address()) +
                               " names another manager (" +
                               caf::to_string(remote.manager.address()) + ") as its sender");
  Peer& p = peer_for(sender, "");
  if (remote.lane != 0) {
    auto info = accept_lane(p, remote);
    if (!info.ok())
      return to_caf_error(info.error());
    return *info;
  }
  auto o = shared_qp_options();
  if (!o.ok())
    return to_caf_error(o.error());
  auto created = RdmaQueuePair::create(domain_, *o);
  if (!created.ok())
    return to_caf_error(created.error());
  std::shared_ptr<RdmaQueuePair> qp(std::move(*created));
  Status st = qp->connect(from_msg(remote), nullptr);
  if (!st.ok())
    return to_caf_error(st.error().with_context("accepting a queue pair from " + p.name));
  if (p.accepted)
    drop_qp(p, p.accepted);  // the peer replaced its QP: ours is stale
  p.accepted = qp;
  return to_msg(qp->local_info());
}

caf::result<std::string> ManagerState::peer_state(const caf::actor& peer) const {
  if (!peer)
    return std::string();
  auto it = peers_.find(peer.address());
  return it == peers_.end() ? std::string() : it->second.down_reason;
}

caf::error ManagerState::peer_down_error(const Peer& p) const {
  return make_rdma_error(ErrorCode::kPeerUnavailable,
                         "peer manager " + p.name + " is down (" + p.down_reason + ")");
}

std::function<void(const caf::error&)> ManagerState::take_question(const caf::actor_addr& key,
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

caf::error ManagerState::no_owner_error(const BufferHandle& remote) const {
  return make_rdma_error(ErrorCode::kInvalidArgument,
                         "handle " + describe(remote) + " names no owner");
}

caf::result<TransferOutcome> ManagerState::ask_owner_check(const BufferHandle& remote,
                                                           uint64_t offset, uint64_t length,
                                                           uint8_t kind) {
  if (!remote.owner)
    return no_owner_error(remote);
  if (owns(remote.owner))
    return check_access(ref_of(remote), offset, length, kind);
  return relay_to_owner<TransferOutcome>(remote, buf_check_atom::value, ref_of(remote), offset,
                                         length, kind);
}

caf::result<uint64_t> ManagerState::ask_owner_checksum(const BufferHandle& remote, uint64_t offset,
                                                       uint64_t length) {
  if (!remote.owner)
    return no_owner_error(remote);
  if (owns(remote.owner))
    return checksum(ref_of(remote), offset, length);
  return relay_to_owner<uint64_t>(remote, checksum_atom::value, ref_of(remote), offset, length);
}

void ManagerState::on_down(const caf::down_msg& msg) {
  if (facade_ && msg.source == facade_.address()) {
    // Only CAF's `kill` stops it (see peer_facade.h); this node's own actors are unaffected.
    std::fprintf(stderr,
                 "caf-rdma: %s: the published facade stopped (%s): other nodes can no longer "
                 "reach this manager; its own node's actors still can\n",
                 options_.name.c_str(), caf::to_string(msg.reason).c_str());
    return;
  }
  window_sender_down(msg.source);  // its node's fetch window, if any (invariant 12)
  auto it = peers_.find(msg.source);
  if (it == peers_.end())
    return;
  Peer& p = it->second;
  p.down_reason = caf::to_string(msg.reason);
  auto err = peer_down_error(p);
  fail_waiting(p, err);
  // Questions it will never answer (why it refused an access, its checksum): fail them now.
  auto questions = std::move(p.questions);
  p.questions.clear();
  for (auto& [q, fail] : questions)
    fail(err);
  // Destroy its queue pairs: the NIC stops, and nothing polls their completions any more.
  drop_qp(p, p.initiated);
  drop_qp(p, p.accepted);
  p.lanes.clear();  // its side of the lanes is gone with it
  // Our lanes to it: flush them, so their clients fail now, not at their timeouts.
  for (auto& [id, lane] : lanes_)
    if (lane.owner == msg.source)
      if (auto qp = lane.qp.lock())
        (void)qp->abort("peer manager " + p.name + " is down (" + p.down_reason + ")");
  // Every op still open with it (RDMA ops on the destroyed queue pairs, fallback ops, ops
  // waiting for its answer) gets no completion and no answer: fail them now.
  // A stream job is left to end instead (a queued one is cancelled now, a running one ends when
  // its connection to the dead peer fails, at the latest at its deadline): its op fails
  // (naming the peer) from stream_done, once the job no longer writes into the local buffer,
  // so no byte of it lands after the reply.
  std::vector<std::pair<uint64_t, uint32_t>> victims;
  for (auto& [ticket, t] : transfers_)
    for (uint32_t i = 0; i < t.ops.size(); ++i) {
      OpTrack& o = t.ops[i];
      if (o.done || o.path == OpPath::kNone || o.peer != msg.source)
        continue;
      if (o.streaming) {
        if (stream_client_)
          (void)stream_client_->cancel_queued(o.job_tag, "its peer is down");
        continue;
      }
      victims.emplace_back(ticket, i);
    }
  for (auto [ticket, index] : victims)
    fail_op(ticket, index, err);
}

}  // namespace caf_rdma::detail
