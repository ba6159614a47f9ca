// DeviceMemory: what the manager needs to know and do about GPU memory: classify a pointer,
// copy between GPU and host, register GPU memory with the NIC directly (GPUDirect). The
// implementation is CudaDeviceMemory (the CUDA driver, loaded at run time); tests on machines
// without a GPU substitute a fake (tests/components/fake_device_memory.h), so the staging logic
// runs in CI, and the GPU tests run the real one where a GPU is present.
#pragma once

#include <memory>
#include <string>

#include "primitives/memory_kind.h"
#include "primitives/memory_region.h"
#include "primitives/status.h"

namespace caf_rdma {

class DeviceMemory {
public:
  virtual ~DeviceMemory() = default;

  /// "cuda" for the real one.
  virtual std::string name() const = 0;
  /// What [addr, addr + size) is: host memory (any kind of host memory CUDA knows counts as
  /// host for registration) or memory of a GPU. An error when the driver cannot tell (its
  /// error, never "host" by default: registering GPU memory as host memory would fail later,
  /// or pin the wrong pages).
  virtual Result<PointerInfo> classify(uint64_t addr, uint64_t size) const = 0;
  virtual Status copy_to_host(void* dst, uint64_t src, uint64_t n, int device) const = 0;
  virtual Status copy_to_device(uint64_t dst, const void* src, uint64_t n, int device) const = 0;
  /// Page-locks host memory [p, p + n) for the GPUs' copy engines (bounce buffers): copies
  /// between it and GPU memory then run as DMA, not through the driver's own staging copy.
  /// `device` is the GPU whose context does it (the lock holds for every GPU).
  virtual Status page_lock(void* p, uint64_t n, int device) const = 0;
  virtual Status page_unlock(void* p, int device) const = 0;
  /// Registers GPU memory with the NIC (dmabuf, then nvidia_peermem), with its memory
  /// operations made synchronous first (SYNC_MEMOPS); the error names every attempt.
  virtual Result<std::shared_ptr<MemoryRegion>> register_direct(
      const std::shared_ptr<ProtectionDomain>& pd, const PointerInfo& info, uint64_t addr,
      uint64_t size, Access access) const = 0;
};

/// The CUDA driver's DeviceMemory, or nullptr (with the reason in `why`) when this build or
/// host has no CUDA: then every pointer is host memory.
std::shared_ptr<DeviceMemory> cuda_device_memory(std::string* why = nullptr);

}  // namespace caf_rdma
