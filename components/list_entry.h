// ListEntry: one range of a transfer list, as every layer that moves a list holds it (the
// stream channel's request table, a queue pair's list op, the actors' TransferPlan).
#pragma once

#include <cstdint>

namespace caf_rdma {

/// `length` bytes at `offset` of the owner's (remote) buffer and at `peer_offset` of the
/// requester's (local) memory.
struct ListEntry {
  uint64_t offset = 0;
  uint64_t peer_offset = 0;
  uint64_t length = 0;
};

}  // namespace caf_rdma
