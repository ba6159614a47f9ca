// DeviceMemory: what the manager needs to know and do about GPU memory: classify a pointer,
// copy between GPU and host, register GPU memory with the NIC directly (GPUDirect), and let
// another process of this host copy it GPU to GPU (export, import, device copy: CUDA IPC). The
// implementation is CudaDeviceMemory (the CUDA driver, loaded at run time); tests on machines
// without a GPU substitute a fake (tests/fake_device_memory.h), so the staging logic
// runs in CI, and the GPU tests run the real one where a GPU is present.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "primitives/memory_kind.h"
#include "primitives/memory_region.h"
#include "primitives/status.h"

namespace caf_rdma {

/// GPU memory made reachable from another process of this host (CUDA IPC): `handle` is what the
/// importer opens (opaque bytes, at most kMaxExportBytes), `offset` where the exported range
/// starts in what it opens (an export covers the whole allocation around the range).
struct GpuExport {
  std::vector<uint8_t> handle;
  uint64_t offset = 0;
};
/// An export opened in this process: `base` is where the exported allocation is mapped here;
/// close_import undoes it.
struct GpuImport {
  uint64_t base = 0;
  bool mapped = false;  ///< false: the exporter is this process (its own pointer, nothing mapped)
};
constexpr size_t kMaxExportBytes = 1024;

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

  // Between processes of this host (stream_server.h invariant 20). The defaults say this
  // DeviceMemory cannot: the bytes then move through bounce buffers.
  /// Exports the allocation around [addr, addr + size) of GPU `device`.
  virtual Result<GpuExport> export_range(uint64_t addr, uint64_t size, int device) const;
  /// Opens `handle` (another process's export, or this one's) for GPU `device` of this process.
  virtual Result<GpuImport> import_range(const std::vector<uint8_t>& handle, int device) const;
  virtual Status close_import(const GpuImport& import, int device) const;
  /// Copies n bytes from GPU memory `src` to GPU memory `dst` (either may be an import, on
  /// another GPU: a peer copy) on a stream of GPU `device`, waiting for the copy.
  virtual Status copy_between_gpus(uint64_t dst, uint64_t src, uint64_t n, int device) const;
};

/// The CUDA driver's DeviceMemory, or nullptr (with the reason in `why`) when this build or
/// host has no CUDA: then every pointer is host memory.
std::shared_ptr<DeviceMemory> cuda_device_memory(std::string* why = nullptr);

}  // namespace caf_rdma
