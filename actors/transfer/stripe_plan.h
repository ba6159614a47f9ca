// The slices of one striped RDMA op (actors/manager/rails.h): where each of `lanes` queue pairs
// starts and how much it moves. Pure.
//
// Invariants:
//  1. The slices cover [0, length) exactly once, in order, with no empty slice.
//  2. Every slice but the last starts and ends on a multiple of kSliceAlign (whole pages of
//     both sides' memory per queue pair); a length too short for `lanes` such slices gets fewer.
//  3. Slices differ in length by at most kSliceAlign (the lanes finish together).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace caf_rdma::detail {

constexpr uint64_t kSliceAlign = 64 << 10;

struct SliceSpan {
  uint64_t offset = 0;
  uint64_t length = 0;
};

/// `length` bytes over at most `lanes` queue pairs (at least one slice for length > 0).
std::vector<SliceSpan> plan_slices(uint64_t length, size_t lanes);

}  // namespace caf_rdma::detail
