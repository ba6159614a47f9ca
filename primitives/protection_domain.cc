#include "primitives/protection_domain.h"

#include <cerrno>

#include "primitives/ibverbs_error.h"

namespace caf_rdma {

Result<std::shared_ptr<ProtectionDomain>> ProtectionDomain::allocate(
    std::shared_ptr<DeviceContext> ctx) {
  errno = 0;
  ibv_pd* pd = ibv_alloc_pd(ctx->get());
  if (pd == nullptr)
    return ibverbs_error("ibv_alloc_pd", errno ? errno : ENOMEM, "device " + ctx->name());
  return std::shared_ptr<ProtectionDomain>(new ProtectionDomain(std::move(ctx), pd));
}

ProtectionDomain::~ProtectionDomain() {
  ibv_dealloc_pd(pd_);
}

}  // namespace caf_rdma
