#include "primitives/memory_kind.h"

namespace caf_rdma {

const char* to_string(MemoryKind kind) {
  switch (kind) {
    case MemoryKind::kHost:
      return "host";
    case MemoryKind::kPinnedHost:
      return "pinned host";
    case MemoryKind::kDevice:
      return "device";
    case MemoryKind::kManaged:
      return "managed";
  }
  return "unknown";
}

PointerInfo classify_pointer_attributes(unsigned memory_type, bool is_managed, int ordinal,
                                        uint64_t range_start, uint64_t range_size) {
  PointerInfo info;
  if (is_managed || memory_type == kCuMemoryTypeUnified)
    info.kind = MemoryKind::kManaged;
  else if (memory_type == kCuMemoryTypeDevice || memory_type == kCuMemoryTypeArray)
    info.kind = MemoryKind::kDevice;
  else if (memory_type == kCuMemoryTypeHost)
    info.kind = MemoryKind::kPinnedHost;
  else
    return info;  // unknown to CUDA: plain host memory
  info.device = info.kind == MemoryKind::kPinnedHost ? -1 : ordinal;
  info.base = range_start;
  info.size = range_size;
  return info;
}

}  // namespace caf_rdma
