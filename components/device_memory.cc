#include "components/device_memory.h"

#include <array>
#include <cstdio>
#include <cstring>

#include "components/gpu_registration.h"
#include "components/secure_random.h"
#include "primitives/cuda_driver.h"

namespace caf_rdma {

namespace {

Error no_exports(const DeviceMemory& d) {
  return Error(ErrorCode::kCuda,
               d.name() + " cannot share GPU memory between processes (no CUDA IPC)");
}

}  // namespace

Result<GpuExport> DeviceMemory::export_range(uint64_t, uint64_t, int) const {
  return no_exports(*this);
}
Result<GpuImport> DeviceMemory::import_range(const std::vector<uint8_t>&, int) const {
  return no_exports(*this);
}
Status DeviceMemory::close_import(const GpuImport&, int) const {
  return no_exports(*this);
}
Status DeviceMemory::copy_between_gpus(uint64_t, uint64_t, uint64_t, int) const {
  return no_exports(*this);
}

namespace {

class CudaDeviceMemory : public DeviceMemory {
public:
  explicit CudaDeviceMemory(CudaDriver* cuda) : cuda_(cuda) {}

  std::string name() const override { return "cuda"; }

  Result<PointerInfo> classify(uint64_t addr, uint64_t) const override {
    return cuda_->pointer_info(reinterpret_cast<const void*>(addr));
  }

  Status copy_to_host(void* dst, uint64_t src, uint64_t n, int device) const override {
    return cuda_->copy_to_host(dst, src, n, device);
  }

  Status copy_to_device(uint64_t dst, const void* src, uint64_t n, int device) const override {
    return cuda_->copy_to_device(dst, src, n, device);
  }

  Status page_lock(void* p, uint64_t n, int device) const override {
    return cuda_->host_register(p, n, device);
  }

  Status page_unlock(void* p, int device) const override {
    return cuda_->host_unregister(p, device);
  }

  Result<std::shared_ptr<MemoryRegion>> register_direct(const std::shared_ptr<ProtectionDomain>& pd,
                                                        const PointerInfo& info, uint64_t addr,
                                                        uint64_t size,
                                                        Access access) const override {
    char what[96];
    std::snprintf(what, sizeof(what), "GPU %d memory 0x%llx+%llu", info.device,
                  static_cast<unsigned long long>(addr), static_cast<unsigned long long>(size));
    // Without SYNC_MEMOPS the NIC may read bytes an asynchronous copy has not written yet.
    if (Status st = cuda_->set_sync_memops(addr, info.device); !st.ok())
      return st.error().with_context(std::string("cannot register ") + what + " with the NIC");
    return register_first_that_works(gpudirect_attempts(*cuda_, pd, info, addr, size, access),
                                     what);
  }

  // An export: "CIPC", the exporter's process identity (16 random bytes: a pid alone may be
  // another pid namespace's), the allocation's base there (u64), then cuIpcGetMemHandle's
  // handle. A process cannot open its own handles: it takes the base.
  Result<GpuExport> export_range(uint64_t addr, uint64_t, int device) const override {
    CAF_RDMA_ASSIGN_OR_RETURN(PointerInfo info, classify(addr, 1));
    CAF_RDMA_ASSIGN_OR_RETURN(std::vector<uint8_t> h, cuda_->ipc_handle(info.base, device));
    GpuExport out;
    out.handle.resize(kHeader);
    std::memcpy(out.handle.data(), kMagic, 4);
    std::memcpy(out.handle.data() + 4, process_identity().data(), 16);
    std::memcpy(out.handle.data() + 20, &info.base, 8);
    out.handle.insert(out.handle.end(), h.begin(), h.end());
    out.offset = addr - info.base;
    return out;
  }

  Result<GpuImport> import_range(const std::vector<uint8_t>& handle, int device) const override {
    if (handle.size() != kHeader + CudaDriver::kIpcHandleBytes ||
        std::memcmp(handle.data(), kMagic, 4) != 0)
      return Error(ErrorCode::kInvalidArgument, "not a CUDA IPC export of caf-rdma (" +
                                                    std::to_string(handle.size()) + " bytes)");
    GpuImport out;
    std::memcpy(&out.base, handle.data() + 20, 8);
    if (std::memcmp(handle.data() + 4, process_identity().data(), 16) == 0)
      return out;  // this process's own allocation
    CAF_RDMA_ASSIGN_OR_RETURN(
        out.base,
        cuda_->ipc_open(std::vector<uint8_t>(handle.begin() + kHeader, handle.end()), device));
    out.mapped = true;
    return out;
  }

  Status close_import(const GpuImport& import, int device) const override {
    return import.mapped ? cuda_->ipc_close(import.base, device) : Status{};
  }

  Status copy_between_gpus(uint64_t dst, uint64_t src, uint64_t n, int device) const override {
    return cuda_->copy_on_device(dst, src, n, device);
  }

private:
  static constexpr char kMagic[4] = {'C', 'I', 'P', 'C'};
  static constexpr size_t kHeader = 28;
  /// Drawn once per process (secure_random.h).
  static const std::array<uint8_t, 16>& process_identity() {
    static const std::array<uint8_t, 16> id = [] {
      std::array<uint8_t, 16> bytes{};
      const uint64_t hi = secure_random_u64(), lo = secure_random_u64();
      std::memcpy(bytes.data(), &hi, 8);
      std::memcpy(bytes.data() + 8, &lo, 8);
      return bytes;
    }();
    return id;
  }
  CudaDriver* cuda_;
};

}  // namespace

std::shared_ptr<DeviceMemory> cuda_device_memory(std::string* why) {
  auto driver = CudaDriver::get();
  if (!driver.ok()) {
    if (why != nullptr)
      *why = driver.error().message();
    return nullptr;
  }
  return std::make_shared<CudaDeviceMemory>(*driver);
}

}  // namespace caf_rdma
