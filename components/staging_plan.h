// Staging: moving GPU memory that the NIC cannot register through a registered host bounce
// buffer, one chunk at a time (copy to host + RDMA WRITE, or RDMA READ + copy to the GPU).
// The planner is pure: which pieces of a transfer go through a bounce buffer of a given size.
#pragma once

#include <cstdint>
#include <vector>

namespace caf_rdma {

struct StagingChunk {
  uint64_t offset = 0;  ///< from the start of the transfer
  uint64_t length = 0;  ///< at most the bounce buffer's size
};

/// Splits `length` bytes into consecutive chunks of at most `bounce_bytes` (> 0); empty for 0.
std::vector<StagingChunk> plan_staging(uint64_t length, uint64_t bounce_bytes);

}  // namespace caf_rdma
