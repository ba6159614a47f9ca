#include "components/bounce_buffer.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace caf_rdma {

Result<std::unique_ptr<BounceBuffer>> BounceBuffer::allocate(uint64_t size,
                                                             std::shared_ptr<DeviceMemory> gpu,
                                                             int device) {
  if (size == 0)
    return Error(ErrorCode::kInvalidArgument, "a bounce buffer of 0 bytes");
  long page = ::sysconf(_SC_PAGESIZE);
  auto align = static_cast<size_t>(page > 0 ? page : 4096);
  void* p = nullptr;
  if (::posix_memalign(&p, align, size) != 0 || p == nullptr)
    return Error(ErrorCode::kResourceExhausted,
                 "cannot allocate a bounce buffer of " + std::to_string(size) + " bytes");
  std::unique_ptr<BounceBuffer> b(new BounceBuffer());
  b->data_ = static_cast<uint8_t*>(p);
  b->size_ = size;
  if (gpu) {
    Status st = gpu->page_lock(p, size, device);
    if (st.ok()) {
      b->gpu_ = std::move(gpu);
      b->device_ = device;
      b->locked_ = true;
    } else {
      b->lock_error_ = st.error().to_string();
    }
  }
  return b;
}

BounceBuffer::~BounceBuffer() {
  if (locked_)
    (void)gpu_->page_unlock(data_, device_);  // nothing to do about a failure at this point
  std::free(data_);  // NOLINT(cppcoreguidelines-no-malloc): posix_memalign's memory
}

}  // namespace caf_rdma
