// RegistrantWatch (see registrant_watch.h).
#include "actors/manager/registrant_watch.h"

#include <caf/all.hpp>

#include "actors/detail/manager_state.h"
#include "primitives/log.h"

namespace caf_rdma::detail {

namespace {

/// "actor 42 (name)": how the warning and the stats name a registrant.
std::string name_of(const caf::strong_actor_ptr& sender) {
  auto* local = dynamic_cast<caf::local_actor*>(caf::actor_cast<caf::abstract_actor*>(sender));
  return local != nullptr ? std::string(local->name()) : std::string("?");
}

}  // namespace

void RegistrantWatch::registered(uint64_t id) {
  const caf::strong_actor_ptr& sender = m_.self()->current_sender();
  if (!sender)
    return;  // an anonymous request: nobody to hold it (it lives until released)
  auto addr = caf::actor_cast<caf::actor_addr>(sender);
  auto [it, fresh] = registrants_.try_emplace(addr);
  if (fresh) {
    it->second.actor_id = sender->id();
    it->second.name = name_of(sender);
    m_.self()->monitor(sender);
  }
  it->second.buffers.insert(id);
  holder_[id] = addr;
}

void RegistrantWatch::released(uint64_t id) {
  auto h = holder_.find(id);
  if (h == holder_.end())
    return;
  if (auto r = registrants_.find(h->second); r != registrants_.end()) {
    r->second.buffers.erase(id);
    if (r->second.buffers.empty()) {  // invariant 3
      m_.self()->demonitor(r->first);
      registrants_.erase(r);
    }
  }
  holder_.erase(h);
}

bool RegistrantWatch::on_down(const caf::down_msg& msg) {
  auto it = registrants_.find(msg.source);
  if (it == registrants_.end())
    return false;
  Orphans o{std::move(it->second), caf::to_string(msg.reason)};
  registrants_.erase(it);
  for (uint64_t id : o.registrant.buffers)
    holder_.erase(id);  // nobody's now: a later release finds no holder
  const uint64_t batch = ++next_batch_;
  orphans_.emplace(batch, std::move(o));
  if (m_.options().orphan_grace.count() == 0)
    report(batch);
  else
    m_.self()->delayed_send(m_.self(), m_.options().orphan_grace, OrphanCheck{batch});
  return true;
}

void RegistrantWatch::report(uint64_t batch) {
  auto it = orphans_.find(batch);
  if (it == orphans_.end())
    return;
  Orphans o = std::move(it->second);
  orphans_.erase(it);
  std::vector<uint64_t> left;  // released meanwhile (by whoever had the id): not a leak
  std::string list;
  for (uint64_t id : o.registrant.buffers) {
    auto b = m_.buffer_table.buffers().find(id);
    if (b == m_.buffer_table.buffers().end() || b->second.released)
      continue;
    left.push_back(id);
    char addr[32];
    std::snprintf(addr, sizeof(addr), "%#llx", static_cast<unsigned long long>(b->second.addr));
    list += (list.empty() ? "" : ", ") + std::string("buffer ") + std::to_string(id) + " (" +
            std::to_string(b->second.size) + " bytes at " + addr +
            (b->second.rdma.released() ? ")" : ", pinned)");
  }
  if (left.empty())
    return;
  orphaned_ += left.size();
  const bool release = m_.options().release_orphans;
  log_line(LogLevel::kWarn,
           "%s: actor %llu (%s) ended (%s) holding %zu registered buffer%s it never released: "
           "%s; %s",
           m_.options().name.c_str(), static_cast<unsigned long long>(o.registrant.actor_id),
           o.registrant.name.c_str(), o.reason.c_str(), left.size(), left.size() > 1 ? "s" : "",
           list.c_str(),
           release ? "released now (release_orphans)"
                   : "they stay registered until released or the node stops (release_orphans, "
                     "CAF_RDMA_RELEASE_ORPHANS=1, releases them then)");
  if (release)
    for (uint64_t id : left)
      (void)m_.buffer_table.release_buffer(id);  // waits for its transfers, as any release
}

std::vector<RegistrantStats> RegistrantWatch::stats() const {
  std::vector<RegistrantStats> out;
  for (const auto& [addr, r] : registrants_) {
    if (r.buffers.empty())
      continue;
    RegistrantStats s;
    s.actor_id = r.actor_id;
    s.actor_name = r.name;
    for (uint64_t id : r.buffers) {
      auto b = m_.buffer_table.buffers().find(id);
      if (b == m_.buffer_table.buffers().end())
        continue;
      ++s.buffers;
      s.registered_bytes += b->second.size;
      s.pinned_bytes += b->second.rdma.released() ? 0 : b->second.size;
    }
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace caf_rdma::detail
