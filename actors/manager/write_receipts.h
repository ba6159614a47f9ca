// WriteReceipts: the owner's own record of the writes of notify writers that landed in its
// memory, which a write notice must claim (write_notices.h invariant 15): a notice is made only
// for a write its owner saw land, never on a writer's word alone.
//
// Where the owner sees a write land:
//  - the stream channel: the owner's stream server stored every byte of a write grant (the
//    grant's token is the receipt);
//  - CAF chunks: the owner stored chunks a writer marked with its receipt (the chunks' ranges
//    are merged);
//  - RDMA: the write's last work request is an RDMA WRITE WITH IMMEDIATE carrying the receipt
//    (32 bits) on the writer's queue pair; it consumes a receive the owner posted on its side of
//    that queue pair, which completes only once the bytes of that write and of every earlier
//    one on the queue pair are in the owner's memory (RC's order at the responder). The owner
//    learns the writing node from the queue pair, not the range: a one-sided write passes its
//    CPU by.
//
// A part of the manager (actors/detail/manager_state.h).
//
// Invariants:
//  1. A receipt is its writing node's (as the connection or queue pair names it) and is claimed
//     at most once: a notice that names no receipt of its node, one already claimed, or (stream
//     and chunks) a range other than what landed, is refused (permission_denied), and its
//     watcher hears nothing.
//  2. A notice whose receipt has not come yet (its RDMA receive not polled yet) waits for it, up
//     to kReceiptWait, with the poller woken; then it is refused as in 1.
//  3. Bounded: receipts per writing node (kMaxReceiptsPerNode) and in all (kMaxReceipts), the
//     oldest going first (a few hundred bytes each: 8x the notices that may wait for watchers,
//     so a batch of notify writes whose notices all wait keeps its receipts); receipts older than
//     max_timeout go; a chunk receipt holds at most kMaxReceiptPieces separate ranges (more: it
//     matches nothing); notices waiting for receipts count per node and in all as receipts do,
//     those of nodes not directly connected at most a kIndirectShare-th of all (write_notices.h
//     invariant 17); beyond, a notice is refused, naming the limit.
//  4. Every accepted queue pair of a peer manager (the one its notify writes take) has
//     kReceiptReceives receives posted from when it is accepted until it is dropped: each
//     completion posts its receive again at once, on the poller's thread (a writer with more
//     immediates in flight waits, RNR, only until the owner's next poll). A queue pair that
//     cannot have them is not accepted (the handshake fails, naming why), and at most
//     kMaxArmedQps are armed at once, so standing receives hold at most a third of the shared
//     completion queue's credits. Receives keep no poller busy (RdmaQueuePair invariant 12).
//  5. Receipt 0 names none: a notice claiming it is refused at once.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>

#include "actors/manager/manager_part.h"
#include "components/nic.h"
#include "components/qp_endpoint.h"
#include "components/rdma_buffer.h"
#include "components/rdma_op.h"
#include "primitives/status.h"

namespace caf_rdma::detail {

/// Receipts held per writing node and in all (invariant 3).
constexpr uint64_t kMaxReceiptsPerNode = 8192;
constexpr uint64_t kMaxReceipts = 32768;
/// How long a notice waits for its write's receipt (invariant 2).
constexpr std::chrono::milliseconds kReceiptWait{1000};
/// Separate ranges one chunk receipt may hold (invariant 3).
constexpr size_t kMaxReceiptPieces = 256;
/// Receives kept posted on each accepted queue pair, and queue pairs armed at once (invariant 4).
constexpr uint32_t kReceiptReceives = 4;
constexpr uint64_t kMaxArmedQps = 1024;
/// Writer side: receipts of chunk writes are numbered from here, those of RDMA writes below it.
constexpr uint64_t kFirstChunkReceipt = uint64_t{1} << 32;

/// Where a receipt's write landed.
enum class ReceiptSource : uint8_t { kStream, kChunks, kRdma };

class WriteReceipts : public ManagerPart {
public:
  using ManagerPart::ManagerPart;
  /// The claim's answer: ok, or why the notice is refused.
  using Claimed = std::function<void(Status)>;

