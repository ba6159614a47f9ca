#include "components/dmabuf_span.h"

#include <string>

namespace caf_rdma {

Result<DmabufSpan> dmabuf_span(uint64_t addr, uint64_t size, uint64_t page) {
  if (page == 0 || (page & (page - 1)) != 0)
    return Error(ErrorCode::kInvalidArgument,
                 "dmabuf export: page size " + std::to_string(page) + " is not a power of two");
  if (size == 0)
    return Error(ErrorCode::kInvalidArgument,
                 "dmabuf export of 0 bytes at " + std::to_string(addr));
  const uint64_t mask = page - 1;
  // The last byte, then the end of its page, must both fit in 64 bits.
  if (addr > UINT64_MAX - (size - 1) || ((addr + (size - 1)) | mask) == UINT64_MAX)
    return Error(ErrorCode::kOutOfBounds, "dmabuf export of " + std::to_string(size) +
                                              " bytes at " + std::to_string(addr) +
                                              " runs past the end of the address space");
  DmabufSpan s;
  s.start = addr & ~mask;
  const uint64_t end = ((addr + (size - 1)) | mask) + 1;  // one past the last page
  s.length = end - s.start;
  s.offset = addr - s.start;
  return s;
}

}  // namespace caf_rdma
