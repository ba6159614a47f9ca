// What kind of memory a pointer refers to (host, pinned host, GPU device, CUDA managed) and
// the GPU and allocation it belongs to. The mapping from the CUDA driver's pointer attributes
// is pure, so it is tested without a GPU; `CudaDriver::pointer_info` queries the attributes.
#pragma once

#include <cstdint>

namespace caf_rdma {

enum class MemoryKind : uint8_t {
  kHost = 0,        ///< pageable host memory (or any pointer CUDA does not know)
  kPinnedHost = 1,  ///< host memory allocated or registered with CUDA (page-locked)
  kDevice = 2,      ///< GPU memory (cuMemAlloc / cudaMalloc)
  kManaged = 3,     ///< CUDA managed (unified) memory
};

const char* to_string(MemoryKind kind);

struct PointerInfo {
  MemoryKind kind = MemoryKind::kHost;
  int device = -1;    ///< CUDA device ordinal; -1 for host memory
  uint64_t base = 0;  ///< start of the allocation holding the pointer (0 when unknown)
  uint64_t size = 0;  ///< its size (0 when unknown)

  bool on_gpu() const { return kind == MemoryKind::kDevice || kind == MemoryKind::kManaged; }
};

/// CU_MEMORYTYPE_* values of the driver API (cuda.h), as cuPointerGetAttributes reports them.
constexpr unsigned kCuMemoryTypeUnknown = 0;  // not a CUDA pointer: attributes stay zero
constexpr unsigned kCuMemoryTypeHost = 1;
constexpr unsigned kCuMemoryTypeDevice = 2;
constexpr unsigned kCuMemoryTypeArray = 3;
constexpr unsigned kCuMemoryTypeUnified = 4;

/// Maps CU_POINTER_ATTRIBUTE_MEMORY_TYPE, _IS_MANAGED, _DEVICE_ORDINAL, _RANGE_START_ADDR and
/// _RANGE_SIZE of one pointer to a PointerInfo.
PointerInfo classify_pointer_attributes(unsigned memory_type, bool is_managed, int ordinal,
                                        uint64_t range_start, uint64_t range_size);

}  // namespace caf_rdma
