// Splitting one transfer into work requests: pure logic, no ibverbs calls (tested natively).
#pragma once

#include <cstdint>
#include <vector>

#include "primitives/status.h"

namespace caf_rdma {

/// A piece of local registered memory.
struct LocalSegment {
  uint64_t addr = 0;
  uint64_t length = 0;
  uint32_t lkey = 0;
};

/// One planned work request: a gather/scatter list and where it lands remotely.
struct PlannedSge {
  uint64_t addr = 0;
  uint32_t length = 0;
  uint32_t lkey = 0;
};

struct PlannedWorkRequest {
  uint64_t remote_addr = 0;
  uint64_t length = 0;  ///< sum of the SGE lengths
  std::vector<PlannedSge> sges;
};

/// Plans the work requests for moving `segments` (in order) to/from consecutive remote bytes
/// starting at `remote_addr`: each request carries at most `max_message` bytes and `max_sge`
/// SGEs, and each SGE at most 2^31 bytes. Errors: kInvalidArgument for max_message or max_sge of
/// 0, or no bytes at all.
Result<std::vector<PlannedWorkRequest>> plan_work_requests(
    const std::vector<LocalSegment>& segments, uint64_t remote_addr, uint64_t max_message,
    uint32_t max_sge);

}  // namespace caf_rdma
