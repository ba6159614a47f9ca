// Staged socket moves (see staged_socket_move.h).
#include "components/staged_socket_move.h"

#include <algorithm>

#include "components/bounce_buffer.h"

namespace caf_rdma {
namespace {

/// Invariant 4: this thread's bounce buffer, made on its first staged move.
Result<BounceBuffer*> thread_bounce(const StagedMemory& memory) {
  thread_local std::unique_ptr<BounceBuffer> bounce;
  if (!bounce) {
    auto made = BounceBuffer::allocate(kStagedPiece, memory.device, memory.gpu);
    if (!made.ok())
      return made.error().with_context("a stream transfer's bounce buffer");
    bounce = std::move(*made);
  }
  return bounce.get();
}

}  // namespace

Result<StagedMove> move_staged(const Socket& s, const StagedMemory& memory, uint64_t addr,
                               uint64_t n, bool sending, Deadline deadline, const std::string& what,
                               std::chrono::milliseconds stall, const std::atomic<bool>* stop) {
  auto bounce = thread_bounce(memory);
  if (!bounce.ok())
    return bounce.error();
  uint8_t* piece_at = (*bounce)->data();
  StagedMove out;
  while (out.memory < n) {
    if (stop != nullptr && stop->load(std::memory_order_acquire))
      return out;  // invariant 2: no piece starts once it is set
    const uint64_t piece = std::min(n - out.memory, kStagedPiece);
    auto copy_failed = [&](const Error& e) {
      out.copy = e.with_context(
          what + ": copying " + std::to_string(piece) + " bytes " + (sending ? "out of" : "into") +
          " GPU " + std::to_string(memory.gpu) + " memory at byte " + std::to_string(out.memory));
      return out;
    };
    if (sending) {
      Status st = memory.device->copy_to_host(piece_at, addr + out.memory, piece, memory.gpu);
      if (!st.ok())
        return copy_failed(st.error());  // invariant 3: the socket is not touched after it
      CAF_RDMA_RETURN_IF_ERROR(send_all(s, piece_at, piece, deadline, what, stall));
      out.wire += piece;
    } else {
      CAF_RDMA_RETURN_IF_ERROR(recv_all(s, piece_at, piece, deadline, what, stall));
      out.wire += piece;
      Status st = memory.device->copy_to_device(addr + out.memory, piece_at, piece, memory.gpu);
      if (!st.ok())
        return copy_failed(st.error());
    }
    out.memory += piece;
  }
  return out;
}

}  // namespace caf_rdma
