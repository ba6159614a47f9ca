// TransferPath: one way of moving an op's bytes. The manager's front (manager_transfers.cc)
// checks each op, chooses its path (path_choice.h), starts it there, routes the path's events to
// it and takes its one reply (ManagerState::finish_op). The paths: local_copy_path.h,
// rdma_path.h, staged_path.h (RDMA through bounce buffers, over rdma_path.h), chunk_path.h,
// stream_path.h.
//
// Invariants:
//  1. A path ends every op it started exactly once, through ManagerState::finish_op, or hands it
//     to another path (ManagerState::reroute, StreamPath -> ChunkPath); nothing else replies.
//  2. What a path keeps per op lives in the path, and `forget` drops it when the op ends (the
//     front calls it from finish_op, before the reply).
//  3. `start` may run again for an op that waited for a lost link (manager invariant 13): a
//     path starts from what the op record says, not from its own leftovers.
#pragma once

#include <cstdint>
#include <tuple>

namespace caf_rdma::detail {

class ManagerState;

/// One op of one transfer: the transfer's ticket and the op's index in it.
struct OpId {
  uint64_t ticket = 0;
  uint32_t index = 0;
  friend bool operator<(const OpId& a, const OpId& b) {
    return std::tie(a.ticket, a.index) < std::tie(b.ticket, b.index);
  }
  friend bool operator==(const OpId& a, const OpId& b) {
    return a.ticket == b.ticket && a.index == b.index;
  }
};

/// Which path an op takes (kNone until chosen).
enum class PathKind : uint8_t {
  kNone,
  kLocalCopy,   ///< both buffers this node's: the owner's checks, then a copy
  kRdma,        ///< one-sided RDMA between the registered buffers
  kRdmaStaged,  ///< RDMA through bounce buffers (GPU memory the NIC cannot register)
  kChunks,      ///< the fallback: fetch/store requests to the owner, in chunks
  kStream,      ///< the fallback's TCP stream channel
};

/// The name a reply reports for the path (TransferReply::path).
const char* reply_path(PathKind path);

/// Which deadline of a transfer passed: its timeout, or the end of the flush that followed, or
/// its requester's cancel (manager invariant 24).
enum class DeadlineStage : uint32_t {
  kDue = 0,           ///< the transfer's timeout: flush what the NIC holds, end the rest
  kDrainOverdue = 1,  ///< the flush did not finish within drain_timeout: destroy the QP
  /// Cancelled: as kDue, except that a queue pair other transfers' ops are on is not flushed
  /// for it (they would fail or run again): the op's own completion ends it.
  kCancelled = 2,
};

class TransferPath {
public:
  explicit TransferPath(ManagerState& m) : m_(m) {}
  virtual ~TransferPath() = default;
  TransferPath(const TransferPath&) = delete;
  TransferPath& operator=(const TransferPath&) = delete;

  /// Starts (or, after a lost link came back, restarts) op `id`.
  virtual void start(OpId id) = 0;
  /// The op's transfer passed `stage`: ends the op, or returns true while a flush runs (then
  /// kDrainOverdue follows), or leaves it to end by itself (its reply waits for what is still
  /// on its way: manager invariants 5 and 10). kCancelled may come first, and kDue after it.
  virtual bool deadline(OpId id, DeadlineStage stage);
  /// The op ended: drop what the path keeps for it.
  virtual void forget(OpId id) { (void)id; }

protected:
  ManagerState& m_;
};

}  // namespace caf_rdma::detail
