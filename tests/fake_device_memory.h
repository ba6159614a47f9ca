// FakeDeviceMemory: a stand-in for GPU memory on machines without a GPU, for testing the
// manager's GPU logic (classification, staging through bounce buffers, owner-assisted access)
// in CI. "GPU memory" is host memory the test declares as such; copies are memcpy, counted, so
// a test can prove the staging copies happened. `direct` decides whether the NIC "can" register
// it: true registers the host pages with ibv_reg_mr (what nvidia_peermem does for real GPU
// pages), false refuses like Soft-RoCE. Page locks are recorded, and each copy counts its bytes
// as pinned or pageable by its host side. Exports between processes (CUDA IPC) are the GPU
// range's address (the nodes of a test share one process), counted as they are opened and
// closed. The real CUDA path is tested by tests/gpu/ on GPU hosts.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <iterator>
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
  void fail_copies(bool fail) {
    fail_copies_ = fail;
    counting_ = false;
  }
  /// The next `n` copies (either way) succeed, every later one fails: a copy error in the
  /// middle of a chunked transfer. fail_copies(false) ends it.
  void fail_copies_after(uint64_t n) {
    copies_left_ = n;
    counting_ = true;
    fail_copies_ = true;
  }
  /// Runs `f` after each copy between host and GPU memory that succeeded, on the copying thread:
  /// a test's moment to act in the middle of a transfer (empty: nothing).
  void after_each_copy(std::function<void()> f) {
    std::lock_guard<std::mutex> g(mu_);
    after_copy_ = std::move(f);
  }
  /// Makes page_lock fail like a driver that refuses cuMemHostRegister.
  void fail_locks(bool fail) { fail_locks_ = fail; }
  /// Makes export_range / import_range fail like a driver that refuses CUDA IPC (pool or VMM
  /// memory, no IPC between these GPUs).
  void fail_exports(bool fail) { fail_exports_ = fail; }
  void fail_imports(bool fail) { fail_imports_ = fail; }
  /// Holds every copy between GPUs (copy_between_gpus) until hold_gpu_copies(false): a copy
  /// under way for as long as a test needs. wait_held(n) waits (up to 20 s) until n are held.
  void hold_gpu_copies(bool hold) {
    std::lock_guard<std::mutex> g(mu_);
    hold_ = hold;
    held_cv_.notify_all();
  }
  bool wait_held(uint64_t n) const {
    std::unique_lock<std::mutex> g(mu_);
    return held_cv_.wait_for(g, std::chrono::seconds(20), [&] { return held_ >= n; });
  }
  /// Host ranges page-locked now.
  size_t locked_buffers() const {
    std::lock_guard<std::mutex> g(mu_);
    return locked_.size();
  }
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
    if (copy_fails())
      return Error(ErrorCode::kCuda, "fake cuMemcpyDtoHAsync failed (test)");
    std::memcpy(dst, reinterpret_cast<const void*>(src), n);
    to_host_bytes += n;
    count_host_side(dst, n);
    copied();
    return {};
  }

  Status copy_to_device(uint64_t dst, const void* src, uint64_t n, int) const override {
    if (copy_fails())
      return Error(ErrorCode::kCuda, "fake cuMemcpyHtoDAsync failed (test)");
    std::memcpy(reinterpret_cast<void*>(dst), src, n);
    to_device_bytes += n;
    count_host_side(src, n);
    copied();
    return {};
  }

  Status page_lock(void* p, uint64_t n, int) const override {
    if (fail_locks_)
      return Error(ErrorCode::kCuda,
                   "fake cuMemHostRegister failed: CUDA_ERROR_NOT_PERMITTED (test)");
    std::lock_guard<std::mutex> g(mu_);
    if (!locked_.emplace(reinterpret_cast<uint64_t>(p), n).second)
      return Error(ErrorCode::kCuda, "fake cuMemHostRegister: already locked (test)");
    return {};
  }

  Status page_unlock(void* p, int) const override {
    std::lock_guard<std::mutex> g(mu_);
    if (locked_.erase(reinterpret_cast<uint64_t>(p)) == 0) {
      ++bad_unlocks;
      return Error(ErrorCode::kCuda, "fake cuMemHostUnregister: not locked (test)");
    }
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

  Result<GpuExport> export_range(uint64_t addr, uint64_t, int) const override {
    if (fail_exports_)
      return Error(ErrorCode::kCuda,
                   "fake cuIpcGetMemHandle failed: CUDA_ERROR_INVALID_VALUE "
                   "(test)");
    CAF_RDMA_ASSIGN_OR_RETURN(PointerInfo info, classify(addr, 1));
    if (info.kind != MemoryKind::kDevice)
      return Error(ErrorCode::kInvalidArgument, "fake export of host memory (test)");
    GpuExport out;
    out.handle.assign(kExportMagic, kExportMagic + 4);
    out.handle.resize(12);
    std::memcpy(out.handle.data() + 4, &info.base, 8);
    out.offset = addr - info.base;
    ++exports;
    return out;
  }

  Result<GpuImport> import_range(const std::vector<uint8_t>& handle, int) const override {
    if (fail_imports_)
      return Error(ErrorCode::kCuda,
                   "fake cuIpcOpenMemHandle failed: CUDA_ERROR_MAP_FAILED "
                   "(test)");
    if (handle.size() != 12 || std::memcmp(handle.data(), kExportMagic, 4) != 0)
      return Error(ErrorCode::kInvalidArgument, "not a fake export (test)");
    GpuImport out;
    std::memcpy(&out.base, handle.data() + 4, 8);
    out.mapped = true;
    ++imports_opened;
    ++imports_open;
    return out;
  }

  Status close_import(const GpuImport& import, int) const override {
    if (import.mapped)
      --imports_open;
    return {};
  }

  Status copy_between_gpus(uint64_t dst, uint64_t src, uint64_t n, int) const override {
    {
      std::unique_lock<std::mutex> g(mu_);
      ++held_;
      held_cv_.notify_all();
      held_cv_.wait(g, [&] { return !hold_; });
    }
    if (copy_fails())
      return Error(ErrorCode::kCuda, "fake cuMemcpyDtoDAsync failed (test)");
    std::memcpy(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), n);
    between_gpus_bytes += n;
    return {};
  }

  mutable std::atomic<uint64_t> to_host_bytes{0};
  mutable std::atomic<uint64_t> to_device_bytes{0};
  /// Bytes copied with their host side in page-locked (pinned) or pageable memory.
  mutable std::atomic<uint64_t> pinned_copy_bytes{0};
  mutable std::atomic<uint64_t> pageable_copy_bytes{0};
  mutable std::atomic<uint64_t> bad_unlocks{0};
  /// CUDA IPC: exports made, imports opened (in all, and not closed yet), bytes copied GPU to GPU.
  mutable std::atomic<uint64_t> exports{0};
  mutable std::atomic<uint64_t> imports_opened{0};
  mutable std::atomic<int64_t> imports_open{0};
  mutable std::atomic<uint64_t> between_gpus_bytes{0};

