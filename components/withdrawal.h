// Withdrawal: the owner's word to its stream workers that a buffer they move bytes of was
// released (the release rule, docs/guarantees.md "Release"). No CAF.
//
// Invariants:
//  1. Set once, by the owner's manager, when it releases the buffer; never cleared.
//  2. A worker that sees it set touches the buffer no more after the socket call under way
//     (withdrawable_move.h) or the same-host piece under way (cross_memory.h invariant 5), and
//     its transfer ends with
//     released_midway_error: the one text of such an end.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "primitives/status.h"

namespace caf_rdma {

/// Null: never withdrawn.
using Withdrawal = std::shared_ptr<const std::atomic<bool>>;

inline bool withdrawn(const Withdrawal& w) {
  return w && w->load(std::memory_order_acquire);
}

/// Invariant 2: a transfer its owner's release stopped after `moved` of `length` bytes.
Error released_midway_error(uint64_t moved, uint64_t length);
/// Whether `st` is such an end (its code is `released`: on the stream channel nothing else
/// fails with it, a release refusing a request before it starts included).
inline bool ended_by_withdrawal(const Status& st) {
  return !st.ok() && st.error().code() == ErrorCode::kReleased;
}

}  // namespace caf_rdma
