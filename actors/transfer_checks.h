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

/// The message of a transfer that timed out (its work was flushed).
std::string timeout_message(const TransferOp& op, uint64_t length, uint32_t timeout_ms);

}  // namespace caf_rdma
