#include "components/device_memory.h"

#include <cstdio>

#include "components/gpu_registration.h"
#include "primitives/cuda_driver.h"

namespace caf_rdma {

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

private:
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
