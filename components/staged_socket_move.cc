// Staged socket moves (see staged_socket_move.h).
#include "components/staged_socket_move.h"

#include <algorithm>

#include "components/bounce_buffer.h"

namespace caf_rdma {
namespace {

/// Invariant 4: this thread's bounce buffer, and the DeviceMemory that made it.
struct ThreadBounce {
  std::unique_ptr<BounceBuffer> buffer;
  const DeviceMemory* made_by = nullptr;
};

ThreadBounce& thread_bounce() {
  thread_local ThreadBounce bounce;
  return bounce;
}

}  // namespace

Status staged_ready(const StagedMemory& memory) {
  ThreadBounce& bounce = thread_bounce();
  if (bounce.buffer && bounce.made_by == memory.device.get())
    return {};
  bounce.buffer.reset();  // unlocked by the DeviceMemory that locked it
  bounce.made_by = nullptr;
  auto made = BounceBuffer::allocate(kStagedPiece, memory.device, memory.gpu);
  if (!made.ok())
    return made.error().with_context("a stream transfer's bounce buffer for GPU " +
                                     std::to_string(memory.gpu) + " memory");
  bounce.buffer = std::move(*made);
  bounce.made_by = memory.device.get();
  return {};
}

Result<StagedMove> move_staged(const Socket& s, const StagedMemory& memory, uint64_t addr,
                               uint64_t n, bool sending, Deadline deadline, const std::string& what,
                               std::chrono::milliseconds stall, const std::atomic<bool>* stop) {
  CAF_RDMA_RETURN_IF_ERROR(staged_ready(memory));
  uint8_t* piece_at = thread_bounce().buffer->data();
  // One piece on the socket: invariant 2's moves that a stop ends part-way.
  auto wire = [&](uint64_t piece) -> Result<uint64_t> {
    if (stop != nullptr)
      return move_until_stopped(s, piece_at, piece, sending, deadline, what, stall, *stop);
    CAF_RDMA_RETURN_IF_ERROR(sending ? send_all(s, piece_at, piece, deadline, what, stall)
                                     : recv_all(s, piece_at, piece, deadline, what, stall));
    return piece;
  };
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
      CAF_RDMA_ASSIGN_OR_RETURN(uint64_t sent, wire(piece));
      out.wire += sent;
      out.memory += sent;
      if (sent < piece)
        return out;  // stopped part-way (invariant 2)
    } else {
      CAF_RDMA_ASSIGN_OR_RETURN(uint64_t got, wire(piece));
      out.wire += got;
      if (got < piece)
        return out;  // stopped part-way: the part received is not copied (invariant 2)
      Status st = memory.device->copy_to_device(addr + out.memory, piece_at, piece, memory.gpu);
      if (!st.ok())
        return copy_failed(st.error());
      out.memory += piece;
    }
  }
  return out;
}

}  // namespace caf_rdma