  // -- the owner's records --
  /// The current message's sending node as receipts name it ("anonymous" when none).
  std::string sender_node() const;
  /// Every byte of stream write grant `token` of `node` landed: [offset, offset + length) of
  /// buffer `buffer`.
  void stream_landed(const std::string& node, uint64_t token, uint64_t buffer, uint64_t offset,
                     uint64_t length);
  /// A chunk of notify write `receipt` of `node` was stored at [offset, offset + length) of
  /// buffer `buffer`.
  void chunk_landed(const std::string& node, uint64_t receipt, uint64_t buffer, uint64_t offset,
                    uint64_t length);
  /// Posts the receives of invariant 4 on `qp`, the queue pair accepted from `node`'s peer, or
  /// says why it cannot (the queue pair is then not to be used).
  Status arm(const std::shared_ptr<QpEndpoint>& qp, const std::string& node);
  /// `qp`, armed, is dropped (invariant 4's count).
  void disarm(const QpEndpoint* qp) { armed_.erase(qp); }
  /// A receive posted by `arm` completed with the immediate `imm` of a write of `node`'s
  /// (ReceiptLanded).
  void received(const std::string& node, uint32_t imm);
  /// A notice of `node` (`direct`: a node the middleman knows as directly connected) claims
  /// `receipt` for [offset, offset + length) of buffer `buffer`: `then` gets the answer, now
  /// or once the receipt comes (invariant 2).
  void claim(const std::string& node, uint64_t receipt, uint64_t buffer, uint64_t offset,
             uint64_t length, bool direct, Claimed then);
  /// The wait of claim `waiter` is over (ReceiptDue).
  void due(uint64_t waiter);
  /// Receipts held now (all nodes).
  size_t held() const { return receipts_.size(); }
  /// The device went away: the receives' landing bytes go with it.
  void drop_device();
  /// 64 registered bytes nobody reads, on the current device (made on first use): where the
  /// receives land, and the target of write_notices.h's fence READs.
  Result<RdmaBuffer> sink();

  // -- the writer's numbers --
  /// The receipt an RDMA notify write carries (32 bits, as its immediate).
  uint32_t next_rdma_receipt() { return ++rdma_receipts_ == 0 ? ++rdma_receipts_ : rdma_receipts_; }
  /// The receipt a chunk notify write's chunks carry.
  uint64_t next_chunk_receipt() { return kFirstChunkReceipt + ++chunk_receipts_; }

private:
  struct Receipt {
    ReceiptSource source = ReceiptSource::kStream;
    uint64_t buffer = 0;
    std::map<uint64_t, uint64_t> landed;  ///< stream and chunks: begin -> end, merged
    bool overflow = false;                ///< more than kMaxReceiptPieces ranges
    uint64_t seq = 0;                     ///< its place in `by_age_`
    std::chrono::steady_clock::time_point made;
  };
  struct Waiter {
    std::string node;
    uint64_t receipt = 0, buffer = 0, offset = 0, length = 0;
    bool direct = false;
    Claimed then;
  };
  using Key = std::pair<std::string, uint64_t>;

  /// The receipt `key` (made if new, within invariant 3's bounds; null: refused).
  Receipt* make(const Key& key, ReceiptSource source, uint64_t buffer);
  /// Gives receipt `key` to the notice waiting for it, if one does.
  void hand_to_waiter(const Key& key);
  /// Whether receipt `r` covers exactly [offset, offset + length) of `buffer`; else why not.
  static Status matches(const Receipt& r, uint64_t receipt, uint64_t buffer, uint64_t offset,
                        uint64_t length);
  void erase(std::map<Key, Receipt>::iterator it);
  void expire_old();

  std::map<Key, Receipt> receipts_;
  std::map<uint64_t, Key> by_age_;                      ///< seq -> receipt, oldest first
  std::map<std::string, std::set<uint64_t>> per_node_;  ///< node -> its receipts' seqs
  std::set<const QpEndpoint*> armed_;                   ///< invariant 4
  uint64_t seq_ = 0;
  std::map<Key, uint64_t> waiting_;  ///< receipt -> the waiter claiming it
  std::map<uint64_t, Waiter> waiters_;
  std::map<std::string, uint64_t> waiting_per_node_;
  uint64_t waiting_indirect_ = 0;
  uint64_t next_waiter_ = 0;
  uint32_t rdma_receipts_ = 0;
  uint64_t chunk_receipts_ = 0;
  std::shared_ptr<Nic> sink_domain_;
  std::unique_ptr<uint8_t[]> sink_bytes_ = std::make_unique<uint8_t[]>(64);
  RdmaBuffer sink_;
};

}  // namespace caf_rdma::detail