private:
  bool copy_fails() const {
    if (!fail_copies_)
      return false;
    if (!counting_)
      return true;
    uint64_t left = copies_left_.load();
    while (left > 0 && !copies_left_.compare_exchange_weak(left, left - 1)) {
    }
    return left == 0;
  }
  void copied() const {
    std::function<void()> f;
    {
      std::lock_guard<std::mutex> g(mu_);
      f = after_copy_;
    }
    if (f)
      f();
  }
  void count_host_side(const void* p, uint64_t n) const {
    auto a = reinterpret_cast<uint64_t>(p);
    std::lock_guard<std::mutex> g(mu_);
    auto it = locked_.upper_bound(a);
    bool pinned = it != locked_.begin() && a + n <= std::prev(it)->first + std::prev(it)->second;
    (pinned ? pinned_copy_bytes : pageable_copy_bytes) += n;
  }

  bool direct_;
  std::atomic<bool> fail_copies_{false};
  std::atomic<bool> counting_{false};  // fail_copies_after: fail only once copies_left_ is 0
  mutable std::atomic<uint64_t> copies_left_{0};
  std::atomic<bool> fail_locks_{false};
  std::atomic<bool> fail_exports_{false};
  std::atomic<bool> fail_imports_{false};
  static constexpr char kExportMagic[4] = {'F', 'I', 'P', 'C'};
  std::atomic<bool> fail_classify_{false};
  mutable std::mutex mu_;
  mutable std::condition_variable held_cv_;
  bool hold_ = false;                 // hold_gpu_copies
  mutable uint64_t held_ = 0;         // copies between GPUs that came to the hold (held or not)
  std::function<void()> after_copy_;  // after_each_copy
  std::map<uint64_t, std::pair<uint64_t, int>> ranges_;
  mutable std::map<uint64_t, uint64_t> locked_;  // page-locked host ranges: start -> size
};

}  // namespace caf_rdma::testing
