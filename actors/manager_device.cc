// RdmaManagerActor: the device — watched by a DeviceMonitor, dropped at once when it goes
// away (manager_state.h invariant 8), opened again when it returns.
#include <cstdio>

#include "actors/detail/manager_state.h"

namespace caf_rdma::detail {

namespace {

/// First retry of a lost device, and the longest wait between retries.
constexpr std::chrono::milliseconds kReopenFirst{100};
constexpr std::chrono::milliseconds kReopenMax{2000};

}  // namespace

void ManagerState::watch_device() {
  monitor_.reset();
  if (!domain_)
    return;
  caf::actor me = caf::actor_cast<caf::actor>(self_);
  uint64_t incarnation = domain_->incarnation();
  auto monitor = DeviceMonitor::start(domain_->context(), [me, incarnation](DeviceEvent e) {
    caf::anon_send(
        me, DeviceChanged{incarnation, static_cast<uint8_t>(e.kind), e.port, std::move(e.what)});
  });
  if (monitor.ok())
    monitor_ = std::move(*monitor);
  else
    std::fprintf(stderr,
                 "caf-rdma: %s: the device cannot be watched (its loss would show as "
                 "timeouts): %s\n",
                 options_.name.c_str(), monitor.error().message().c_str());
}

void ManagerState::device_changed(const DeviceChanged& e) {
  if (!domain_ || e.incarnation != domain_->incarnation())
    return;  // an event of a domain already dropped
  auto kind = static_cast<DeviceEventKind>(e.kind);
  uint8_t port = domain_->config().port_num;
  switch (kind) {
    case DeviceEventKind::kLost:
      return lose_device(e.what);
    case DeviceEventKind::kPortDown: {
      if (e.port != port || !port_down_.empty())
        return;
      port_down_ = e.what;
      // Ops on the port fail now, not after the ACK timeout x retries; they are retried once,
      // and a retry takes the fallback while the port is down (start_rdma).
      std::string reason = "RDMA port down: " + e.what;
      abort_connections(reason);
      return;
    }
    case DeviceEventKind::kPortUp:
      if (e.port == port)
        port_down_.clear();
      return;
    case DeviceEventKind::kGidChange: {
      if (e.port != port)
        return;
      // An address came, went or moved: choose the GID again. Queue pairs and lanes using the
      // old one are aborted (their ops retried once, on new queue pairs with the new GID).
      std::string before = domain_->describe();
      auto changed = domain_->refresh_gid();
      if (!changed.ok()) {
        std::fprintf(stderr, "caf-rdma: %s: %s: no usable GID after a GID table change: %s\n",
                     options_.name.c_str(), e.what.c_str(), changed.error().message().c_str());
        return;
      }
      if (!*changed)
        return;
      std::fprintf(stderr, "caf-rdma: %s: GID table changed: %s is now %s\n", options_.name.c_str(),
                   before.c_str(), domain_->describe().c_str());
      std::string reason = "the local GID changed (" + e.what + ")";
      abort_connections(reason);
      return;
    }
    default:
      // Queue errors: the work completions of the ops concerned say what failed.
      return;
  }
}

void ManagerState::lose_device(const std::string& what) {
  if (!domain_)
    return;
  ++device_losses_;
  std::fprintf(stderr,
               "caf-rdma: %s: RDMA device lost: %s. Its transfers in flight failed; %s until it "
               "is back\n",
               options_.name.c_str(), what.c_str(),
               options_.mode == TransportMode::kRdma
                   ? "new transfers fail (CAF_RDMA_TRANSPORT=rdma)"
                   : "new transfers use the fallback");
  monitor_.reset();
  std::string reason = "RDMA device lost: " + what;
  // 1. Every queue pair on the device goes: not polled any more, destroyed (the NIC stops
  //    touching our buffers) as the last reference goes. Lanes a client holds are aborted: their
  //    ops fail now, and the client drops them.
  auto drop = [this](std::shared_ptr<RdmaQueuePair>& qp) {
    if (!qp)
      return;
    if (poller_)
      poller_->remove(qp.get());
    qp.reset();
  };
  for (auto& [key, p] : peers_) {
    drop(p.initiated);
    drop(p.accepted);
    for (auto& [id, qp] : p.lanes)
      drop(qp);
    p.lanes.clear();
    p.handshaking = false;  // its answer, if any, is for a QP of the old device (ignored)
  }
  drop(loopback_);
  queued_on_.clear();
  opening_.clear();           // handshakes in flight: their answers find nothing
  abort_connections(reason);  // what is left: the lanes our clients hold
  // Those let go of their queue pairs now (or as their client's op ends), so a client that
  // keeps a lane without using it does not keep the device from being removed.
  for (auto& [id, record] : lanes_)
    if (auto lane = record.lane.lock())
      lane->retire();
  // From here on the manager has no device: whatever failing an op sets off (a freed bounce
  // buffer going to a waiting op, a release reply) cannot reach the old one. `old` keeps the
  // domain for the registrations still to drop below.
  std::shared_ptr<RdmaDomain> old = std::move(domain_);
  domain_.reset();
  completions_.reset();  // its QPs went above; the last one takes the shared CQ along
  no_rdma_reason_ = reason + "; opening it again";
  port_down_.clear();
  // 2. The RDMA ops in flight fail now: no_device, naming the device. (Their completions, if
  //    any still come, find them done.)
  staged_.drop_device();  // 3. below, first: no op may give back a bounce buffer that is gone
  std::vector<OpId> in_flight = rdma_.on_nic();
  for (OpId id : staged_.on_nic())
    in_flight.push_back(id);
  for (OpId id : in_flight) {
    const OpRecord* o = op_record(id);
    if (o == nullptr)
      continue;
    fail_op(id, make_rdma_error(ErrorCode::kNoDevice,
                                std::string(kind_name(o->op.kind)) + " of " +
                                    std::to_string(o->length) + " bytes with " +
                                    describe(o->op.remote) + " failed: " + reason +
                                    " (the transfer may have moved part of its bytes)"));
  }
  for (auto& [key, p] : peers_)
    p.waiting.clear();
  // 3. Registrations: bounce buffers, buffers, the lanes' registry; then the device itself.
  for (auto& [id, b] : buffers_)
    b.rdma = RdmaBuffer();
  registry_->drop_registrations();
  old.reset();
  // 4. Peers: their queue pairs to us are dead; tell them now (or their ops wait for the ACK
  //    timeout x retries).
  for (auto& [key, p] : peers_)
    if (p.manager && p.down_reason.empty())
      peer_send(p.manager, device_gone_atom::value, what);
  if (options_.mode != TransportMode::kFallback)
    self_->delayed_send(self_, kReopenFirst, ReopenDevice{1});
}

void ManagerState::reopen_device(uint32_t attempt) {
  if (domain_)
    return;
  auto d = RdmaDomain::open(options_.ibverbs);
  if (!d.ok()) {
    no_rdma_reason_ = "RDMA device lost; reopening failed (attempt " + std::to_string(attempt) +
                      "): " + d.error().message();
    auto wait = std::min(kReopenMax, kReopenFirst * (1u << std::min(attempt, 5u)));
    self_->delayed_send(self_, wait, ReopenDevice{attempt + 1});
    return;
  }
  domain_ = *d;
  ++device_reopens_;
  no_rdma_reason_.clear();
  if (!poller_)
    poller_ = std::make_unique<CompletionPoller>();
  // Live host buffers are registered again (for the local side of transfers and new lanes);
  // handles given out before carry the old incarnation and move through us (invariant 8).
  size_t again = 0, failed = 0;
  for (auto& [id, b] : buffers_) {
    if (b.released || b.memory != BufferMemory::kHost)
      continue;
    auto mr_access = b.access == BufferAccess::kReadOnly ? Access::kReadOnly : Access::kReadWrite;
    auto r = domain_->register_buffer(reinterpret_cast<void*>(b.addr), b.size, mr_access);
    if (!r.ok()) {
      ++failed;
      continue;
    }
    b.rdma = *r;
    registry_->set_rdma(id, b.rdma);
    ++again;
  }
  std::string not_again =
      failed > 0 ? " (" + std::to_string(failed) + " could not be: they use the fallback)" : "";
  std::fprintf(stderr,
               "caf-rdma: %s: RDMA device back after %u attempts: %s; %zu buffers registered "
               "again%s\n",
               options_.name.c_str(), attempt, domain_->describe().c_str(), again,
               not_again.c_str());
  watch_device();
}

void ManagerState::peer_device_gone(const std::string& what) {
  const auto& sender = self_->current_sender();
  if (!sender)
    return;
  auto it = peers_.find(caf::actor_cast<caf::actor_addr>(sender));
  if (it == peers_.end())
    return;
  Peer& p = it->second;
  std::string reason = "RDMA device of peer manager " + p.name + " lost: " + what.substr(0, 512);
  // Ops on these queue pairs fail now (flushed); a retry makes a new handshake, which the peer
  // refuses until its device is back (then the fallback) or answers with its new incarnation.
  abort_connections(reason, &it->first);
}

void ManagerState::abort_connections(const std::string& reason, const caf::actor_addr* peer) {
  auto abort = [&reason](const std::shared_ptr<RdmaQueuePair>& qp) {
    if (qp)
      (void)qp->abort(reason);
  };
  for (auto& [key, p] : peers_) {
    if (peer != nullptr && key != *peer)
      continue;
    abort(p.initiated);
    abort(p.accepted);
    for (auto& [id, qp] : p.lanes)
      abort(qp);
  }
  for (auto& [id, lane] : lanes_)
    if (peer == nullptr || lane.owner == *peer)
      abort(lane.qp.lock());
  if (peer == nullptr)
    abort(loopback_);
}

uint64_t ManagerState::hold_opening(std::shared_ptr<RdmaQueuePair> qp) {
  uint64_t n = next_opening_++;
  opening_.emplace(n, std::move(qp));
  return n;
}

std::shared_ptr<RdmaQueuePair> ManagerState::take_opening(uint64_t n) {
  auto it = opening_.find(n);
  if (it == opening_.end())
    return nullptr;
  auto qp = std::move(it->second);
  opening_.erase(it);
  return qp;
}

}  // namespace caf_rdma::detail
