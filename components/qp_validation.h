// What RdmaQueuePair::submit checks before it accepts an op: nothing that fails here reaches
// the NIC (RdmaQueuePair invariants 1, 2 and 9).
//
// Invariants:
//  1. Every local slice is in bounds of a live buffer registered with the queue pair's own
//     protection domain; a local destination (READ, RECV) is writable.
//  2. The remote range of a WRITE, READ or atomic is in bounds of its RemoteBuffer, and an
//     atomic's remote word is 8-byte aligned; atomics take no local slices.
//  3. A SEND or RECV fits one message (the maximum message size, the SGE limit of its queue).
//  4. A RemoteBuffer of another incarnation of the peer's device than the one the queue pair
//     is connected to is refused (its remote key might name someone else's memory now).
//  5. A list (RdmaOp::list) is a READ or WRITE with one local buffer and no immediate, of at
//     least one range, each range of at least one byte and inside both buffers; a refusal
//     names the range ("range i of n"). One pass over its ranges, nothing allocated.
//  6. Pure: reads only its arguments; every error names the op kind and what was wrong.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "components/rdma_op.h"
#include "primitives/protection_domain.h"
#include "primitives/status.h"

namespace caf_rdma {

/// What an op is checked against: the queue pair's, read under its mutex.
struct OpBounds {
  ibv_qp_cap caps{};                     ///< the QP's granted capabilities (SGE limits)
  uint64_t max_message = 0;              ///< largest message of one work request
  const ProtectionDomain* pd = nullptr;  ///< local buffers must be registered with it
  uint64_t remote_incarnation = 0;       ///< of the connected peer's domain (0: unknown)
  std::string_view qp_name;              ///< "rxe0 QP 17", for messages
};

/// Checks `op` against `bounds` (invariants 1-4); an error says what is wrong.
Status validate_op(const RdmaOp& op, const OpBounds& bounds);

}  // namespace caf_rdma
