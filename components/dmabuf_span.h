// The part of GPU memory to export as a dmabuf when registering [addr, addr + size) with the
// NIC. The GPU driver (cuMemGetHandleForAddressRange) exports only host-page-aligned ranges,
// while an allocation's start (CU_POINTER_ATTRIBUTE_RANGE_START_ADDR) is only 256-byte aligned
// and pool or VMM memory (cudaMallocAsync, expandable segments) has no useful "whole
// allocation". So the export covers exactly the pages of the requested range, and the region
// maps [offset, offset + size) of it. Pure arithmetic: no CUDA, no ibverbs.
//
// Invariants: start and length are multiples of the page; start <= addr;
// addr + size <= start + length; offset == addr - start < page.
#pragma once

#include <cstdint>

#include "primitives/status.h"

namespace caf_rdma {

struct DmabufSpan {
  uint64_t start = 0;   ///< first byte of the export (page-aligned)
  uint64_t length = 0;  ///< bytes exported (whole pages)
  uint64_t offset = 0;  ///< where `addr` lies in the export (ibv_reg_dmabuf_mr's offset)
};

/// The export for [addr, addr + size) with pages of `page` bytes (a power of two): an
/// invalid_argument error for size 0 or a page that is not a power of two, out_of_bounds when
/// the range wraps around the address space.
Result<DmabufSpan> dmabuf_span(uint64_t addr, uint64_t size, uint64_t page);

}  // namespace caf_rdma
