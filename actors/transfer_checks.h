// Checks of one transfer request that do not need the manager's state: the manager and the
// direct lanes (actors/direct_lane.h) run the same ones, so both give the same errors.
//
// Invariants:
//  1. Every op the manager or a lane moves passed checked_length: a known kind, offsets and
//     length inside both buffers, a writable destination.
//  2. An atomic passed checked_atomic besides: length kAtomicBytes, its remote word 8-byte
//     aligned in its owner's address space and inside the handle, the handle read-write and not
//     GPU memory its owner's NIC cannot reach, the local range inside a read-write buffer.
//  3. An atomic takes the NIC only on a device whose atomic_cap is not IBV_ATOMIC_NONE
//     (atomics_unsupported_text names the device and its atomic_cap otherwise).
//  4. Only a write asks for a notice (TransferOp::notify).
//  5. An op names a priority class (TransferOp::priority, components/priority.h).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "actors/rdma_messages.h"
#include "actors/stream_endpoints.h"
#include "primitives/status.h"

namespace caf_rdma {

/// "read", "write", "fetch-add" or "compare-swap" ("transfer" for an unknown kind).
const char* kind_name(uint8_t kind);

/// Checks `op` against its local buffer (registered size and access, as its owner recorded
/// them) and its remote handle: kind, offsets, Monarch's size rules for kWholeSpan, zero
/// length, read-only destinations. Returns the number of bytes the op moves, or an error
/// naming both buffers, the offsets and the sizes.
Result<uint64_t> checked_length(const TransferOp& op, uint64_t local_size,
                                BufferAccess local_access);

/// Invariant 2: the checks of an atomic (`op` of an atomic kind) beyond those of every op;
/// returns kAtomicBytes, or an error naming the buffer, the offset and what is wrong
/// ("misaligned", out of range, read-only, wrong length).
Result<uint64_t> checked_atomic(const TransferOp& op, uint64_t local_size,
                                BufferAccess local_access);

/// Invariant 3: why device `device` cannot run `kind` (an atomic), its atomic_cap being
/// `atomic_cap` (IBV_ATOMIC_NONE).
std::string atomics_unsupported_text(uint8_t kind, std::string_view device);
/// "KIND on a misaligned word: WHERE is not 8-byte aligned in its owner's address space": the
/// requester's check and the owner's say it alike.
std::string misaligned_word_text(uint8_t kind, const std::string& where);

/// Whether [a, a + n) and [b, b + n) share a byte (addresses of one process). Two ranges of
/// the same node that do cannot move by RDMA: the NIC gives overlapping bytes no order, so a
/// loopback READ or WRITE may copy bytes it already overwrote; the manager copies them with
/// memmove instead (and a direct lane leaves such an op to it).
bool ranges_overlap(uint64_t a, uint64_t b, uint64_t n);

/// Whether `endpoint`, which the grant of an owner called `owner_name` ("host:port") named,
/// may take requests by handle (which show the handle's secret): a loopback stream address
/// only from an owner whose own address is loopback too (on another host it would hand the
/// secret to whatever listens on that port here), or an owner on this very host (its
/// same-host endpoint is taken then, not the port).
bool stream_reachable(const StreamEndpoint& endpoint, const std::string& owner_name);

}  // namespace caf_rdma
