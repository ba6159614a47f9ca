// RdmaManagerActor: peers — lazy one-round-trip queue-pair handshakes, monitoring, teardown.
#include <caf/io/middleman.hpp>

#include "actors/detail/manager_state.h"
#include "actors/op_texts.h"

#include <cstdio>

#include "actors/rdma_node.h"

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
  } else if (!name.empty() && it->second.name != name &&
             it->second.name == caf::to_string(it->second.manager)) {
    // Known from its handshake only (named by its actor id): a handle tells its name
    // (host:port), which is what errors must say, and where a lost link is made again. Once
    // named, a peer keeps its name: a handle someone else made for it cannot move it.
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
  for (OpId id : waiting)
    fail_op(id, err);
}

void ManagerState::drop_qp_of(const caf::actor_addr& key,
                              const std::shared_ptr<RdmaQueuePair>& qp) {
  if (qp == loopback_) {
    poller_->remove(qp.get());
    loopback_.reset();
  } else if (auto p = peers_.find(key); p != peers_.end()) {
    drop_qp(p->second, qp);
  }
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
                                                     peer_down_text(p.name, p.down_reason)));
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
            for (OpId id : waiting)
              if (const OpRecord* o = op_record(id))
                nic_path(o->path)->qp_ready(id, qp);
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
              for (OpId id : waiting)
                reroute(id,
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
  if (caf::actor_cast<caf::actor_addr>(p.manager).get() ==
      caf::actor_cast<caf::actor_addr>(sender).get()) {
    if (!p.down_reason.empty())
      return peer_down_error(p);
    if (p.reconnecting)
      return link_lost_error(p);
    auto info = finish_accept(p, remote);
    if (!info.ok())
      return to_caf_error(info.error());
    return *info;
  }
  // A new proxy of a known peer: its old link is gone and it reached us over a new one. BASP
  // lets a third node claim any node id over its own connection, so it is taken for the peer
  // (invariant 13) only if the middleman (whose routing table no peer writes) has a direct
  // connection to that node.
  auto rp = self_->make_response_promise<QpInfoMsg>();
  const caf::actor_addr key = sender.address();
  self_
      ->request(self_->system().middleman().actor_handle(), options_.handshake_timeout,
                caf::get_atom::value, sender.node())
      .then(
          [this, rp, sender, remote, key](const caf::node_id&, const std::string&,
                                          uint16_t port) mutable {
            auto it = peers_.find(key);
            if (it == peers_.end()) {
              rp.deliver(make_rdma_error(
                  ErrorCode::kPeerUnavailable,
                  "queue-pair handshake from " + caf::to_string(key) + ": the peer is gone"));
              return;
            }
            Peer& peer = it->second;
            if (port == 0) {
              rp.deliver(make_rdma_error(
                  ErrorCode::kPermissionDenied,
                  "queue-pair handshake from " + peer.name + " (" + caf::to_string(key) +
                      ") refused by " + options_.name +
                      ": it came over a link that is not a direct connection to that node, "
                      "and the peer's own link ended"));
              return;
            }
            if (caf::actor_cast<caf::actor_addr>(peer.manager).get() !=
                caf::actor_cast<caf::actor_addr>(sender).get())
              adopt(peer, sender);
            auto info = finish_accept(peer, remote);
            if (!info.ok())
              rp.deliver(to_caf_error(info.error()));
            else
              rp.deliver(std::move(*info));
          },
          [rp](caf::error& err) mutable { rp.deliver(std::move(err)); });
  return rp;
}

Result<QpInfoMsg> ManagerState::finish_accept(Peer& p, const QpInfoMsg& remote) {
  if (remote.lane != 0)
    return accept_lane(p, remote);
  CAF_RDMA_ASSIGN_OR_RETURN(auto o, shared_qp_options());
  auto created = RdmaQueuePair::create(domain_, o);
  if (!created.ok())
    return created.error();
  std::shared_ptr<RdmaQueuePair> qp(std::move(*created));
  Status st = qp->connect(from_msg(remote), nullptr);
  if (!st.ok())
    return st.error().with_context("accepting a queue pair from " + p.name);
  if (p.accepted)
    drop_qp(p, p.accepted);  // the peer replaced its QP: ours is stale
  p.accepted = qp;
  return to_msg(qp->local_info());
}

