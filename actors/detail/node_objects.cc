// NodeObjects (see node_objects.h).
#include "actors/detail/node_objects.h"

#include <atomic>
#include <map>
#include <mutex>
#include <set>

namespace caf_rdma::detail {

namespace {

struct Table {
  std::mutex mu;
  uint64_t next = 1;
  std::map<const caf::actor_system*, std::map<uint64_t, std::string>> live;
  std::set<const caf::actor_system*> stopped;
  std::vector<std::unique_ptr<caf::actor_system_config>> kept_configs;  // invariant 3
  std::vector<std::unique_ptr<caf::actor_system>> kept;
};

/// Whether any node ever stopped with objects alive: until then node_stopped takes no lock
/// (it runs on every call of every client).
std::atomic<bool> any_stopped{false};

Table& table() {
  static auto* t = new Table;  // never destroyed: objects may go after static destructors ran
  return *t;
}

}  // namespace

uint64_t node_object_added(const caf::actor_system& sys, std::string what) {
  Table& t = table();
  std::lock_guard<std::mutex> guard(t.mu);
  const uint64_t token = t.next++;
  t.live[&sys].emplace(token, std::move(what));
  return token;
}

void node_object_removed(const caf::actor_system& sys, uint64_t token) {
  Table& t = table();
  std::lock_guard<std::mutex> guard(t.mu);
  auto it = t.live.find(&sys);
  if (it == t.live.end())
    return;
  it->second.erase(token);
  if (it->second.empty())
    t.live.erase(it);
}

std::vector<std::string> node_objects_stop(const caf::actor_system& sys) {
  Table& t = table();
  std::lock_guard<std::mutex> guard(t.mu);
  std::vector<std::string> out;
  auto it = t.live.find(&sys);
  if (it == t.live.end())
    return out;
  t.stopped.insert(&sys);
  any_stopped.store(true, std::memory_order_release);
  for (const auto& [token, what] : it->second)
    out.push_back(what);
  return out;
}

bool node_stopped(const caf::actor_system& sys) {
  if (!any_stopped.load(std::memory_order_acquire))
    return false;
  Table& t = table();
  std::lock_guard<std::mutex> guard(t.mu);
  return t.stopped.count(&sys) != 0;
}

Status node_alive(const caf::actor_system& sys, const std::string& what) {
  if (!node_stopped(sys))
    return {};
  return Error(ErrorCode::kPeerUnavailable,
               "its RdmaNode was destroyed while this " + what +
                   " lived (destroy clients and RegisteredBuffers before their node): it does "
                   "nothing now");
}

void node_system_keep(std::unique_ptr<caf::actor_system_config> config,
                      std::unique_ptr<caf::actor_system> sys) {
  Table& t = table();
  std::lock_guard<std::mutex> guard(t.mu);
  t.kept_configs.push_back(std::move(config));
  t.kept.push_back(std::move(sys));
}

}  // namespace caf_rdma::detail
