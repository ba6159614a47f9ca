// HostMemory: host memory the library allocates for a buffer (RdmaClient::allocate_buffer), in
// the form every transport moves fastest: whole pages, and for 2 MiB or more, 2 MiB-aligned
// and advised to transparent huge pages (MADV_HUGEPAGE), so that the kernel backs it with
// 2 MiB pages where it can. Pinning is per page: cross-memory attach (cross_memory.h) pins each
// page of the other process for every copy, and an RDMA registration pins each page once and
// gives the NIC one translation per page. A 64 MiB same-host copy into or out of such memory
// measured 13.3-13.6 GB/s against 8.1 GB/s for the same copy with 4 KiB pages (memcpy of 64
// MiB: about 10 GB/s, same run, same 2-core host). No CAF.
//
// Invariants:
//  1. data() is page-aligned, and 2 MiB-aligned when size() is at least kHugePage; the bytes
//     are zero when allocated (anonymous memory).
//  2. The advice is a hint: where the kernel has no transparent huge pages (or they are set to
//     "never") the memory works the same with 4 KiB pages; huge_pages() says whether the
//     kernel took the advice, not which pages it gave.
//  3. The mapping goes when the HostMemory goes, unless leak() was called (memory a transfer
//     may still use must never be unmapped: see RegisteredBuffer invariant 5).
#pragma once

#include <cstdint>

#include "primitives/status.h"

namespace caf_rdma {

class HostMemory {
public:
  /// Transparent huge page size on x86-64 and arm64 (4 KiB base pages).
  static constexpr uint64_t kHugePage = 2ull << 20;

  /// `size` bytes (> 0) of zeroed, private, anonymous memory (invariant 1). Errors:
  /// invalid_argument for size 0, resource_exhausted (with mmap's errno string and the size)
  /// when the system has no such memory for it.
  static Result<HostMemory> allocate(uint64_t size);

  HostMemory() = default;
  ~HostMemory();
  HostMemory(HostMemory&& other) noexcept;
  HostMemory& operator=(HostMemory&& other) noexcept;
  HostMemory(const HostMemory&) = delete;
  HostMemory& operator=(const HostMemory&) = delete;

  uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }
  /// Whether MADV_HUGEPAGE was accepted for the memory (invariant 2).
  bool huge_pages() const { return huge_pages_; }
  /// Gives the mapping up without unmapping it (invariant 3): it stays for the process's life.
  void leak();

private:
  void unmap();

  uint8_t* data_ = nullptr;  ///< the mapping's start (its slack before and after is unmapped)
  uint64_t size_ = 0;
  bool huge_pages_ = false;
};

}  // namespace caf_rdma
