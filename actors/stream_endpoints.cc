// StreamEndpoints: owners' stream endpoints as their grants named them (see stream_endpoints.h).
#include "actors/stream_endpoints.h"

#include <algorithm>

namespace caf_rdma {

void StreamEndpoints::learn(const caf::actor_addr& owner, StreamEndpoint endpoint) {
  if (!owner || endpoint.port == 0)
    return;
  std::lock_guard<std::mutex> lock(mu_);
  auto [it, added] = known_.insert_or_assign(owner, std::move(endpoint));
  (void)it;
  if (!added)
    return;
  learned_.push_back(owner);
  // Invariant 3: the owner learned longest ago goes.
  while (known_.size() > kMaxStreamEndpoints && !learned_.empty()) {
    known_.erase(learned_.front());
    learned_.pop_front();
  }
}

std::optional<StreamEndpoint> StreamEndpoints::find(const caf::actor_addr& owner) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = known_.find(owner);
  if (it == known_.end())
    return std::nullopt;
  return it->second;
}

void StreamEndpoints::forget(const caf::actor_addr& owner) {
  std::lock_guard<std::mutex> lock(mu_);
  if (known_.erase(owner) != 0)
    learned_.erase(std::remove(learned_.begin(), learned_.end(), owner), learned_.end());
}

size_t StreamEndpoints::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return known_.size();
}

}  // namespace caf_rdma
