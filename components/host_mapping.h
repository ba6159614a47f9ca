// Whether host memory a caller hands in is mapped in this process with the access its buffer
// grants, read from /proc/self/maps. An RDMA device checks this itself (ibv_reg_mr pins the
// pages and fails with EFAULT otherwise); a node without a device serves peers by copying with
// memcpy, so a bogus pointer registered there would crash the process at its first transfer
// instead of failing its registration with a clear error.
//
// Invariants: `check_mapped` accepts a range only when every byte of it lies in a mapping that
// is readable, and writable too when write access is asked for; a gap, a guard page or a
// read-only mapping is named in the error with its address. The check is of the moment it runs
// (memory the caller unmaps later is the caller's use after free).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "primitives/status.h"

namespace caf_rdma {

/// One line of /proc/<pid>/maps: [start, end) with its permissions.
struct HostMapping {
  uint64_t start = 0;
  uint64_t end = 0;
  bool readable = false;
  bool writable = false;
};

/// The mappings of a /proc/<pid>/maps text, in its order (ascending addresses). A line that
/// does not start with "<hex>-<hex> <perms>" is an invalid_argument error naming the line.
Result<std::vector<HostMapping>> parse_host_mappings(std::string_view maps);

/// OK when every byte of [addr, addr + size) lies in `mappings` with read access (and write
/// access when `writable`); otherwise invalid_argument naming the first byte that does not and
/// why (not mapped, or mapped without that access). `mappings` must be sorted by address.
Status check_mapped(const std::vector<HostMapping>& mappings, uint64_t addr, uint64_t size,
                    bool writable);

/// `check_mapped` against this process's /proc/self/maps. When that file cannot be read
/// (a sandbox without /proc), the range is accepted: the check may never refuse valid memory.
Status check_host_range(uint64_t addr, uint64_t size, bool writable);

}  // namespace caf_rdma
