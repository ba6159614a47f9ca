// AtomicScratch: the local words the results of a queue pair's atomics (FETCH_ADD, CMP_SWAP)
// land in, one per atomic op in flight.
//
// Invariants:
//  1. The words are registered (one local-only region) by the first `ensure`, not before: a
//     queue pair that never runs an atomic registers nothing for them.
//  2. A slot belongs to at most one op at a time, from `acquire` to `release`; at most
//     kAtomicSlots atomics are in flight per queue pair, more wait for a slot.
//  3. The words never move while registered (one allocation, made by `ensure`).
//  4. Not thread-safe: its queue pair's mutex guards it.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "components/rdma_buffer.h"
#include "components/rdma_domain.h"
#include "primitives/status.h"

namespace caf_rdma::detail {

class AtomicScratch {
public:
  static constexpr int kAtomicSlots = 64;

  /// Allocates and registers the words on `domain` unless that was done already.
  Status ensure(RdmaDomain& domain);
  /// True once `ensure` succeeded.
  bool registered() const { return words_ != nullptr; }
  /// A free slot, or -1 when all are taken (or none were registered).
  int acquire();
  void release(int slot);
  /// The word of `slot`: the remote value before the atomic, once its op completed.
  uint64_t value(int slot) const;
  /// The scatter entry a work request writes `slot`'s result through.
  ibv_sge sge(int slot) const;

private:
  std::unique_ptr<uint64_t[]> words_;
  RdmaBuffer buffer_;
  std::vector<int> free_;
};

}  // namespace caf_rdma::detail
