// Directory: the node's directory of named buffer handles (dir_put, dir_get with a bounded wait).
// A part of the manager (actors/detail/manager_state.h): it works on the tables the front keeps
// (manager_tables.h) and holds no state of its own unless said below.
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
};

}  // namespace caf_rdma::detail
