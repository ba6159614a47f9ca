// CudaDriver: the CUDA driver API (libcuda.so.1), loaded at run time with dlopen, so one binary
// runs on hosts with and without GPUs. Compiled against /usr/local/cuda's cuda.h under
// `--config=cuda`; without it every call reports that CUDA support was not built.
//
// All calls are thread-safe. Calls that need a context make the device's primary context
// current in the calling thread first.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "primitives/memory_kind.h"
#include "primitives/status.h"

namespace caf_rdma {

class CudaDriver {
public:
  /// The process-wide driver, loaded and initialized (cuInit) on first use. Errors (kCuda):
  /// built without --config=cuda; libcuda.so.1 not found (no NVIDIA driver); cuInit failed (e.g.
  /// no GPU), with CUDA's error name and string.
  static Result<CudaDriver*> get();
  /// True when this build contains the CUDA paths (--config=cuda).
  static bool built_with_cuda();

  /// Kind, GPU and allocation range of `p` (kHost for memory CUDA does not know).
  Result<PointerInfo> pointer_info(const void* p) const;
  /// A dmabuf file descriptor for [base, base + size) of memory of GPU `device` (the caller
  /// closes it). Makes that GPU's context current first: the export needs one, and the
  /// calling thread (an actor's worker) may have none.
  Result<int> dmabuf_fd(uint64_t base, uint64_t size, int device) const;
  /// Sets CU_POINTER_ATTRIBUTE_SYNC_MEMOPS on the allocation around `addr` (GPU `device`):
  /// every CUDA memory operation on it then completes before the call returns, so a NIC
  /// reading it after a cudaMemcpy/cudaMemset sees the bytes written (GPUDirect RDMA guide,
  /// synchronization and memory ordering). Registered GPU memory always has it.
  Status set_sync_memops(uint64_t addr, int device) const;
  /// Whether SYNC_MEMOPS is set on the allocation around `addr` (tests).
  Result<bool> sync_memops(uint64_t addr) const;
  /// Copies between device and host memory on a stream of `device`, waiting for the copy.
  Status copy_to_host(void* dst, uint64_t src, uint64_t n, int device) const;
  Status copy_to_device(uint64_t dst, const void* src, uint64_t n, int device) const;
  /// Copies between two allocations of `device` (cuMemcpyDtoDAsync), waiting for the copy.
  Status copy_on_device(uint64_t dst, uint64_t src, uint64_t n, int device) const;
  /// CUDA IPC (legacy, for cuMemAlloc memory): the handle of the allocation starting at `base`
  /// (kIpcHandleBytes), opened in another process of this host with ipc_open (mapped into
  /// `device`'s context there, peer access enabled as needed) and closed with ipc_close, which
  /// must come before the exporter frees the allocation.
  static constexpr size_t kIpcHandleBytes = 64;
  Result<std::vector<uint8_t>> ipc_handle(uint64_t base, int device) const;
  Result<uint64_t> ipc_open(const std::vector<uint8_t>& handle, int device) const;
  Status ipc_close(uint64_t p, int device) const;
  /// Page-locks host memory [p, p + n) for every GPU (cuMemHostRegister, PORTABLE), with
  /// `device`'s context current: copies between it and GPU memory then run as DMA, without the
  /// driver's copy through its own pinned staging memory. Undone by host_unregister(p, device).
  Status host_register(void* p, uint64_t n, int device) const;
  Status host_unregister(void* p, int device) const;
  int device_count() const;
  /// PCI bus id of `device`, e.g. "0000:3b:00.0" (lower case).
  Result<std::string> pci_bus_id(int device) const;

  // Allocation, for tests and examples.
  Result<uint64_t> alloc_device(uint64_t n, int device) const;
  Result<uint64_t> alloc_managed(uint64_t n, int device) const;
  Status free_device(uint64_t p) const;

  struct Api;  // the loaded entry points (cuda_driver.cc)
  ~CudaDriver();

private:
  CudaDriver() = default;
  std::unique_ptr<Api> api_;
};

}  // namespace caf_rdma
