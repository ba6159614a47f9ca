// The one rule for an RDMA op the NIC failed, once the op's owner was asked whether it allows
// the access: the manager's RDMA path (RdmaPath::explain_refusal) and RdmaClient's direct lanes
// both ask (when asks_owner says so, within what is left of the op's time: no answer by its
// deadline makes the op's timeout, on either) and answer with owner_verdict, so the same
// failure gets the same code and the same words whichever of them ran the op. Pure: it sees
// the answers, not who asked.
//
// Invariants:
//  0. The owner is asked after every failure the NIC reported for the op (OpFault other than
//     kNone) that is not its timeout, not a peer already known down and not a flushed op that
//     runs once more.
//  1. The owner refused the access and the NIC's failure was a refusal (kRemoteAccess) or a
//     flush (the queue pair went to ERR, maybe for the same refusal of another op's): the
//     owner's code, worded by owner_refused_text (its reason is the truth the NIC could not
//     tell).
//  2. The owner allows it, or the NIC's failure was not a refusal: the NIC's error, as the NIC
//     said it.
//  3. Asking found the owner's node down (peer_unavailable): that error; the op's owner is gone.
//  4. Asking failed otherwise before the op's deadline (the owner's manager answered with an
//     error, or could not be asked): the NIC's code, its message saying that the owner did not
//     say why (owner_silent_text). The answer claims no more than what was seen.
#pragma once

#include "actors/rdma_messages.h"
#include "components/rdma_op.h"
#include "primitives/status.h"

namespace caf_rdma::detail {

/// Whether a failure the NIC reported as `fault` has its owner asked (invariant 0; the caller
/// has ruled out its timeout, a peer known down and a flushed op's second run).
bool asks_owner(OpFault fault);

/// What an op that the NIC failed with `nic` (as `fault`) answers, given what asking its owner
/// returned (`asked`: the owner's check of the access, or the error of asking).
Error owner_verdict(const TransferOp& op, const Error& nic, OpFault fault,
                    const Result<TransferOutcome>& asked);

}  // namespace caf_rdma::detail
