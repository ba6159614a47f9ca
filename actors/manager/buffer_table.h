// BufferTable: this node's registered buffers: registration, release, the owner's checks of every
// access a peer (or a local copy) makes, and copies into and out of host or GPU memory.
//
// A part of the manager (actors/manager/manager_part.h) that keeps the buffers (below).
//
// Invariants (numbered as the manager's, which lists them all):
//  1. Buffer ids are never reused; a released id stays known as released.
//  2. A buffer released while transfers use it is refused to new transfers at once, and its
//     release reply (after which the caller may free the memory) comes only once no byte
//     moves into or out of it any more. The release rule (docs/guarantees.md, "Release"), the
//     same on every transport: this node's own transfers using it as their local side are
//     waited for; a peer's transfer into or out of it is stopped, as the NIC stops a peer's
//     one-sided op when the region is deregistered: stream grants no client claimed yet are
//     withdrawn, claimed ones and requests by handle stop after the call under way
//     (components/stream_server.h invariant 14) and answer `released`, CAF chunks after the
//     release are refused. The peer's op fails `released`; bytes it moved before may have
//     landed.
// 14. The owner applies a fallback atomic with one CPU atomic instruction on the aligned 64-bit
//     word (__atomic_fetch_add, __atomic_compare_exchange_n, sequentially consistent), after
//     the same checks as a store of those 8 bytes: so owner-side atomics on one word are atomic
//     with each other (NOT with NIC atomics on the word: docs/architecture.md, "Atomics").
// 23. A peer's store or atomic is applied only until its arrival at this node plus the time
//     its requester had left then (cut to max_timeout: OwnerDue); one taken up later is
//     refused with `timeout`, nothing stored or applied and no receipt recorded, so the
//     requester, which waits for the answer up to its deadline plus kRequestBackstop
//     (actors/transfer/chunk_path.h invariant 1), can say exactly what happened.
#pragma once

#include "actors/detail/manager_events.h"
#include "actors/detail/manager_tables.h"
#include "actors/manager/manager_part.h"

namespace caf_rdma::detail {

class BufferTable : public ManagerPart {
public:
  using ManagerPart::ManagerPart;

  caf::result<BufferHandle> request_buffer(uint64_t addr, uint64_t size, uint8_t access);
  caf::result<uint64_t> release_buffer(uint64_t id);
  /// A copy of `ranges` of the buffer, one after the other, for a fetch answer of `requester`
  /// (a name requester() gave), after the owner's checks of every range (owner_ranges;
  /// served_ledger.h counts it).
  Result<ByteChunk> fetch_chunk(const BufferRef& ref, const std::vector<PackedRange>& ranges,
                                const std::string& requester);
  /// A peer's chunk of a write (the current sender's), after the owner's checks; one of a
  /// notify write (`receipt` not 0) is recorded for its notice (write_receipts.h). Past `due`
  /// (invariant 23) nothing is stored: `timeout`.
  caf::result<uint64_t> store(const BufferRef& ref, uint64_t offset, const ByteChunk& bytes,
                              uint64_t receipt, const OwnerDue& due);
  /// A peer's packed store (store_list, the current sender's): `bytes` into `ranges`, each
  /// range its length of them in order, after every range was checked (owner_ranges) and the
  /// lengths found to add up to the chunk; past `due` (invariant 23) nothing is stored. Every
  /// range is stored, or none (GPU memory: a failed copy says how many bytes landed before it).
  caf::result<uint64_t> store_ranges(const BufferRef& ref, const std::vector<PackedRange>& ranges,
                                     const ByteChunk& bytes, const OwnerDue& due);
  /// The owner's side of an atomic (a peer's `atomic` request, or a local op): owner_access
  /// for a write of the 8-byte word at `offset`, which must be 8-byte aligned and in host
  /// memory, then the CPU atomic on it (invariant 14). Returns the word's old value.
  Result<uint64_t> apply_atomic(const BufferRef& ref, uint64_t offset, uint8_t kind,
                                uint64_t operand, uint64_t compare);
  /// apply_atomic for a peer (the `atomic` request: the current sender's), counted as a request
  /// served (not as bytes). Past `due` (invariant 23) it is not applied: `timeout`.
  caf::result<uint64_t> atomic(const BufferRef& ref, uint64_t offset, uint8_t kind,
                               uint64_t operand, uint64_t compare, const OwnerDue& due);
  /// The owner's view of a peer's access (after its NIC refused one): ok, or why not.
  TransferOutcome check_access(const BufferRef& ref, uint64_t offset, uint64_t length,
                               uint8_t kind);
  /// Verify mode: range_checksum of a range of the buffer.
  caf::result<uint64_t> checksum(const BufferRef& ref, uint64_t offset, uint64_t length);
  /// The live local buffer named by a handle, or an error naming what is wrong.
  Result<LocalBuffer*> local_buffer(const BufferHandle& h, const char* role);
  /// Buffer by id for owner-side checks (fetch, store, local copies).
  Result<LocalBuffer*> owned_buffer(uint64_t id, const char* role);
  /// Owner-side checks of a peer's access (fetch, store, stream grants): the buffer is live,
  /// the secret is its own, it is writable for a write, and [offset, offset + length) fits it.
  Result<LocalBuffer*> owner_access(const BufferRef& ref, uint64_t offset, uint64_t length,
                                    bool write);
  /// owner_access for each of `ranges` (1 to kMaxPackedRanges of them, none empty, at most
  /// kMaxChunkBytes in all): the buffer, with their total in `total`, or the first refusal,
  /// naming the range ("range i of n").
  Result<LocalBuffer*> owner_ranges(const BufferRef& ref, const std::vector<PackedRange>& ranges,
                                    bool write, uint64_t* total);
  /// Invariant 23: ok while `due` has not passed, else `timeout` naming `what` and `outcome`.
  Status in_time(const OwnerDue& due, const std::string& what, const char* outcome) const;
  /// A zero-copy store chunk's hold on local buffer `id` ended (ChunkSent).
  void chunk_sent(uint64_t id);
  void buffer_done(uint64_t id);
  /// A direct lane's last use of released buffer `id` ended.
  void lane_idle(uint64_t id);
  /// Finishes the release of `id` once no transfer and no direct lane uses it.
  void maybe_finish_release(uint64_t id);
  /// range_checksum of [offset, offset + n) of a local buffer (host or GPU memory).
  Result<uint64_t> local_checksum(const LocalBuffer& b, uint64_t offset, uint64_t n) const;
  Status copy_in(const LocalBuffer& b, uint64_t offset, const void* src, uint64_t n) const;
  /// Copies between a local buffer (host or GPU memory) and host memory.
  Status copy_out(const LocalBuffer& b, uint64_t offset, void* dst, uint64_t n) const;

  /// The requester `node` (the current sender's when none is given; this node's for a local
  /// sender), as served_ledger.h invariant 5 names it.
  std::string requester(const caf::node_id* node = nullptr) const;
  /// The buffers registered here, by id, released ones too until their release finished
  /// (manager invariant 1: ids are never reused).
  std::unordered_map<uint64_t, LocalBuffer>& buffers() { return buffers_; }
  const std::unordered_map<uint64_t, LocalBuffer>& buffers() const { return buffers_; }

private:
  /// GPUs whose memory the NIC could not register (staged instead): said once each, with why.
  std::set<int> staged_gpus_;
  uint64_t next_buffer_id_ = 1;
  std::unordered_map<uint64_t, LocalBuffer> buffers_;
};

}  // namespace caf_rdma::detail
