// FakeDeviceMemory: a stand-in for GPU memory on machines without a GPU, for testing the
// manager's GPU logic (classification, staging through bounce buffers, owner-assisted access)
// in CI. "GPU memory" is host memory the test declares as such; copies are memcpy, counted, so
// a test can prove the staging copies happened. `direct` decides whether the NIC "can" register
// it: true registers the host pages with ibv_reg_mr (what nvidia_peermem does for real GPU
// pages), false refuses like Soft-RoCE. The real CUDA path is tested by tests/gpu/ on GPU hosts.
#pragma once

#include <atomic>
#include <cstring>
#include <map>
#include <mutex>

#include "components/device_memory.h"

namespace caf_rdma::testing {

class FakeDeviceMemory : public DeviceMemory {
public:
  explicit FakeDeviceMemory(bool direct) : direct_(direct) {}

  /// Declares [addr, addr + size) to be memory of GPU `device`.
  void add_gpu_range(const void* addr, uint64_t size, int device = 0) {
    std::lock_guard<std::mutex> g(mu_);
    ranges_[reinterpret_cast<uint64_t>(addr)] = {size, device};
  }
  void fail_copies(bool fail) { fail_copies_ = fail; }
  /// Makes `classify` fail like a driver that cannot tell (e.g. deinitialized at exit).
  void fail_classify(bool fail) { fail_classify_ = fail; }

  std::string name() const override { return "fake-gpu (test)"; }

  Result<PointerInfo> classify(uint64_t addr, uint64_t) const override {
    if (fail_classify_)
      return Error(ErrorCode::kCuda,
                   "fake cuPointerGetAttributes failed: CUDA_ERROR_DEINITIALIZED (test)");
    std::lock_guard<std::mutex> g(mu_);
    auto it = ranges_.upper_bound(addr);
    if (it == ranges_.begin())
      return PointerInfo{};
    --it;
    if (addr >= it->first + it->second.first)
      return PointerInfo{};
    PointerInfo info;
    info.kind = MemoryKind::kDevice;
    info.device = it->second.second;
    info.base = it->first;
    info.size = it->second.first;
    return info;
  }

  Status copy_to_host(void* dst, uint64_t src, uint64_t n, int) const override {
    if (fail_copies_)
      return Error(ErrorCode::kCuda, "fake cuMemcpyDtoHAsync failed (test)");
    std::memcpy(dst, reinterpret_cast<const void*>(src), n);
    to_host_bytes += n;
    return {};
  }

  Status copy_to_device(uint64_t dst, const void* src, uint64_t n, int) const override {
    if (fail_copies_)
      return Error(ErrorCode::kCuda, "fake cuMemcpyHtoDAsync failed (test)");
    std::memcpy(reinterpret_cast<void*>(dst), src, n);
    to_device_bytes += n;
    return {};
  }

  Result<std::shared_ptr<MemoryRegion>> register_direct(const std::shared_ptr<ProtectionDomain>& pd,
                                                        const PointerInfo&, uint64_t addr,
                                                        uint64_t size,
                                                        Access access) const override {
    if (!direct_)
      return Error(ErrorCode::kIbverbsCall,
                   "cannot register GPU memory with the NIC: dmabuf: not supported (fake); "
                   "nvidia_peermem: not loaded (fake)");
    return MemoryRegion::register_memory(pd, reinterpret_cast<void*>(addr), size, access);
  }

  mutable std::atomic<uint64_t> to_host_bytes{0};
  mutable std::atomic<uint64_t> to_device_bytes{0};

private:
  bool direct_;
  std::atomic<bool> fail_copies_{false};
  std::atomic<bool> fail_classify_{false};
  mutable std::mutex mu_;
  std::map<uint64_t, std::pair<uint64_t, int>> ranges_;
};

}  // namespace caf_rdma::testing
