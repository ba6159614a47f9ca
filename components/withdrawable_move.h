// A claimed range moved between a stream connection and the owner's memory in pieces, so that
// the owner's release (the grant's Withdrawal, withdrawal.h) stops it between two pieces
// (stream_server.h invariant 14). No CAF.
//
// Invariants:
//  1. The withdrawal is looked at before each piece of at most kWithdrawablePiece bytes: once it
//     is set, the memory is touched by one piece at most (the one already under way), and
//     move_until_withdrawn returns what had moved, so that the caller can let the release go
//     before the rest crosses the wire.
//  2. move_rest_without_memory keeps a withdrawn transfer's connection in step with the
//     protocol without the memory: the rest of a write is read and dropped, zeros are sent for
//     the rest of a read.
//  3. Every wait is bounded by `deadline` and, between two bytes, by `stall` (socket_io.h); a
//     failed connection's error is returned as it is.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "components/socket_io.h"
#include "components/stream_protocol.h"

namespace caf_rdma {

/// Invariant 1: bytes moved between two looks at the withdrawal.
constexpr uint64_t kWithdrawablePiece = 4ull << 20;
// A small request by handle (at most kEagerBytes) is one piece: withdrawn, it moved nothing.
static_assert(kEagerBytes <= kWithdrawablePiece, "an eager request must be one piece");

/// Moves [addr, addr + length) of the owner's memory (received from `s` for kIntoOwner, sent on
/// it for kOutOfOwner) until done or withdrawn: the bytes moved (`length`: all of them), or the
/// connection's error. `what` names the bytes for errors.
Result<uint64_t> move_until_withdrawn(const Socket& s, uint8_t* addr, uint64_t length,
                                      StreamDirection direction, Deadline deadline,
                                      std::chrono::milliseconds stall, const Withdrawal& withdrawal,
                                      const std::string& what);

/// Invariant 2: the last `rest` bytes of a withdrawn transfer, without the memory.
Status move_rest_without_memory(const Socket& s, uint64_t rest, StreamDirection direction,
                                Deadline deadline, std::chrono::milliseconds stall,
                                const std::string& what);

}  // namespace caf_rdma
