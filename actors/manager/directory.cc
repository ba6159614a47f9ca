// Directory (see directory.h).
#include "actors/manager/directory.h"

#include <algorithm>
#include <caf/actor_proxy.hpp>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include "actors/rdma_manager_actor.h"
#include "primitives/cuda_driver.h"

#include "actors/detail/manager_state.h"

namespace caf_rdma::detail {

caf::result<bool> Directory::dir_put(std::string key, BufferHandle h) {
  if (key.empty() || key.size() > kMaxDirectoryName)
    return make_rdma_error(ErrorCode::kInvalidArgument,
                           "directory name of " + std::to_string(key.size()) +
                               " bytes: names have 1.." + std::to_string(kMaxDirectoryName));
  auto putter = caf::actor_cast<caf::actor_addr>(m_.self()->current_sender());
  auto it = directory_.find(key);
  if (it == directory_.end() && directory_.size() >= kMaxDirectoryEntries)
    return make_rdma_error(ErrorCode::kResourceExhausted,
                           "the directory of " + m_.options().name + " is full (" +
                               std::to_string(kMaxDirectoryEntries) + " names)");
  auto waiters = dir_waiters_.find(key);
  if (waiters != dir_waiters_.end()) {
    for (auto& w : waiters->second) {
      w.rp.deliver(h);
      forget_dir_waiter(w);
    }
    dir_waiters_.erase(waiters);
  }
  directory_[std::move(key)] = DirEntry{std::move(h), std::move(putter)};
  return true;
}

caf::result<BufferHandle> Directory::dir_get(const std::string& key, uint32_t wait_ms) {
  auto it = directory_.find(key);
  if (it != directory_.end())
    return it->second.handle;
  if (key.empty() || key.size() > kMaxDirectoryName)
    return make_rdma_error(ErrorCode::kInvalidArgument,
                           "directory name of " + std::to_string(key.size()) +
                               " bytes: names have 1.." + std::to_string(kMaxDirectoryName));
  if (wait_ms == 0)
    return make_rdma_error(ErrorCode::kTimeout, "no buffer handle named '" + key +
                                                    "' in the directory of " + m_.options().name);
  if (dir_waiter_count_ >= kMaxDirectoryWaiters)
    return make_rdma_error(ErrorCode::kResourceExhausted,
                           "the directory of " + m_.options().name + " already has " +
                               std::to_string(kMaxDirectoryWaiters) + " waiting requests");
  const auto& sender = m_.self()->current_sender();
  caf::node_id node = sender ? sender->node() : caf::node_id{};
  bool remote = node != m_.self()->node();
  if (remote && dir_waiters_per_node_[node] >= kMaxDirectoryWaitersPerNode)
    return make_rdma_error(ErrorCode::kResourceExhausted,
                           "the directory of " + m_.options().name + " already has " +
                               std::to_string(kMaxDirectoryWaitersPerNode) +
                               " waiting requests from node " + caf::to_string(node));
  auto rp = m_.self()->make_response_promise<BufferHandle>();
  uint64_t id = next_dir_waiter_++;
  dir_waiters_[key].push_back(DirWaiter{id, rp, node, remote});
  ++dir_waiter_count_;
  if (remote)
    ++dir_waiters_per_node_[node];
  m_.self()->delayed_send(m_.self(), std::chrono::milliseconds(m_.capped(wait_ms)),
                          DirTimeout{key, id});
  return rp;
}

void Directory::forget_dir_waiter(const DirWaiter& w) {
  --dir_waiter_count_;
  if (w.counted) {
    auto n = dir_waiters_per_node_.find(w.node);
    if (n != dir_waiters_per_node_.end() && --n->second == 0)
      dir_waiters_per_node_.erase(n);
  }
}

void Directory::dir_timeout(const std::string& key, uint64_t id) {
  auto it = dir_waiters_.find(key);
  if (it == dir_waiters_.end())
    return;
  auto& ws = it->second;
  for (size_t i = 0; i < ws.size(); ++i) {
    if (ws[i].id != id)
      continue;
    ws[i].rp.deliver(make_rdma_error(ErrorCode::kTimeout, "no buffer handle named '" + key +
                                                              "' appeared in the directory of " +
                                                              m_.options().name + " in time"));
    forget_dir_waiter(ws[i]);
    ws.erase(ws.begin() + static_cast<long>(i));
    break;
  }
  if (ws.empty())
    dir_waiters_.erase(it);
}

}  // namespace caf_rdma::detail
