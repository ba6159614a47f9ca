// Checks of one transfer request that do not need the manager's state: the manager and the
// direct lanes (actors/direct_lane.h) run the same ones, so both give the same errors.
#pragma once

#include <cstdint>
#include <string>

#include "actors/rdma_messages.h"
#include "primitives/status.h"

namespace caf_rdma {

/// "read" or "write".
const char* kind_name(uint8_t kind);

/// Checks `op` against its local buffer (registered size and access, as its owner recorded
/// them) and its remote handle: kind, offsets, Monarch's size rules for kWholeSpan, zero
/// length, read-only destinations. Returns the number of bytes the op moves, or an error
/// naming both buffers, the offsets and the sizes.
Result<uint64_t> checked_length(const TransferOp& op, uint64_t local_size,
                                BufferAccess local_access);

/// Whether [a, a + n) and [b, b + n) share a byte (addresses of one process). Two ranges of
/// the same node that do cannot move by RDMA: the NIC gives overlapping bytes no order, so a
/// loopback READ or WRITE may copy bytes it already overwrote; the manager copies them with
/// memmove instead (and a direct lane leaves such an op to it).
bool ranges_overlap(uint64_t a, uint64_t b, uint64_t n);

}  // namespace caf_rdma
