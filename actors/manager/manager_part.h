// ManagerPart: what every part of the manager (actors/manager/) is: one job on the tables the
// front keeps (actors/detail/manager_state.h), done through a reference to the front, which
// outlives it (parts are members of ManagerState). Not copyable: a copy would act on the same
// tables behind the front's back.
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
