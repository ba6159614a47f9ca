// BounceBuffer: host memory that GPU bytes pass through on their way to or from the NIC when
// the NIC cannot reach the GPU memory itself (rdma-staged transfers). Page-aligned, and
// page-locked for the GPUs' copy engines where the DeviceMemory can do it, so a copy in or out
// of the GPU is one DMA instead of the driver's copy through its own pinned staging memory.
//
// Invariants: data() is page-aligned and valid for size() bytes until destruction; a buffer
// that page_locked() is unlocked (with the GPU that locked it) before its memory is freed; the
// caller deregisters any NIC registration of it before destroying it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "components/device_memory.h"
#include "primitives/status.h"

namespace caf_rdma {

class BounceBuffer {
public:
  /// `size` bytes, page-locked through `gpu` (with GPU `device`'s context) when `gpu` is not
  /// null. A failed lock is not an error: the buffer stays pageable (copies are slower) and
  /// lock_error() says why. Errors: kInvalidArgument for size 0, kResourceExhausted when the
  /// memory cannot be allocated.
  static Result<std::unique_ptr<BounceBuffer>> allocate(uint64_t size,
                                                        std::shared_ptr<DeviceMemory> gpu,
                                                        int device);
  ~BounceBuffer();
  BounceBuffer(const BounceBuffer&) = delete;
  BounceBuffer& operator=(const BounceBuffer&) = delete;

  uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }
  bool page_locked() const { return locked_; }
  /// Why the lock failed ("" when locked, or when no DeviceMemory was given).
  const std::string& lock_error() const { return lock_error_; }

private:
  BounceBuffer() = default;

  uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
  std::shared_ptr<DeviceMemory> gpu_;
  int device_ = -1;
  bool locked_ = false;
  std::string lock_error_;
};

}  // namespace caf_rdma
