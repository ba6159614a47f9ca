// Staged cross-memory copies: a same-host request for cross-memory attach on GPU memory (which
// the kernel cannot copy) served by its owner through a page-locked staging buffer of its own:
// each piece is one GPU copy between the GPU memory and the staging buffer, and one cross-memory
// copy between the staging buffer and the requester's host memory (cross_memory.h), the GPU copy
// of one piece running beside the cross-memory copy of the next (stream_server.h invariant 19).
// No CAF.
//
// Invariants:
//  1. The GPU memory is touched by DeviceMemory's copies only, the requester's memory by
//     cross_memory_copy only: its invariants (the SO_PEERCRED pid, the deadline, the
//     withdrawal, a requester that stops waiting, the request's class) hold for every piece.
//  2. Two halves of kStagedCrossPiece bytes per worker thread, page-locked through the grant's
//     DeviceMemory where it can be, made at the thread's first such copy and kept for its life;
//     a copy through another DeviceMemory (only in a test) makes them again. staged_cross_ready
//     makes them before a request is served: when they cannot be made (an error naming the
//     GPU), its caller moves the bytes in-band, nothing moved.
//  3. Pipelined: a copy of more than one piece runs its GPU copies on a helper thread of its own
//     while this thread runs the cross-memory copies: out of the GPU, piece k+1 is copied out
//     while piece k goes to the requester; into the GPU, piece k is copied in while piece k+1
//     comes from the requester. The helper is joined before the call returns: no byte moves
//     after it, on either side.
//  4. Once the withdrawal is seen, or a copy fails, no further piece starts on either side; a
//     piece whose cross-memory copy was withdrawn or failed part-way is not copied into the GPU.
//     The result is released_midway_error with the bytes that landed (withdrawn), or the first
//     failure: a GPU copy's names the GPU and the byte of the range its piece starts at.
//  5. `refused` (cross_memory.h invariant 3) is set only when the first piece's cross-memory
//     copy was refused before any byte moved: nothing landed in the GPU memory or the
//     requester's, and the caller may move the bytes in-band.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <string>

#include "components/priority.h"
#include "components/socket_io.h"
#include "components/staged_socket_move.h"
#include "components/withdrawal.h"

namespace caf_rdma {

/// Invariant 2: bytes per piece (each half of the staging buffer), as large as a cross-memory
/// copy needs to run on several threads (kCrossMemoryParallelMin).
constexpr uint64_t kStagedCrossPiece = 8ull << 20;

/// Makes this thread's staging buffer for `memory` if it has none (invariant 2).
Status staged_cross_ready(const StagedMemory& memory);

/// Copies `n` bytes between GPU memory `memory` at `gpu_addr` and `remote_addr` in process `pid`
/// (into pid's memory when `to_remote`: a read served by the owner; else out of it), with
/// cross_memory_copy's arguments and meaning (`subject` names the owner's side for errors).
Status staged_cross_memory_copy(pid_t pid, const StagedMemory& memory, uint64_t gpu_addr,
                                uint64_t remote_addr, uint64_t n, bool to_remote, Deadline deadline,
                                const std::string& subject, bool* refused,
                                const Withdrawal& withdrawal,
                                const std::function<bool()>& requester_gone, Priority priority);

}  // namespace caf_rdma
