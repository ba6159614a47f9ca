// Directory: the node's directory of named buffer handles: dir_put from this node's actors,
// dir_get from anyone, waiting a bounded time for a name (waiters per node and in all are
// bounded: manager invariant 7).
//
// A part of the manager (actors/detail/manager_state.h): it works on the tables the front
// keeps (detail/manager_tables.h); what is its own is below.
#pragma once

#include "actors/detail/manager_tables.h"

namespace caf_rdma::detail {

class ManagerState;

class Directory {
public:
  explicit Directory(ManagerState& m) : m_(m) {}
  Directory(const Directory&) = delete;
  Directory& operator=(const Directory&) = delete;

  caf::result<bool> dir_put(std::string key, BufferHandle h);
  caf::result<BufferHandle> dir_get(const std::string& key, uint32_t wait_ms);
  void dir_timeout(const std::string& key, uint64_t id);
  void forget_dir_waiter(const DirWaiter& w);

private:
  ManagerState& m_;
  std::map<std::string, DirEntry> directory_;
  std::map<std::string, std::vector<DirWaiter>> dir_waiters_;
  size_t dir_waiter_count_ = 0;
  std::map<caf::node_id, size_t> dir_waiters_per_node_;
  uint64_t next_dir_waiter_ = 1;
};

}  // namespace caf_rdma::detail
