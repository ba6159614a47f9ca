// ChunkPath: the fallback in CAF messages: a read asks its owner for fetch answers, a write
// sends it store chunks, at most fallback_window of them on their way and each at most
// fallback_chunk_bytes. A write's chunk points into the local buffer (zero copy) and holds it
// until the message carrying it was sent (ChunkSent).
//
// Invariants:
//  1. Manager invariant 10: a write that fails or times out with chunks on their way is
//     answered only once each of them was answered by its owner or timed out (by the deadline
//     plus kRequestBackstop), so the owner applies none of them after the reply. A failed read
//     drops late data.
//  2. Manager invariant 12, requester side: the fetches asked of one owner and not yet
//     answered stay within peer_window_bytes (each charged at least kWindowMinCharge); reads
//     beyond wait in the owner's Peer::fetch_queue and ask more as answers come back. Answers
//     to fetches asked over a link lost since release nothing (Peer::link).
//  3. Every chunk of a read is checked for its size before it is copied in.
//  4. An atomic is one `atomic` request to its owner (who applies it with a CPU atomic), never
//     chunks; its old value is copied into the local range when the answer comes. Like a
//     write's chunks (invariant 1), a request on its way holds the reply until it is answered
//     or timed out, so the owner never applies it after the reply.
#pragma once

#include <chrono>
#include <map>
#include <optional>

#include "actors/rdma_messages.h"
#include "actors/transfer/transfer_path.h"
#include "caf/fwd.hpp"

namespace caf_rdma::detail {

class ChunkPath final : public TransferPath {
public:
  using TransferPath::TransferPath;

  void start(OpId id) override;
  bool deadline(OpId id, DeadlineStage stage) override;
  void forget(OpId id) override { ops_.erase(id); }
  /// Takes over an op that the stream channel could not move (StreamPath): chunks from its
  /// first byte (the stream moved none).
  void take_over(OpId id);

private:
  struct ChunkOp {
    uint64_t next_offset = 0;
    uint64_t bytes_done = 0;
    uint32_t in_flight = 0;
    bool fetch_queued = false;  ///< in its owner's Peer::fetch_queue (invariant 2)
    /// The first error (or the timeout) of a write with chunks still on their way
    /// (invariant 1).
    std::optional<TransferOutcome> error;
  };

  /// Sends the op's next chunks while its window (and its owner's, for reads) allows.
  void pump(OpId id);
  void ask_fetch(OpId id, uint64_t off, uint64_t n, uint64_t charge);
  void send_store(OpId id, uint64_t off, uint64_t n);
  /// Invariant 4: the op's one `atomic` request.
  void ask_atomic(OpId id);
  /// A chunk of `bytes` arrived (read) or was stored (write).
  void chunk_done(OpId id, uint64_t bytes);
  /// A chunk's request failed.
  void chunk_failed(OpId id, const caf::error& err);
  /// A write chunk failed or never left: the op fails once none of its chunks is on its way.
  void write_chunk_failed(OpId id, ChunkOp& c, TransferOutcome out);
  /// A fetch of `charge` asked of peer `key` over link `link` was answered or failed: reads
  /// waiting for that owner's window ask more (invariant 2).
  void fetch_answered(const caf::actor_addr& key, uint64_t charge, uint64_t link);
  /// How long a chunk's request may take: until the transfer's deadline plus the backstop.
  std::chrono::milliseconds chunk_timeout(OpId id) const;

  std::map<OpId, ChunkOp> ops_;
};

}  // namespace caf_rdma::detail
