#include "components/staging_plan.h"

#include <algorithm>

namespace caf_rdma {

std::vector<StagingChunk> plan_staging(uint64_t length, uint64_t bounce_bytes) {
  std::vector<StagingChunk> out;
  if (bounce_bytes == 0)
    return out;
  out.reserve(length / bounce_bytes + 1);
  for (uint64_t off = 0; off < length; off += bounce_bytes)
    out.push_back(StagingChunk{off, std::min(bounce_bytes, length - off)});
  return out;
}

}  // namespace caf_rdma
