// ProtectionDomain: RAII owner of an ibv_pd.
//
// Destruction order: MRs and QPs hold a shared_ptr to their PD, so the PD is deallocated after
// them; the PD holds its DeviceContext, which is closed after the PD.
#pragma once

#include <infiniband/verbs.h>

#include <memory>

#include "primitives/device_context.h"

namespace caf_rdma {

class ProtectionDomain {
public:
  static Result<std::shared_ptr<ProtectionDomain>> allocate(std::shared_ptr<DeviceContext> ctx);

  ProtectionDomain(const ProtectionDomain&) = delete;
  ProtectionDomain& operator=(const ProtectionDomain&) = delete;
  ~ProtectionDomain();

  ibv_pd* get() const { return pd_; }
  const std::shared_ptr<DeviceContext>& context() const { return context_; }

private:
  ProtectionDomain(std::shared_ptr<DeviceContext> ctx, ibv_pd* pd)
      : context_(std::move(ctx)), pd_(pd) {}

  std::shared_ptr<DeviceContext> context_;
  ibv_pd* pd_;
};

}  // namespace caf_rdma
