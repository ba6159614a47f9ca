// StagedPath: RDMA through page-locked bounce buffers, for GPU memory the local NIC cannot
// register: a write copies each chunk out of the GPU into a bounce buffer and the NIC moves it
// from there; a read lands in the bounce buffer and is copied into the GPU. It is the RDMA path
// (rdma_path.h: the QP, errors, the owner's answers, the deadline) with its own posting and
// completion.
//
// Invariants (manager invariant 9):
//  1. An op holds one bounce buffer (a slot), used as staging_halves() halves, chunk i in half
//     i % 2, so the GPU copy of one chunk runs while the NIC moves the other; chunks may
//     complete in any order (each completion names its chunk).
//  2. The slot goes back, and the op is answered, only once no chunk of it is on the NIC
//     (completed, flushed, or its QP destroyed): no later transfer's bytes meet a late DMA.
//  3. An op succeeds only when every chunk moved; it is never retried (its first chunks may
//     have moved), and once a chunk was posted it is never rerouted to the fallback.
//  4. At most staging_buffers slots exist; ops beyond wait for one by class, earliest deadline
//     first within one (manager invariant 25; their timeout still runs).
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "actors/transfer/rdma_path.h"
#include "components/bounce_buffer.h"
#include "components/class_queue.h"
#include "components/rdma_buffer.h"
#include "components/staging_plan.h"

namespace caf_rdma::detail {

class StagedPath final : public RdmaPath {
public:
  using RdmaPath::RdmaPath;

  void start(OpId id) override;
  void completed(OpId id, TransferOutcome outcome, OpFault fault, uint32_t chunk) override;
  /// The op ended: its slot (the NIC is done with it) goes to the next op waiting for one.
  void forget(OpId id) override;
  /// Whether a chunk of the op was posted (then it cannot take another path: invariant 3).
  bool posted_any(OpId id) const;
  /// The op takes another path (nothing of it was posted): its slot is freed now and handed
  /// to a waiter from the next message (StagingFreed), so rerouted waiters do not nest.
  void withdraw(OpId id);
  /// StagingFreed: free slots go to the ops waiting for one.
  void slots_freed();
  /// Manager invariant 8: the device is gone, and with it every bounce buffer's registration.
  void drop_device();
  /// Bounce buffers an op holds now, and all that exist (ManagerTelemetry).
  uint64_t slots_busy() const;
  uint64_t slots_made() const { return slots_.size(); }

private:
  struct Slot {
    std::unique_ptr<BounceBuffer> memory;  // destroyed after `rdma` (its registration)
    RdmaBuffer rdma;
    bool busy = false;
  };
  struct StagedOp : NicUse {
    int slot = -1;  ///< bounce buffer held, -1 while waiting for one
    std::vector<StagingChunk> chunks;
    size_t next_chunk = 0;       ///< the next chunk to post
    size_t chunks_done = 0;      ///< chunks moved (and, for a read, copied into the GPU)
    uint32_t chunks_on_nic = 0;  ///< chunks posted and not completed: the NIC may use the slot
    bool half_busy[2] = {false, false};
    /// The first error; reported once no chunk is on the NIC any more (invariant 2).
    std::optional<std::pair<TransferOutcome, OpFault>> error;
  };

  PathKind kind() const override { return PathKind::kRdmaStaged; }
  NicUse* use(OpId id) override { return find_use(ops_, id); }
  const NicUse* use(OpId id) const override { return find_use(ops_, id); }
  std::vector<OpId> ops() const override { return keys(ops_); }
  void post(OpId id, const std::shared_ptr<QpEndpoint>& qp) override;
  bool may_retry() const override { return false; }

  /// A free slot (made if fewer than staging_buffers exist), -1 when all are busy, or an error.
  Result<int> take_slot(int gpu);
  /// Posts the op's next chunks while a half of its slot is free.
  void post_chunks(OpId id, StagedOp& s, const std::shared_ptr<QpEndpoint>& qp);
  /// A chunk came back: copy it into the GPU (a read), post the next ones.
  void chunk_done(OpId id, StagedOp& s, uint32_t chunk, TransferOutcome outcome, OpFault fault);
  /// Answers the op once no chunk of it is on the NIC (invariant 2).
  void settle(OpId id);
  void release_slot(int slot);
  size_t halves() const;
  uint64_t chunk_bytes() const;

  std::map<OpId, StagedOp> ops_;
  std::vector<Slot> slots_;
  ClassQueue<OpId> waiters_;
  bool lock_reported_ = false;  // "staging buffers stay pageable" said once
};

}  // namespace caf_rdma::detail
