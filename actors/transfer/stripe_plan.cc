// plan_slices (see stripe_plan.h).
#include "actors/transfer/stripe_plan.h"

#include <algorithm>

namespace caf_rdma::detail {

std::vector<SliceSpan> plan_slices(uint64_t length, size_t lanes) {
  std::vector<SliceSpan> out;
  if (length == 0 || lanes == 0)
    return out;
  const uint64_t units = (length + kSliceAlign - 1) / kSliceAlign;  // the last may be partial
  const uint64_t n = std::min<uint64_t>(lanes, units);
  uint64_t at = 0;
  for (uint64_t i = 0; i < n; ++i) {
    // Invariant 3: the first (units % n) slices take one unit more.
    uint64_t take = (units / n + (i < units % n ? 1 : 0)) * kSliceAlign;
    take = std::min(take, length - at);
    out.push_back(SliceSpan{at, take});
    at += take;
  }
  return out;
}

}  // namespace caf_rdma::detail