caf::result<std::string> ManagerState::peer_state(const caf::actor& peer) const {
  if (!peer)
    return std::string();
  auto it = peers_.find(peer.address());
  if (it == peers_.end())
    return std::string();
  if (it->second.reconnecting)
    return "link lost (" + it->second.link_lost + "); reconnecting";
  return it->second.down_reason;
}

caf::error ManagerState::peer_down_error(const Peer& p) const {
  return make_rdma_error(ErrorCode::kPeerUnavailable, peer_down_text(p.name, p.down_reason));
}

caf::error ManagerState::link_lost_error(const Peer& p) const {
  return make_rdma_error(ErrorCode::kPeerUnavailable, "the link to peer manager " + p.name +
                                                          " was lost (" + p.link_lost +
                                                          ") and is being made again");
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
  return relay_to_owner<uint64_t>(remote, buf_sum_atom::value, ref_of(remote), offset, length);
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
  // The end of a proxy that a new link already replaced says nothing about the peer.
  if (caf::actor_cast<caf::actor_addr>(p.manager).get() != msg.source.get())
    return;
  const std::string reason = caf::to_string(msg.reason);
  if (msg.reason == caf::exit_reason::remote_link_unreachable && may_reconnect(p)) {
    // Invariant 13: the link is gone, maybe not the peer. What was on its way is lost.
    p.reconnecting = true;
    p.link_lost = reason;
    ++counters_.links_lost;
    cut_off(msg.source, p,
            make_rdma_error(ErrorCode::kPeerUnavailable, "the link to peer manager " + p.name +
                                                             " was lost (" + reason +
                                                             ") while this was on its way"));
    self_->delayed_send(self_, kReconnectPause[0], Reconnect{msg.source, 1});
    return;
  }
  p.down_reason = reason;
  cut_off(msg.source, p, peer_down_error(p));
}

void ManagerState::cut_off(const caf::actor_addr& key, Peer& p, const caf::error& err) {
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
  for (auto& [ticket, t] : transfers_)
    for (uint32_t i = 0; i < t.ops.size(); ++i) {
      const OpRecord& o = t.ops[i];
      if (o.done || o.path == PathKind::kNone || o.peer != key)
        continue;
      if (o.path == PathKind::kStream && stream_.peer_down(OpId{ticket, i}, "its peer is down"))
        continue;
      victims.push_back(OpId{ticket, i});
    }
  for (OpId id : victims)
    fail_op(id, err);
}

// -- lost links (invariant 13) -------------------------------------------------------------------

bool ManagerState::may_reconnect(const Peer& p) const {
  return connector_ && parse_host_port(p.name).ok();
}

void ManagerState::reconnect(const caf::actor_addr& key, uint32_t attempt) {
  auto it = peers_.find(key);
  if (it == peers_.end() || !it->second.reconnecting)
    return;  // made again meanwhile (the peer reached us), or given up
  auto where = parse_host_port(it->second.name);  // may_reconnect checked it
  self_
      ->request(connector_, connect_timeout_, caf::connect_atom::value, where->first, where->second)
      .then(
          [this, key, attempt](const caf::node_id&, caf::strong_actor_ptr& ptr,
                               const std::set<std::string>&) {
            auto it = peers_.find(key);
            if (it == peers_.end() || !it->second.reconnecting)
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

void ManagerState::reconnect_failed(const caf::actor_addr& key, uint32_t attempt,
                                    const std::string& why) {
  auto it = peers_.find(key);
  if (it == peers_.end() || !it->second.reconnecting)
    return;
  if (attempt < kReconnectAttempts) {
    self_->delayed_send(self_, kReconnectPause[attempt], Reconnect{key, attempt + 1});
    return;
  }
  give_up(
      key, it->second,
      std::to_string(attempt) + " connects to " + it->second.name + " failed, the last: " + why);
}

void ManagerState::give_up(const caf::actor_addr& key, Peer& p, const std::string& why) {
  p.reconnecting = false;
  p.down_reason = p.link_lost + "; " + why;
  cut_off(key, p, peer_down_error(p));  // the ops that waited for the link
}

void ManagerState::adopt(Peer& p, const caf::actor& proxy) {
  p.manager = proxy;
  self_->monitor(proxy);
  p.monitored = true;
  if (p.reconnecting || !p.down_reason.empty())
    ++counters_.reconnects;
  p.reconnecting = false;
  p.link_lost.clear();
  p.down_reason.clear();
  auto parked = std::move(p.parked);
  p.parked.clear();
  for (OpId id : parked)
    resume_op(id);
}

}  // namespace caf_rdma::detail
