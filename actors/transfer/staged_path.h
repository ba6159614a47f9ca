// StagedPath: RDMA through page-locked bounce buffers, for GPU memory the local NIC cannot
// register: a write copies each chunk out of the GPU into a bounce buffer and the NIC moves it
// from there; a read lands in the bounce buffer and is copied into the GPU. It is the RDMA path
// (rdma_path.h: the QP, errors, the owner's answers, the deadline) with its own posting and
// completion.
//
// Invariants (manager invariant 9):
//  1. An op longer than one chunk (half a bounce buffer) holds a bounce buffer (a slot) of its
//     own, used as two halves, chunk i in half i % 2, so the GPU copy of one chunk runs while the
//     NIC moves the other; chunks may complete in any order (each completion names its chunk).
//  2. A slot goes back only once no chunk of any op holding it (or a piece of it) is on the NIC
//     (completed, flushed, or its QP destroyed), and an op is answered only once none of its
//     own is: no later transfer's bytes meet a late DMA. A piece is never cut twice: a shared
//     slot is cut afresh only after its last op left it.
//  3. An op succeeds only when every chunk moved; it is never retried (its first chunks may
//     have moved), and once a chunk was posted it is never rerouted to the fallback.
//  4. At most staging_buffers slots exist; ops beyond wait for one by class, earliest deadline
//     first within one (manager invariant 25; their timeout still runs). A freed slot, or room
//     in the open shared one, goes to the first waiter in that order it can serve; an op that
//     comes while others wait queues behind them and takes its turn the same way.
//  5. An op of one chunk or less takes a piece of a shared slot instead: pieces are cut one
//     after the other from the slot's start (64-byte aligned) until the next does not fit; then
//     the next small op opens another slot. So the small ranges of a list (or batch) gather into
//     a few bounce buffers, all on the NIC at once, instead of each holding a whole slot.
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
  /// Bounce buffers an op holds (or pieces of) now, and all that exist (ManagerTelemetry).
  uint64_t slots_busy() const;
  uint64_t slots_made() const { return slots_.size(); }

private:
  struct Slot {
    std::unique_ptr<BounceBuffer> memory;  // destroyed after `rdma` (its registration)
    RdmaBuffer rdma;
    bool busy = false;
    uint32_t tenants = 0;  ///< ops holding a piece of it (invariant 5); 0: one op or none
    uint64_t cut = 0;      ///< bytes cut into pieces so far
  };
  struct StagedOp : NicUse {
    int slot = -1;      ///< bounce buffer held, -1 while waiting for one
    uint64_t base = 0;  ///< where its part of the slot starts (a piece's offset, else 0)
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
  /// Gives the op a piece of `length` bytes of the open shared slot, or of a new one
  /// (invariant 5): false when none is to be had now, or an error.
  Result<bool> take_piece(StagedOp& s, uint64_t length, int gpu);
  /// Whether an op of `length` bytes would get its slot or piece now.
  bool room_for(uint64_t length) const;
  /// A piece's bytes: `length` rounded up to 64, within one slot.
  uint64_t piece_bytes(uint64_t length) const;
  /// The op is done with its slot or piece: the slot goes back once no op holds it.
  void leave_slot(int slot);
  /// Free slots and room go to the ops waiting (invariant 4).
  void hand_on();
  /// Takes the op's slot or piece, and connects it; or queues it (invariant 4).
  void begin(OpId id);
  /// Posts the op's next chunks while a half of its slot is free.
  void post_chunks(OpId id, StagedOp& s, const std::shared_ptr<QpEndpoint>& qp);
  /// A chunk came back: copy it into the GPU (a read), post the next ones.
  void chunk_done(OpId id, StagedOp& s, uint32_t chunk, TransferOutcome outcome, OpFault fault);
  /// Answers the op once no chunk of it is on the NIC (invariant 2).
  void settle(OpId id);
  size_t halves() const;
  uint64_t chunk_bytes() const;

  std::map<OpId, StagedOp> ops_;
  std::vector<Slot> slots_;
  int open_ = -1;  ///< the shared slot pieces are cut from now (invariant 5), -1 none
  ClassQueue<OpId> waiters_;
  bool lock_reported_ = false;  // "staging buffers stay pageable" said once
};

}  // namespace caf_rdma::detail
