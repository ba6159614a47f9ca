// ChunkPath: the fallback in CAF messages: a read asks its owner for fetch answers, a write
// sends it store chunks, at most fallback_window of them on their way and each at most
// fallback_chunk_bytes. A write's chunk points into the local buffer (zero copy) and holds it
// until the message carrying it was sent (ChunkSent).
//
// Invariants:
//  1. Manager invariant 10: every store and atomic carries the time its op has left (rounded
//     up), and its owner applies none past its arrival plus that time (manager/buffer_table.h
//     invariant 23). A write or atomic whose deadline passes, or which fails, with requests on
//     its way sends no more and is answered once each of them was answered or timed out (by
//     the deadline plus kRequestBackstop), by what they did:
//       - every byte stored (the atomic applied): success, even past the deadline (a notify
//         write's notice is then not sent: manager/write_notices.h invariant 16);
//       - one got no answer: peer_unavailable, saying that whether the op took effect is
//         unknown (never timeout: it may still be applied);
//       - otherwise the first error, or past the deadline `timeout` (an owner's late refusal
//         included), each saying how many bytes were stored (none of the rest will be).
//     No request leaves once the deadline passed. A lost link (manager invariant 13) fails the
//     op at once: with requests on their way, its error says their outcome is unknown.
//     A failed or timed-out read drops late data.
//  2. Manager invariant 12, requester side: the fetches asked of one owner and not yet
//     answered stay within peer_window_bytes (each charged at least kWindowMinCharge); reads
//     beyond wait in the owner's Peer::fetch_queue, by class and deadline (manager invariant
//     25), and ask more as answers come back. Answers
//     to fetches asked over a link lost since release nothing (Peer::link).
//  3. Every chunk of a read is checked for its size before it is copied in.
//  4. An atomic is one `atomic` request to its owner (who applies it with a CPU atomic), never
//     chunks; its old value is copied into the local range when the answer comes, even past
//     the deadline (invariant 1: the reply waits for it and then says it was applied).
//  5. Packs: the reads and writes of one batch (ManagerState::batch, a list's batches included)
//     that are smaller than a chunk, not notify writes nor writes into GPU memory, and whose
//     owner, buffer, direction and priority class agree, leave together, in batch order, as packed
//     requests (fetch_list, store_list) of at most fallback_chunk_bytes and kMaxPackedRanges
//     ranges: one message and one answer for many ops. Each op keeps its own state and answer
//     (invariants 1-3 hold per op, as if its chunk were one request): a pack's answer or error
//     counts for each op still waiting for it, an op that ended meanwhile is skipped (a read's late
//     data dropped). The owner checks every range before it copies one (a packed store lands whole
//     or not at all), so one bad range fails every op of its pack with the owner's refusal naming
//     that range. A packed fetch is charged to the owner's window as one fetch of its total
//     (invariant 2) and, when the window is full, waits in the owner's fetch queue as one entry
//     (its first live op's).
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <vector>

#include "actors/rdma_messages.h"
#include "actors/transfer/transfer_path.h"
#include "caf/fwd.hpp"

namespace caf_rdma::detail {

class ChunkPath final : public TransferPath {
public:
  using TransferPath::TransferPath;

  void start(OpId id) override;
  bool deadline(OpId id, DeadlineStage stage) override;
  void forget(OpId id) override;
  /// Takes over an op that the stream channel could not move (StreamPath): chunks from its
  /// first byte (the stream moved none).
  void take_over(OpId id);
  /// The manager's batch started all its ops: the small ones it held back leave now, packed
  /// (invariant 5). Called once after each batch's ops were started.
  void send_held();
  /// Whether write or atomic `id` has requests on their way to its owner (invariant 1): a lost
  /// link's failure must then say that whether they took effect is unknown.
  bool requests_out(OpId id) const;

private:
  struct ChunkOp {
    uint64_t next_offset = 0;
    uint64_t bytes_done = 0;
    uint32_t in_flight = 0;
    bool fetch_queued = false;  ///< in its owner's Peer::fetch_queue (invariant 2)
    /// Its deadline passed with requests on their way: no more are sent (invariant 1).
    bool past_due = false;
    /// Requests CAF timed out (no answer by the deadline plus the backstop): whether they took
    /// effect is unknown.
    uint32_t unanswered = 0;
    /// The first error of a write or atomic with requests still on their way (invariant 1).
    std::optional<TransferOutcome> error;
  };

  /// The small ops of one batch with one owner, buffer and direction that leave as one request
  /// (invariant 5), in batch order.
  struct Pack {
    std::vector<OpId> ops;
    uint64_t bytes = 0;
  };

  /// Whether op `id`, started within a batch, waits to leave in a pack (invariant 5).
  bool packable(OpId id) const;
  /// Sends pack `p` (its ops that still wait), or queues it for its owner's window (reads).
  void launch_pack(Pack p);
  void ask_fetch_pack(const Pack& p, uint64_t charge);
  void send_store_pack(const Pack& p);
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
  /// Invariant 1: the answer of a write or atomic that failed or passed its deadline, once no
  /// request of it is on its way.
  void settle(OpId id, const ChunkOp& c);
  /// The time the op has left, in whole milliseconds rounded up (at least 1): what its
  /// requests tell their owner (invariant 1).
  uint32_t left_ms(OpId id) const;
  /// A fetch of `charge` asked of peer `key` over link `link` was answered or failed: reads
  /// waiting for that owner's window ask more (invariant 2).
  void fetch_answered(const caf::actor_addr& key, uint64_t charge, uint64_t link);
  /// How long a chunk's request may take: until the transfer's deadline plus the backstop.
  std::chrono::milliseconds chunk_timeout(OpId id) const;

  std::map<OpId, ChunkOp> ops_;
  /// Ops a running batch started that wait to leave packed (invariant 5), in batch order.
  std::vector<OpId> held_;
  /// Packed fetches waiting in their owner's fetch queue, by the op that stands for them there.
  std::map<OpId, Pack> queued_packs_;
};

}  // namespace caf_rdma::detail
