// A claimed range moved between a stream connection and the owner's memory so that the owner's
// release (the grant's Withdrawal, withdrawal.h) stops it at once (stream_server.h invariant
// 14). No CAF.
//
// Invariants:
//  1. The withdrawal is looked at before every socket call that touches the memory, and at least
//     every kStopLook while the peer is waited for (socket_io.h, move_until_stopped): once it
//     is set, the memory is touched by the call under way at most, whatever the peer does
//     (one that trickles its bytes or stalls included), and move_until_withdrawn returns what
//     had moved, so that the caller can let the release go before the rest crosses the wire.
//     (Under TLS a record already sealed from the memory may still leave, retried from the
//     scratch buffer: a read's peer may get up to one record, 16 KiB, of owner bytes past
//     the count; the memory is not read again.)
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

/// The most bytes moved without the memory per call (invariant 2), and the most a small read by
/// handle sends after its one look at the withdrawal (withdrawn before it, it sent zeros).
constexpr uint64_t kWithdrawablePiece = 4ull << 20;
static_assert(kEagerBytes <= kWithdrawablePiece, "a small read by handle must fit one look");

/// Moves [addr, addr + length) of the owner's memory (received from `s` for kIntoOwner, sent on
/// it for kOutOfOwner) until done or withdrawn: the bytes moved (`length`: all of them), or the
/// connection's error. `what` names the bytes for errors.
Result<uint64_t> move_until_withdrawn(const Socket& s, uint8_t* addr, uint64_t length,
                                      StreamDirection direction, Deadline deadline,
                                      std::chrono::milliseconds stall, const Withdrawal& withdrawal,
                                      const std::string& what);

/// The same for pieces of the owner's memory moved in order as one range (socket_io.h,
/// move_pieces: on plain TCP the kernel gathers and scatters them).
Result<uint64_t> move_until_withdrawn(const Socket& s, const iovec* pieces, size_t count,
                                      StreamDirection direction, Deadline deadline,
                                      std::chrono::milliseconds stall, const Withdrawal& withdrawal,
                                      const std::string& what);

/// Invariant 2: the last `rest` bytes of a withdrawn transfer, without the memory.
Status move_rest_without_memory(const Socket& s, uint64_t rest, StreamDirection direction,
                                Deadline deadline, std::chrono::milliseconds stall,
                                const std::string& what);

}  // namespace caf_rdma
