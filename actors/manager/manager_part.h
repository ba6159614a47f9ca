// ManagerPart: what every part of the manager (actors/manager/) is: one job, with the state that
// job keeps, done through a reference to the front (actors/detail/manager_state.h), whose public
// members are all a part uses. Parts are members of ManagerState, declared before the rest of
// it: destroyed after it, so a part's destructor must not use `m_`. Not copyable: a copy would
// act on the same state behind the front's back.
#pragma once

namespace caf_rdma::detail {

class ManagerState;

class ManagerPart {
public:
  explicit ManagerPart(ManagerState& m) : m_(m) {}
  ManagerPart(const ManagerPart&) = delete;
  ManagerPart& operator=(const ManagerPart&) = delete;

protected:
  ~ManagerPart() = default;
  ManagerState& m_;
};

}  // namespace caf_rdma::detail
