// LocalCopyPath: an op between two buffers of this node that RDMA may not (or cannot) move:
// the owner's checks of the remote handle (the same as a peer's access gets), then a copy
// (memmove for host memory; GPU memory through a host buffer a chunk at a time), or an atomic
// by the CPU.
//
// Invariants:
//  1. The remote handle is checked as any peer's access is (ManagerState::owner_access):
//     live buffer, its own secret, writable for a write, range inside it.
//  2. Overlapping ranges come out right: memmove, or chunks copied back to front when the
//     destination lies after the source.
//  3. At most kLocalCopyChunk bytes of host memory per copy that involves GPU memory.
//  4. An atomic is applied as the owner applies a peer's (BufferTable::apply_atomic: the same
//     checks, one CPU atomic), then its old value is copied into the local range.
#pragma once

#include "actors/transfer/transfer_path.h"

namespace caf_rdma::detail {

class LocalCopyPath final : public TransferPath {
public:
  using TransferPath::TransferPath;

  void start(OpId id) override;
};

}  // namespace caf_rdma::detail
