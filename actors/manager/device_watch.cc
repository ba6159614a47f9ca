// DeviceWatch (see device_watch.h).
#include "actors/manager/device_watch.h"

#include <cstdio>

#include "actors/detail/manager_state.h"
#include "actors/transport/open_device.h"
#include "primitives/log.h"

namespace caf_rdma::detail {

namespace {

/// First retry of a lost device, and the longest wait between retries.
constexpr std::chrono::milliseconds kReopenFirst{100};
constexpr std::chrono::milliseconds kReopenMax{2000};

}  // namespace

std::unique_ptr<DeviceMonitor> DeviceWatch::monitor(Nic& domain, const std::string& unwatched) {
  caf::actor me = caf::actor_cast<caf::actor>(m_.self());
  uint64_t incarnation = domain.incarnation();
  auto monitor = domain.watch([me, incarnation](DeviceEvent e) {
    caf::anon_send(
        me, DeviceChanged{incarnation, static_cast<uint8_t>(e.kind), e.port, std::move(e.what)});
  });
  if (monitor.ok())
    return std::move(*monitor);
  log_line(LogLevel::kWarn, "%s: %s cannot be watched (%s): %s", m_.options().name.c_str(),
           domain.device_name().c_str(), unwatched.c_str(), monitor.error().message().c_str());
  return nullptr;
}

void DeviceWatch::watch_device() {
  m_.nic().monitor.reset();
  if (m_.nic().domain)
    m_.nic().monitor = monitor(*m_.nic().domain, "its loss would show as timeouts");
}

void DeviceWatch::device_changed(const DeviceChanged& e) {
  if (m_.rails.rail_event(e))
    return;  // one of a rail's (rails.h)
  if (!m_.nic().domain || e.incarnation != m_.nic().domain->incarnation())
    return;  // an event of a domain already dropped
  auto kind = static_cast<DeviceEventKind>(e.kind);
  uint8_t port = m_.nic().domain->port().port_num;
  switch (kind) {
    case DeviceEventKind::kLost:
      return lose_device(e.what);
    case DeviceEventKind::kPortDown: {
      if (e.port != port || !m_.nic().port_down.empty())
        return;
      m_.nic().port_down = e.what;
      // Ops on the port fail now, not after the ACK timeout x retries; they are retried once,
      // and a retry takes the fallback while the port is down (start_rdma).
      std::string reason = "RDMA port down: " + e.what;
      abort_connections(reason);
      return;
    }
    case DeviceEventKind::kPortUp:
      if (e.port == port)
        m_.nic().port_down.clear();
      return;
    case DeviceEventKind::kGidChange: {
      if (e.port != port)
        return;
      // An address came, went or moved: choose the GID again. Queue pairs and lanes using the
      // old one are aborted (their ops retried once, on new queue pairs with the new GID).
      std::string before = m_.nic().domain->describe();
      auto changed = m_.nic().domain->refresh_gid();
      if (!changed.ok()) {
        log_line(LogLevel::kError, "%s: %s: no usable GID after a GID table change: %s",
                 m_.options().name.c_str(), e.what.c_str(), changed.error().message().c_str());
        return;
      }
      if (!*changed)
        return;
      log_line(LogLevel::kInfo, "%s: GID table changed: %s is now %s", m_.options().name.c_str(),
               before.c_str(), m_.nic().domain->describe().c_str());
      std::string reason = "the local GID changed (" + e.what + ")";
      abort_connections(reason);
      return;
    }
    default:
      // Queue errors: the work completions of the ops concerned say what failed.
      return;
  }
}

void DeviceWatch::lose_device(const std::string& what) {
  if (!m_.nic().domain)
    return;
  ++m_.nic().device_losses;
  log_line(LogLevel::kWarn,
           "%s: RDMA device lost: %s. Its transfers in flight failed; %s until it is back",
           m_.options().name.c_str(), what.c_str(),
           m_.options().mode == TransportMode::kRdma
               ? "new transfers fail (CAF_RDMA_TRANSPORT=rdma)"
               : "new transfers use the fallback");
  m_.nic().monitor.reset();
  std::string reason = "RDMA device lost: " + what;
  // 1. Every queue pair on the device goes: not polled any more, destroyed (the NIC stops
  //    touching our buffers) as the last reference goes. Lanes a client holds are aborted: their
  //    ops fail now, and the client drops them.
  auto drop = [this](std::shared_ptr<QpEndpoint>& qp) {
    if (!qp)
      return;
    if (m_.nic().poller)
      m_.nic().poller->remove(qp.get());
    qp.reset();
  };
  for (auto& [key, p] : m_.peer_table.peers()) {
    drop(p.qps.initiated);
    drop(p.qps.accepted);
    for (auto& [id, qp] : p.qps.lanes)
      drop(qp);
    p.qps.lanes.clear();
    p.qps.handshaking = false;  // its answer, if any, is for a QP of the old device (ignored)
  }
  drop(m_.nic().loopback);
  m_.rails.drop_all();  // striping QPs, the rails' included (rails.h invariant 20)
  m_.nic().queued_on.clear();
  m_.nic().opening.clear();   // handshakes in flight: their answers find nothing
  abort_connections(reason);  // what is left: the lanes our clients hold
  // Those let go of their queue pairs now (or as their client's op ends), so a client that
  // keeps a lane without using it does not keep the device from being removed.
  for (auto& [id, record] : m_.nic().lanes)
    if (auto lane = record.lane.lock())
      lane->retire();
  // From here on the manager has no device: whatever failing an op sets off (a freed bounce
  // buffer going to a waiting op, a release reply) cannot reach the old one. `old` keeps the
  // domain for the registrations still to drop below.
  std::shared_ptr<Nic> old = std::move(m_.nic().domain);
  m_.nic().domain.reset();
  m_.nic().completions.reset();  // its QPs went above; the last one takes the shared CQ along
  m_.nic().no_rdma_reason = reason + "; opening it again";
  m_.nic().port_down.clear();
  // 2. The RDMA ops in flight fail now: no_device, naming the device. (Their completions, if
  //    any still come, find them done.)
  // 3. below, first: no op may give back a bounce buffer that is gone.
  m_.staged_path().drop_device();
  std::vector<OpId> in_flight = m_.rdma_path().on_nic();
  for (OpId id : m_.staged_path().on_nic())
    in_flight.push_back(id);
  for (OpId id : in_flight) {
    const OpRecord* o = m_.op_record(id);
    if (o == nullptr)
      continue;
    m_.fail_op(id, make_rdma_error(ErrorCode::kNoDevice,
                                   std::string(kind_name(o->op.kind)) + " of " +
                                       std::to_string(o->length) + " bytes with " +
                                       describe(o->op.remote) + " failed: " + reason +
                                       " (the transfer may have moved part of its bytes)"));
  }
  for (auto& [key, p] : m_.peer_table.peers())
    p.qps.waiting.clear();
  // 3. Registrations: bounce buffers, buffers, the lanes' registry; then the device itself.
  for (auto& [id, b] : m_.buffer_table.buffers())
    b.rdma = RdmaBuffer();
  m_.registry()->drop_registrations();
  m_.receipts.drop_device();
  old.reset();
  // 4. Peers: their queue pairs to us are dead; tell them now (or their ops wait for the ACK
  //    timeout x retries).
  for (auto& [key, p] : m_.peer_table.peers())
    if (p.manager && p.down_reason.empty())
      m_.peer_table.peer_send(p.manager, device_gone_atom::value, what);
  if (m_.options().mode != TransportMode::kFallback)
    m_.self()->delayed_send(m_.self(), kReopenFirst, ReopenDevice{1});
}

void DeviceWatch::reopen_device(uint32_t attempt) {
  if (m_.nic().domain)
    return;
  auto d = open_device(m_.options(), m_.options().ibverbs);
  if (!d.ok()) {
    m_.nic().no_rdma_reason = "RDMA device lost; reopening failed (attempt " +
                              std::to_string(attempt) + "): " + d.error().message();
    auto wait = std::min(kReopenMax, kReopenFirst * (1u << std::min(attempt, 5u)));
    m_.self()->delayed_send(m_.self(), wait, ReopenDevice{attempt + 1});
    return;
  }
  m_.nic().domain = *d;
  ++m_.nic().device_reopens;
  m_.nic().no_rdma_reason.clear();
  if (!m_.nic().poller)
    m_.nic().poller = std::make_unique<CompletionPoller>();
  // Live host buffers are registered again (for the local side of transfers and new lanes);
  // handles given out before carry the old incarnation and move through us (invariant 8).
  size_t again = 0, failed = 0;
  for (auto& [id, b] : m_.buffer_table.buffers()) {
    if (b.released || b.memory != BufferMemory::kHost)
      continue;
    auto mr_access = b.access == BufferAccess::kReadOnly ? Access::kReadOnly : Access::kReadWrite;
    auto r = m_.nic().domain->register_buffer(reinterpret_cast<void*>(b.addr), b.size, mr_access);
    if (!r.ok()) {
      ++failed;
      continue;
    }
    b.rdma = *r;
    m_.registry()->set_rdma(id, b.rdma);
    ++again;
  }
  std::string not_again =
      failed > 0 ? " (" + std::to_string(failed) + " could not be: they use the fallback)" : "";
  log_line(LogLevel::kInfo,
           "%s: RDMA device back after %u attempts: %s; %zu buffers registered again%s",
           m_.options().name.c_str(), attempt, m_.nic().domain->describe().c_str(), again,
           not_again.c_str());
  watch_device();
}

void DeviceWatch::peer_device_gone(const std::string& what) {
  const auto& sender = m_.self()->current_sender();
  if (!sender)
    return;
  auto it = m_.peer_table.peers().find(caf::actor_cast<caf::actor_addr>(sender));
  if (it == m_.peer_table.peers().end())
    return;
  Peer& p = it->second;
  std::string reason = "RDMA device of peer manager " + p.name + " lost: " + what.substr(0, 512);
  // Ops on these queue pairs fail now (flushed); a retry makes a new handshake, which the peer
  // refuses until its device is back (then the fallback) or answers with its new incarnation.
  abort_connections(reason, &it->first);
}

void DeviceWatch::abort_connections(const std::string& reason, const caf::actor_addr* peer) {
  auto abort = [&reason](const std::shared_ptr<QpEndpoint>& qp) {
    if (qp)
      (void)qp->abort(reason);
  };
  for (auto& [key, p] : m_.peer_table.peers()) {
    if (peer != nullptr && key != *peer)
      continue;
    abort(p.qps.initiated);
    abort(p.qps.accepted);
    for (auto& [id, qp] : p.qps.lanes)
      abort(qp);
  }
  for (auto& [id, lane] : m_.nic().lanes)
    if (peer == nullptr || lane.owner == *peer)
      abort(lane.qp.lock());
  m_.rails.abort(reason, peer);
  if (peer == nullptr)
    abort(m_.nic().loopback);
}

}  // namespace caf_rdma::detail
