// A claimed range moved between a stream connection and the owner's memory in pieces, so that
// the owner's release (the grant's Withdrawal, stream_protocol.h) stops it between two pieces
// (stream_server.h invariant 14). No CAF.
//
// Invariants:
//  1. The withdrawal is looked at before each piece of at most kWithdrawablePiece bytes: once it
//     is set, the memory is touched by one piece at most (the one already under way).
//  2. A withdrawn transfer keeps its connection in step with the protocol: the rest of a write
//     is read into a scratch buffer and dropped, the rest of a read is sent as zeros, and the
//     result is released_midway_error (the caller sends it as the final status).
//  3. Every wait is bounded by `deadline` and, between two bytes, by `stall`
//     (socket_io.h); a failed connection's error is returned as it is.
#pragma once

#include <chrono>
#include <cstdint>

#include "components/socket_io.h"
#include "components/stream_protocol.h"

namespace caf_rdma {

/// Invariant 1: bytes moved between two looks at the withdrawal.
constexpr uint64_t kWithdrawablePiece = 4ull << 20;

/// Moves [addr, addr + length) of the owner's memory: received from `s` for kIntoOwner, sent
/// on it for kOutOfOwner. `what` names the bytes for errors.
Status move_withdrawable(const Socket& s, uint8_t* addr, uint64_t length, StreamDirection direction,
                         Deadline deadline, std::chrono::milliseconds stall,
                         const Withdrawal& withdrawal, const std::string& what);

}  // namespace caf_rdma
