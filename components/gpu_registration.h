// Registering GPU memory with the NIC (GPUDirect RDMA): dmabuf first (the GPU driver exports
// the pages of the requested range as a dmabuf, see dmabuf_span.h; ibv_reg_dmabuf_mr maps the
// requested bytes of it), then
// ibv_reg_mr on the device pointer (works with the nvidia_peermem kernel module). When neither
// works (Soft-RoCE, no GPUDirect) the error names both attempts and why each failed; callers
// then stage through host memory (see staging_plan.h).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "primitives/cuda_driver.h"
#include "primitives/memory_region.h"

namespace caf_rdma {

struct RegistrationAttempt {
  std::string name;  ///< e.g. "dmabuf", "nvidia_peermem"
  std::function<Result<std::shared_ptr<MemoryRegion>>()> run;
};

/// Runs `attempts` in order and returns the first region registered. Otherwise an error (code
/// of the last attempt) "cannot register <what>: dmabuf: ...; nvidia_peermem: ...".
Result<std::shared_ptr<MemoryRegion>> register_first_that_works(
    const std::vector<RegistrationAttempt>& attempts, const std::string& what);

/// The GPUDirect attempts for [addr, addr + size) of GPU memory described by `info`.
std::vector<RegistrationAttempt> gpudirect_attempts(const CudaDriver& cuda,
                                                    const std::shared_ptr<ProtectionDomain>& pd,
                                                    const PointerInfo& info, uint64_t addr,
                                                    uint64_t size, Access access);

}  // namespace caf_rdma
