// RdmaOp: one operation on a queue pair (write, read, send, recv, atomics) and its result.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "components/list_entry.h"
#include "components/rdma_buffer.h"
#include "primitives/status.h"

namespace caf_rdma {

enum class OpKind : uint8_t {
  kWrite,        ///< RDMA WRITE: local slices -> remote range
  kRead,         ///< RDMA READ: remote range -> local slices
  kSend,         ///< SEND: local slices -> the peer's next posted receive
  kRecv,         ///< RECV: post local slices for the peer's next SEND
  kFetchAdd,     ///< 64-bit atomic fetch-and-add on the remote word; result = old value
  kCompareSwap,  ///< 64-bit atomic compare-and-swap on the remote word; result = old value
};

/// "RDMA WRITE", "RDMA READ", "SEND", "RECV", "ATOMIC FETCH_ADD", "ATOMIC CMP_SWAP".
const char* to_string(OpKind kind);

/// A range of a local registered buffer. The op holds a copy of the buffer, so the region
/// stays registered until the op has completed even if the caller releases its handle.
struct LocalSlice {
  RdmaBuffer buffer;
  uint64_t offset = 0;
  uint64_t length = 0;
};

/// Ranges [first, first + count) of a shared table, moved by one op (RdmaOp::list). The table
/// is not copied: a prepared list is posted any number of times.
struct OpList {
  std::shared_ptr<const std::vector<ListEntry>> entries;
  size_t first = 0;
  size_t count = 0;
  uint64_t bytes = 0;  ///< the ranges' lengths summed
  /// Made by `of`: the op is a list even when it holds no ranges (validation refuses it then,
  /// rather than moving the whole local buffer as a plain op).
  bool made = false;

  /// The ranges [first, first + count) of `entries` (no more than it holds), their bytes
  /// summed: one pass, nothing allocated.
  static OpList of(std::shared_ptr<const std::vector<ListEntry>> entries, size_t first,
                   size_t count);
  const ListEntry& operator[](size_t i) const { return (*entries)[first + i]; }
};

struct RdmaOp {
  OpKind kind = OpKind::kWrite;
  /// Gather list (write, send) or scatter list (read, recv); unused by atomics.
  std::vector<LocalSlice> local;
  /// Remote side of write, read and atomics.
  RemoteBuffer remote;
  uint64_t remote_offset = 0;
  /// Atomics: the addend (fetch-add) or the compare value (compare-swap).
  uint64_t compare_add = 0;
  /// Atomics: the swap value (compare-swap).
  uint64_t swap = 0;
  /// WRITE only: its last work request is RDMA WRITE WITH IMMEDIATE carrying `imm`, which
  /// consumes a receive the peer posted and completes it with `imm` once the write's bytes
  /// (and those of every earlier write on the queue pair) are in the peer's memory. Such a
  /// write may have no local slices (zero bytes: only the immediate).
  bool with_imm = false;
  uint32_t imm = 0;
  /// READ or WRITE of a list (RdmaQueuePair invariant 13): range e of it moves e.length bytes
  /// between `local[0]`'s buffer at e.peer_offset and `remote` at e.offset (local[0]'s offset
  /// and length, and remote_offset, are not used). Not made by OpList::of: not a list.
  OpList list;

  bool is_list() const { return list.made; }
  /// Total bytes of the local slices (of a list: its ranges).
  uint64_t local_length() const;

  static RdmaOp write(LocalSlice src, RemoteBuffer dst, uint64_t dst_offset = 0);
  /// A zero-byte RDMA WRITE WITH IMMEDIATE at `dst_offset` of `dst`: only `imm` travels.
  static RdmaOp write_imm(RemoteBuffer dst, uint64_t dst_offset, uint32_t imm);
  static RdmaOp read(LocalSlice dst, RemoteBuffer src, uint64_t src_offset = 0);
  /// A list: READs (`read`) from `remote` into `local`, or WRITEs from `local` into `remote`,
  /// of the ranges of `ranges`.
  static RdmaOp list_of(bool read, RdmaBuffer local, RemoteBuffer remote, OpList ranges);
  static RdmaOp send(LocalSlice src);
  static RdmaOp recv(LocalSlice dst);
  static RdmaOp fetch_add(RemoteBuffer dst, uint64_t offset, uint64_t add);
  static RdmaOp compare_swap(RemoteBuffer dst, uint64_t offset, uint64_t compare, uint64_t swap);
};

/// What kind of failure ended an op, for callers that react to it (retry, ask the owner).
enum class OpFault : uint8_t {
  kNone,          ///< succeeded, or failed before reaching the NIC (see status)
  kFlushed,       ///< flushed or interrupted because the queue pair entered ERR for another
                  ///< op's error: this op did nothing wrong, it may be retried on a new QP
  kRemoteAccess,  ///< the responder refused the access (IBV_WC_REM_ACCESS_ERR or
                  ///< IBV_WC_REM_INV_REQ_ERR): wrong or dead rkey, out of the region's bounds
  kOther,         ///< any other completion error (retries exhausted, local errors, ...)
};

/// How an op ended. Every submitted op completes exactly once.
struct OpResult {
  Status status;
  OpFault fault = OpFault::kNone;
  uint64_t bytes = 0;         ///< bytes moved (recv: bytes received)
  uint64_t atomic_value = 0;  ///< atomics: the remote word's value before the operation
  /// RECV: consumed by the peer's RDMA WRITE WITH IMMEDIATE (`bytes` is then that write's
  /// length) carrying `imm`.
  bool with_imm = false;
  uint32_t imm = 0;
  /// A list (RdmaOp::list): its first `list_landed` ranges are in place at their destination,
  /// whether the op succeeded (all of them) or failed (those whose every work request had
  /// completed before the first that failed: RC completes in order). Exact from below.
  uint64_t list_landed = 0;
};

using OpCallback = std::function<void(OpResult)>;

}  // namespace caf_rdma
