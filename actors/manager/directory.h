// Directory: the node's directory of named buffer handles: dir_put from this node's actors,
// dir_get from anyone, waiting a bounded time for a name (waiters per node and in all are
// bounded: manager invariant 7).
//
// A part of the manager (actors/manager/manager_part.h); what is its own is below.
#pragma once

#include "actors/detail/manager_tables.h"
#include "actors/manager/manager_part.h"

namespace caf_rdma::detail {

class Directory : public ManagerPart {
public:
  using ManagerPart::ManagerPart;

  caf::result<bool> dir_put(std::string key, BufferHandle h);
  caf::result<BufferHandle> dir_get(const std::string& key, uint32_t wait_ms);
  void dir_timeout(const std::string& key, uint64_t id);
  void forget_dir_waiter(const DirWaiter& w);

private:
  std::map<std::string, DirEntry> directory_;
  std::map<std::string, std::vector<DirWaiter>> dir_waiters_;
  size_t dir_waiter_count_ = 0;
  std::map<caf::node_id, size_t> dir_waiters_per_node_;
  uint64_t next_dir_waiter_ = 1;
};

}  // namespace caf_rdma::detail
