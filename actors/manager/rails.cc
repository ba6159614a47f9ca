// Rails (see rails.h).
#include "actors/manager/rails.h"

#include <map>

#include "actors/detail/manager_state.h"
#include "actors/op_texts.h"
#include "actors/transport/open_device.h"
#include "primitives/device_list.h"
#include "primitives/log.h"

namespace caf_rdma::detail {

std::string stripe_name(uint32_t stripe) {
  if (is_class_stripe(stripe))
    return std::string(priority_name(class_of_stripe(stripe))) + "-class queue pair";
  return "striping queue pair " + std::to_string(stripe) + " (rail " +
         std::to_string(rail_of(stripe)) + ")";
}

Result<std::vector<std::shared_ptr<Nic>>> open_rails(const ManagerOptions& options,
                                                     const std::string& primary) {
  std::vector<std::string> names = options.rail_devices;
  if (options.all_devices) {
    CAF_RDMA_ASSIGN_OR_RETURN(auto list, DeviceList::get());
    auto devices = list.describe();
    for (size_t i : default_device_candidates(devices, options.ibverbs.port_num))
      if (devices[i].name != primary)
        names.push_back(devices[i].name);
  }
  if (names.size() > kMaxRails)
    return Error(
        ErrorCode::kInvalidArgument,
        std::to_string(names.size()) + " rails asked for; at most " + std::to_string(kMaxRails));
  std::vector<std::shared_ptr<Nic>> out;
  for (const std::string& name : names) {
    if (name == primary || name.empty())
      return Error(ErrorCode::kInvalidArgument,
                   "rail device '" + name + "' is the primary device or empty: each device once");
    IbverbsConfig config = options.ibverbs;
    config.device_name = name;
    config.near_pci_device.clear();
    config.local_rank = -1;
    config.gid_index = -1;  // each device its own GID (the primary's index need not exist here)
    config.netdev.clear();
    auto d = open_device(options, config);
    if (!d.ok())
      return d.error().with_context("opening rail " + std::to_string(out.size() + 1) + " (" + name +
                                    ")");
    out.push_back(*d);
  }
  return out;
}

void Rails::register_buffer(LocalBuffer& entry, BufferHandle& h, Access access) {
  if (m_.nic().rails.empty() || entry.rdma.released())
    return;
  std::vector<RdmaBuffer> regions;
  std::vector<RailKey> keys;
  for (const RailDevice& rail : m_.nic().rails) {
    if (!rail.domain) {  // lost: an empty key keeps the others' positions (invariant 18)
      regions.emplace_back();
      keys.emplace_back();
      continue;
    }
    auto b = rail.domain->register_buffer(reinterpret_cast<void*>(entry.addr), entry.size, access);
    if (!b.ok()) {
      // Invariant 18: on every rail or none; the buffer moves on the primary device alone.
      log_line(LogLevel::kWarn, "%s: buffer %llu is not striped: registering it on rail %s: %s",
               m_.options().name.c_str(), static_cast<unsigned long long>(h.id),
               rail.domain->device_name().c_str(), b.error().message().c_str());
      return;
    }
    keys.push_back(RailKey{rail.domain->device_name(), b->rkey(), rail.domain->incarnation()});
    regions.push_back(std::move(*b));
  }
  entry.rails = std::move(regions);
  h.rails = std::move(keys);
}

const RdmaBuffer& Rails::region(const LocalBuffer& b, uint32_t rail) {
  return rail == 0 ? b.rdma : b.rails.at(rail - 1);
}

const std::shared_ptr<Nic>& Rails::domain_of(uint32_t rail) const {
  return rail == 0 ? m_.nic().domain : m_.nic().rails.at(rail - 1).domain;
}

bool Rails::port_active(uint32_t rail) const {
  if (rail == 0)
    return m_.nic().port_down.empty();
  const auto& d = m_.nic().rails.at(rail - 1).domain;
  if (!d)
    return false;  // lost (invariant 21)
  return d->port_active();
}

bool Rails::on_every_rail(const LocalBuffer& local) const {
  return !m_.nic().rails.empty() && local.rails.size() == m_.nic().rails.size();
}

void Rails::count_batch(std::vector<OpRecord>& ops) {
  // Lengths as asked (each op checks its own when it starts): a sum that would pass 2^64
  // stops there.
  std::map<caf::actor_addr, uint64_t> per_owner;
  for (const OpRecord& r : ops)
    if (counts_together(r.op)) {
      uint64_t& sum = per_owner[r.op.remote.owner.address()];
      sum = r.op.length > UINT64_MAX - sum ? UINT64_MAX : sum + r.op.length;
    }
  for (OpRecord& r : ops)
    if (counts_together(r.op))
      r.batch_bytes = per_owner[r.op.remote.owner.address()];
}

StripeLane Rails::least_busy_of(const std::shared_ptr<QpEndpoint>& primary,
                                const std::vector<StripeLane>& lanes) {
  StripeLane best{primary, 0};
  size_t fewest = primary->pending_ops();
  for (const StripeLane& l : lanes)
    if (size_t n = l.qp->pending_ops(); n < fewest) {
      fewest = n;
      best = l;
    }
  return best;
}

bool Rails::stripes(OpId id, std::vector<StripeLane>* lanes, bool* whole) {
  const OpRecord* o = m_.op_record(id);
  *whole = false;
  if (o == nullptr)
    return false;
  // The rails both sides have (none: the op may still take stripe_qps queue pairs of the
  // primary devices), counted as RdmaClient's lanes count them (path_choice.h, shared_rails).
  const LocalBuffer& local = m_.buffer_table.buffers().at(o->op.local.id);
  const auto rails =
      static_cast<uint32_t>(shared_rails(local.rails.size(), o->op.remote.rails.size()));
  // Invariant 19's rule (path_choice.h invariant 7, RdmaClient's lanes ask it too): by the
  // op's size, else by its batch's to the same owner (then it goes whole on one queue pair).
  auto rule = [&](uint64_t bytes) {
    return striped(StripeFacts{bytes, m_.options().stripe_min_bytes, o->op.notify,
                               o->peer == m_.facade().address(), rails, m_.options().stripe_qps > 1,
                               priority_of(o->op) == Priority::kBulk});
  };
  if (!rule(o->length)) {
    if (o->batch_bytes <= o->length || !rule(o->batch_bytes))
      return false;
    *whole = true;
  }
  auto it = m_.peer_table.peers().find(o->peer);
  if (it == m_.peer_table.peers().end())
    return false;
  Peer& p = it->second;
  const auto now = m_.now();
  bool waits = false;
  for (uint32_t j = 0; j < m_.options().stripe_qps; ++j) {
    for (uint32_t rail = 0; rail <= rails; ++rail) {
      const uint32_t s = stripe_index(rail, j);
      if (s == 0 || !port_active(rail))
        continue;  // the managers' own queue pair; a rail whose port is down gets no slice
      if (rail > 0 &&
          (o->op.remote.rails[rail - 1].device.empty() || local.rails[rail - 1].released()))
        continue;  // a rail one side lost (invariant 21)
      if (auto q = p.qps.stripes.find(s); q != p.qps.stripes.end()) {
        if (!q->second->needs_recovery()) {
          lanes->push_back(StripeLane{q->second, rail});
          continue;
        }
        drop(o->peer, q->second);  // invariant 20: in ERR, made again below
      }
      if (p.qps.stripes_opening.count(s) != 0) {
        waits = true;
        continue;
      }
      if (auto f = p.qps.stripe_failed.find(s); f != p.qps.stripe_failed.end()) {
        if (now - f->second < kStripeRetry)
          continue;
        p.qps.stripe_failed.erase(f);
      }
      handshake(o->peer, s);
      waits = waits || p.qps.stripes_opening.count(s) != 0;
    }
  }
  if (waits) {
    lanes->clear();
    p.qps.stripe_waiting.push_back(id);
    return true;
  }
  return !lanes->empty();
}

StripeLane Rails::least_busy(OpId id, const std::shared_ptr<QpEndpoint>& primary) {
  StripeLane best{primary, 0};
  const OpRecord* o = m_.op_record(id);
  if (o == nullptr || o->op.notify || o->peer == m_.facade().address())
    return best;
  auto it = m_.peer_table.peers().find(o->peer);
  if (it == m_.peer_table.peers().end() || it->second.qps.stripes.empty())
    return best;
  const LocalBuffer& local = m_.buffer_table.buffers().at(o->op.local.id);
  const bool rails_usable = on_every_rail(local);
  size_t fewest = primary->pending_ops();
  for (const auto& [s, qp] : it->second.qps.stripes) {
    const uint32_t rail = rail_of(s);
    if (fewest == 0)
      break;
    if (is_class_stripe(s))
      continue;  // a class's own (invariant 26)
    if (rail > 0 && (!rails_usable || rail > o->op.remote.rails.size() ||
                     o->op.remote.rails[rail - 1].device.empty() ||
                     local.rails[rail - 1].released() || !port_active(rail)))
      continue;
    if (qp->needs_recovery())
      continue;
    if (size_t n = qp->pending_ops(); n < fewest) {
      fewest = n;
      best = StripeLane{qp, rail};
    }
  }
  return best;
}

bool Rails::class_lane(OpId id, std::shared_ptr<QpEndpoint>* qp) {
  const OpRecord* o = m_.op_record(id);
  if (o == nullptr)
    return true;
  const Priority cls = priority_of(o->op);
  if (cls == Priority::kBulk || o->op.notify || o->peer == m_.facade().address())
    return true;
  auto it = m_.peer_table.peers().find(o->peer);
  if (it == m_.peer_table.peers().end())
    return true;
  Peer& p = it->second;
  const uint32_t s = class_stripe(cls);
  if (auto q = p.qps.stripes.find(s); q != p.qps.stripes.end()) {
    const uint64_t inc = o->op.remote.incarnation;
    if (!q->second->needs_recovery()) {
      if (inc == 0 || inc == q->second->remote_incarnation()) {
        *qp = q->second;
        return true;
      }
      // Connected to another opening of the owner's device than the op's handle names: the
      // op runs on the managers' own (whose opening RdmaPath::qp_ready checked), and the next
      // op of the class makes its queue pair again.
      drop(o->peer, q->second);
      return true;
    }
    drop(o->peer, q->second);  // in ERR: replaced now (invariant 26)
  }
  if (p.qps.stripes_opening.count(s) == 0) {
    if (auto f = p.qps.stripe_failed.find(s); f != p.qps.stripe_failed.end()) {
      if (m_.now() - f->second < kStripeRetry)
        return true;  // the managers' own queue pair meanwhile
      p.qps.stripe_failed.erase(f);
    }
    handshake(o->peer, s);
    if (p.qps.stripes_opening.count(s) == 0)
      return true;  // not even started (said, and held off for kStripeRetry)
  }
  p.qps.class_waiting[s].push_back(id);  // woken by its own handshake's end, not by others'
  return false;
}

void Rails::handshake(const caf::actor_addr& key, uint32_t stripe) {
  Peer& p = m_.peer_table.peers().at(key);
  const uint32_t rail = rail_of(stripe);
  const auto& domain = domain_of(rail);
  std::shared_ptr<CompletionRouter>& cq =
      rail == 0 ? m_.nic().completions : m_.nic().rails.at(rail - 1).completions;
  const Priority cls = class_of_stripe(stripe);
  auto created = QpHandshakes::make_qp(domain, m_.handshakes.shared_qp_options(domain, cq, cls));
  if (!created.ok()) {
    log_line(LogLevel::kWarn, "%s: no %s to %s on %s: %s", m_.options().name.c_str(),
             stripe_name(stripe).c_str(), p.name.c_str(), domain->device_name().c_str(),
             created.error().message().c_str());
    p.qps.stripe_failed[stripe] = m_.now();
    return;
  }
  std::shared_ptr<QpEndpoint> qp = std::move(*created);
  QpInfoMsg mine = m_.handshakes.to_msg(qp->local_info());
  mine.device = domain->device_name();
  mine.stripe = stripe;
  mine.rail = rail;
  mine.priority = static_cast<uint8_t>(cls);
  const uint64_t held = m_.handshakes.hold_opening(std::move(qp));
  p.qps.stripes_opening[stripe] = held;
  // The rail's device as it is now: a lost (and reopened) one's answer is not taken.
  std::weak_ptr<Nic> device = domain;
  ++m_.counters().handshakes;
  auto ended = [this, key, stripe, held, device](const QpInfoMsg* remote, const std::string& why) {
    auto qp = m_.handshakes.take_opening(held);
    auto it = m_.peer_table.peers().find(key);
    if (it == m_.peer_table.peers().end())
      return;
    Peer& p = it->second;
    auto opening = p.qps.stripes_opening.find(stripe);
    if (opening == p.qps.stripes_opening.end() || opening->second != held)
      return;  // dropped meanwhile (device loss, the peer's end), or a later handshake's
    p.qps.stripes_opening.erase(opening);
    const uint32_t rail = rail_of(stripe);
    if (qp && device.lock() != domain_of(rail))
      qp.reset();  // its device was lost meanwhile (invariant 21): let it go
    std::string failed = why;
    if (qp && remote != nullptr) {
      Status st = remote->gid.size() == 16 ? qp->connect(from_msg(*remote))
                                           : Status(Error(ErrorCode::kInternal, "no GID"));
      if (st.ok()) {
        p.qps.stripes[stripe] = qp;
        m_.nic().poller->add(qp);
      } else {
        failed = st.error().message();
      }
    } else if (!qp && failed.empty()) {
      failed = "its device was lost";
    }
    if (!failed.empty()) {
      // The op runs on the queue pairs there are (invariant 20); said once per failure.
      log_line(LogLevel::kWarn, "%s: %s to %s failed: %s", m_.options().name.c_str(),
               stripe_name(stripe).c_str(), p.name.c_str(), failed.c_str());
      p.qps.stripe_failed[stripe] = m_.now();
    }
    handshake_ended(p, stripe);
  };
  m_.peer_table
      .peer_request(p.manager, m_.options().handshake_timeout, qp_connect_atom::value,
                    std::move(mine))
      .then([ended](QpInfoMsg& remote) { ended(&remote, ""); },
            [ended](caf::error& err) { ended(nullptr, error_message(err)); });
}

void Rails::handshake_ended(Peer& p, uint32_t stripe) {
  std::vector<OpId> waiting;
  if (is_class_stripe(stripe)) {
    // Only that class's ops waited for it (invariant 26).
    auto w = p.qps.class_waiting.find(stripe);
    if (w == p.qps.class_waiting.end())
      return;
    waiting = std::move(w->second);
    p.qps.class_waiting.erase(w);
  } else {
    // A bulk op waits for every striping handshake it started or found (invariant 20).
    for (const auto& [s, held] : p.qps.stripes_opening)
      if (!is_class_stripe(s))
        return;
    waiting = std::move(p.qps.stripe_waiting);
    p.qps.stripe_waiting.clear();
  }
  for (OpId id : waiting)
    if (m_.op_record(id) != nullptr)
      m_.rdma_path().connect(id);
}

Result<QpInfoMsg> Rails::accept(Peer& p, const QpInfoMsg& remote) {
  const uint32_t rail = remote.rail;
  const auto cls = priority_from_wire(remote.priority);
  // A class queue pair (invariant 26) names its class twice: by its stripe and its priority.
  const bool of_class = is_class_stripe(remote.stripe);
  if ((!of_class && remote.stripe >= stripe_index(0, kMaxStripeQps)) ||
      rail_of(remote.stripe) != rail || !cls ||
      (of_class ? class_stripe(*cls) != remote.stripe : *cls != Priority::kBulk))
    return Error(ErrorCode::kInvalidArgument,
                 "striping handshake from " + p.name + " with stripe " +
                     std::to_string(remote.stripe) + ", rail " + std::to_string(rail) +
                     " and class " + std::to_string(remote.priority) +
                     ", which do not match (at most " + std::to_string(kMaxStripeQps) +
                     " queue pairs per pair of devices, then one per class but bulk on rail 0)");
  // Bounded by this manager's own settings: at most (rails + 1) x stripe_qps per peer, and
  // one per class.
  const uint32_t j = remote.stripe / (static_cast<uint32_t>(kMaxRails) + 1);
  if (!of_class && j >= m_.options().stripe_qps)
    return Error(ErrorCode::kInvalidArgument,
                 "striping handshake from " + p.name + " for queue pair " + std::to_string(j + 1) +
                     " of a pair of devices; " + m_.options().name + " takes " +
                     std::to_string(m_.options().stripe_qps));
  if (rail > m_.nic().rails.size())
    return Error(ErrorCode::kNoDevice,
                 "manager " + m_.options().name + " has no rail " + std::to_string(rail) +
                     " (its rails: " + std::to_string(m_.nic().rails.size()) + ")");
  if (rail > 0 && !m_.nic().rails[rail - 1].domain)
    return Error(ErrorCode::kNoDevice, "manager " + m_.options().name + "'s rail " +
                                           m_.nic().rails[rail - 1].name +
                                           " was lost: " + m_.nic().rails[rail - 1].lost);
  if (rail == 0 && !m_.nic().domain)
    return Error(ErrorCode::kNoDevice, "manager " + m_.options().name + " has no RDMA device now");
  if (!port_active(rail))
    return Error(ErrorCode::kNoDevice, "manager " + m_.options().name + "'s device " +
                                           domain_of(rail)->device_name() + " has its port down");
  const auto& domain = domain_of(rail);
  std::shared_ptr<CompletionRouter>& cq =
      rail == 0 ? m_.nic().completions : m_.nic().rails.at(rail - 1).completions;
  CAF_RDMA_ASSIGN_OR_RETURN(
      std::shared_ptr<QpEndpoint> qp,
      QpHandshakes::make_qp(domain, m_.handshakes.shared_qp_options(domain, cq, *cls)));
  Status st = qp->connect(from_msg(remote));
  if (!st.ok())
    return st.error().with_context("accepting " + stripe_name(remote.stripe) + " from " + p.name +
                                   " on " + domain->device_name());
  p.qps.stripes_accepted[remote.stripe] = qp;  // replaces a stale one (the peer made it again)
  QpInfoMsg mine = m_.handshakes.to_msg(qp->local_info());
  mine.device = domain->device_name();
  mine.stripe = remote.stripe;
  mine.rail = rail;
  mine.priority = remote.priority;
  return mine;
}

void Rails::drop(const caf::actor_addr& key, const std::shared_ptr<QpEndpoint>& dropped) {
  // `dropped` may be an entry erased below: the copy keeps it alive and the comparisons valid.
  // NOLINTNEXTLINE(performance-unnecessary-copy-initialization): the copy is the point
  std::shared_ptr<QpEndpoint> qp = dropped;
  auto it = m_.peer_table.peers().find(key);
  if (it == m_.peer_table.peers().end() || !qp)
    return;
  if (m_.nic().poller)
    m_.nic().poller->remove(qp.get());
  Peer& p = it->second;
  for (auto s = p.qps.stripes.begin(); s != p.qps.stripes.end();) {
    if (s->second != qp) {
      ++s;
      continue;
    }
    if (!is_class_stripe(s->first))  // a class's is replaced by its next op (invariant 26)
      p.qps.stripe_failed[s->first] = m_.now();  // it died: not made again for kStripeRetry
    s = p.qps.stripes.erase(s);
  }
  for (auto s = p.qps.stripes_accepted.begin(); s != p.qps.stripes_accepted.end();)
    s = s->second == qp ? p.qps.stripes_accepted.erase(s) : std::next(s);
}

void Rails::forget(Peer& p) {
  for (auto* table : {&p.qps.stripes, &p.qps.stripes_accepted}) {
    for (auto& [s, qp] : *table)
      if (m_.nic().poller)
        m_.nic().poller->remove(qp.get());
    table->clear();  // the last reference: destroyed (what it holds completes flushed)
  }
  p.qps.stripes_opening.clear();
}

void Rails::drop_peer(Peer& p, const caf::error& err) {
  forget(p);
  auto waiting = std::move(p.qps.stripe_waiting);
  p.qps.stripe_waiting.clear();
  for (auto& [s, ids] : p.qps.class_waiting)
    waiting.insert(waiting.end(), ids.begin(), ids.end());
  p.qps.class_waiting.clear();
  for (OpId id : waiting)
    m_.fail_op(id, err);
}

void Rails::drop_all() {
  for (auto& [key, p] : m_.peer_table.peers()) {
    forget(p);
    // On the NIC's list (RdmaPath::on_nic): failed by the caller.
    p.qps.stripe_waiting.clear();
    p.qps.class_waiting.clear();
  }
}

void Rails::abort(const std::string& reason, const caf::actor_addr* peer) {
  for (auto& [key, p] : m_.peer_table.peers()) {
    if (peer != nullptr && key != *peer)
      continue;
    for (auto* table : {&p.qps.stripes, &p.qps.stripes_accepted})
      for (auto& [s, qp] : *table)
        (void)qp->abort(reason);
  }
}

void Rails::watch() {
  for (RailDevice& rail : m_.nic().rails)
    rail.monitor =
        m_.device.monitor(*rail.domain, "a rail: its failures show as slices timing out");
}

bool Rails::rail_event(const DeviceChanged& e) {
  for (size_t k = 0; k < m_.nic().rails.size(); ++k) {
    RailDevice& rail = m_.nic().rails[k];
    if (!rail.domain || rail.domain->incarnation() != e.incarnation)
      continue;
    const auto kind = static_cast<DeviceEventKind>(e.kind);
    const bool lost = kind == DeviceEventKind::kLost;
    if (!lost && (kind != DeviceEventKind::kPortDown || e.port != rail.domain->port().port_num))
      return true;  // port up: port_active sees it; GID and queue events: the slices say
    const auto r = static_cast<uint32_t>(k + 1);
    const std::string reason = "rail " + rail.name + (lost ? " lost: " : " port down: ") + e.what;
    log_line(LogLevel::kWarn, "%s: %s; its slices go to the other devices",
             m_.options().name.c_str(), reason.c_str());
    for (auto& [key, p] : m_.peer_table.peers()) {
      for (auto* table : {&p.qps.stripes, &p.qps.stripes_accepted}) {
        for (auto s = table->begin(); s != table->end();) {
          if (rail_of(s->first) != r) {
            ++s;
            continue;
          }
          // Flushed now: the slices on it complete with an error and fail over (invariant 21).
          (void)s->second->abort(reason);
          if (!lost) {
            ++s;
            continue;
          }
          // Lost: destroyed (what it still holds completes flushed), so the device can go.
          if (m_.nic().poller)
            m_.nic().poller->remove(s->second.get());
          s = table->erase(s);
        }
      }
    }
    if (lost) {
      rail.lost = e.what;
      rail.monitor.reset();
      for (auto& [id, b] : m_.buffer_table.buffers())
        if (b.rails.size() == m_.nic().rails.size())
          b.rails[k] = RdmaBuffer();  // the other rails' registrations stay (invariant 18)
      rail.completions.reset();
      rail.domain.reset();
    }
    return true;
  }
  return false;
}

std::vector<std::string> Rails::names() const {
  std::vector<std::string> out;
  for (const RailDevice& rail : m_.nic().rails)
    out.push_back(rail.domain ? rail.name : rail.name + " (lost: " + rail.lost + ")");
  return out;
}

size_t Rails::live_qps() const {
  size_t n = 0;
  for (const auto& [key, p] : m_.peer_table.peers())
    n += p.qps.stripes.size() + p.qps.stripes_accepted.size();
  return n;
}

std::string Rails::describe() const {
  if (m_.nic().rails.empty())
    return "";
  std::string out = "; rails";
  for (const RailDevice& rail : m_.nic().rails)
    out += (out.size() == 7 ? " " : ", ") + (rail.domain ? rail.domain->describe() : rail.name);
  return out + "; transfers of at least " + std::to_string(m_.options().stripe_min_bytes) +
         " bytes striped over " + std::to_string(m_.options().stripe_qps) +
         " queue pair(s) per pair of devices";
}

}  // namespace caf_rdma::detail
