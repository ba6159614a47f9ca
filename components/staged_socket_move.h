// Staged socket moves: bytes of GPU memory (which a socket call cannot touch) moved on a stream
// connection through a page-locked bounce buffer, one piece at a time: sending, each piece is
// copied out of the GPU, then sent; receiving, each piece is received, then copied into the GPU.
// The kernel's socket buffers keep the wire busy while the next piece is copied (a GPU copy
// runs at 10x or more a TCP stream's speed), so copies and the wire overlap without a thread of
// their own. Both sides of the stream channel use it (stream_server.h invariant 19,
// stream_client.h invariant 10). No CAF.
//
// Invariants:
//  1. The GPU memory is touched only by DeviceMemory's copies, never by a socket call or the
//     CPU; the socket calls touch only the bounce buffer.
//  2. With a stop flag (the owner's withdrawal): it is looked at before each piece and, as
//     move_until_stopped does (socket_io.h), while the socket waits for the peer, so a peer that
//     trickles or stalls holds a withdrawal no longer than kStopLook and the call under way.
//     Once it is set nothing more moves: a piece received in part is not copied into the GPU
//     memory; a piece sent in part counts as far as it crossed the socket.
//  3. A copy that fails ends the move at once, the socket untouched after it: the result says
//     what crossed the socket (a received piece whose copy into the GPU failed included), what
//     of the GPU memory crossed it or landed in it (the pieces before the failed one), and the
//     copy's error, naming the GPU and the byte of the range the piece started at. The caller
//     keeps the connection in step (the rest without the memory, then that error:
//     stream_server.h invariant 19) or ends it (stream_client.h invariant 10).
//  4. One bounce buffer of kStagedPiece bytes per thread, made by staged_ready (or the
//     thread's first staged move) through that move's DeviceMemory, page-locked where it can be
//     (else pageable), and kept for the thread's life: no allocation or page-lock per move. A
//     move through another DeviceMemory (a thread serves one manager, so only in a test) makes
//     it again.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "components/device_memory.h"
#include "components/socket_io.h"

namespace caf_rdma {

/// Bytes per piece (invariant 4: the bounce buffer's size).
constexpr uint64_t kStagedPiece = 1ull << 20;

/// GPU memory a stream transfer moves through a bounce buffer; `device` null: host memory, which
/// the socket calls move straight.
struct StagedMemory {
  StagedMemory() = default;
  StagedMemory(std::shared_ptr<DeviceMemory> memory, int on_gpu)
      : device(std::move(memory)), gpu(on_gpu) {}

  std::shared_ptr<DeviceMemory> device;
  int gpu = -1;  ///< the GPU the memory is on
  /// Its owner's export of it, for a requester of its host to copy it GPU to GPU
  /// (stream_server.h invariant 20; null: none), and where the range starts in the export.
  std::shared_ptr<const GpuExport> exported;
  uint64_t in_export = 0;
  /// Set by the owner's worker once it handed the export to a requester (its manager then
  /// counts that requester among the export's importers).
  std::shared_ptr<std::atomic<bool>> handed_out;
  explicit operator bool() const { return device != nullptr; }
};

/// What a staged move did (invariants 2 and 3).
struct StagedMove {
  uint64_t wire = 0;  ///< bytes sent or received on the socket
  /// Bytes of the GPU memory that crossed the socket (sending) or landed in it (receiving).
  uint64_t memory = 0;
  Status copy;  ///< the failed copy that ended it early (ok: none failed)
};

/// Makes this thread's bounce buffer for `memory` if it has none (invariant 4), so that a
/// transfer can refuse before any byte moves; errors name the GPU.
Status staged_ready(const StagedMemory& memory);

/// Sends (`sending`) or receives n bytes of the GPU memory at `addr` on `s`, piece by piece
/// (invariants 1-3); `stop` may be null. Every byte moved (wire and memory n) unless stopped or
/// a copy failed; the socket's error (as send_all / recv_all's) is the result's error.
Result<StagedMove> move_staged(const Socket& s, const StagedMemory& memory, uint64_t addr,
                               uint64_t n, bool sending, Deadline deadline, const std::string& what,
                               std::chrono::milliseconds stall, const std::atomic<bool>* stop);

}  // namespace caf_rdma
