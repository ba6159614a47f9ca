// cancel_request: how an actor stops a transfer, batch or transfer list it asked of its node's
// manager (cancel_atom), and how RdmaClient and the manager's list workers do it for a
// CancelToken (issue 50). The request's own answer is the only answer: `cancelled`, or what the
// transfer did before the cancel reached it (docs/guarantees.md, "Cancel").
//
// Invariants:
//  1. A cancel names a request by its sender and the 60-bit request id of CAF's message id
//     (caf::message_id::request_id); the manager keeps that name for the transfer's life only
//     (actors/detail/manager_state.h invariant 24), so a cancel that arrives after the answer,
//     or names no request of its sender, does nothing.
//  2. The cancel travels as a normal-priority message from the requester itself: CAF keeps the
//     order of one sender's messages to one receiver, so it never overtakes its request.
#pragma once

#include <caf/actor.hpp>
#include <caf/message_id.hpp>

#include "actors/rdma_manager_interface.h"
#include "components/stop_signal.h"

namespace caf_rdma {

/// Asks `manager` to stop what `requester` asked of it under `request` (the handle's `id()` of
/// `self->request(manager, ...)`: a response id is fine, only its request id counts). Any
/// thread; returns at once.
void cancel_request(const caf::actor& requester, const rdma_manager_actor& manager,
                    caf::message_id request);

/// While it lives: once `stop` (null: none) is asked to stop, `requester`'s request `request`
/// to `manager` is cancelled (StopSignal invariant 1: at once if it was asked already).
class CancelOnStop {
public:
  CancelOnStop(const StopSignal* stop, caf::actor requester, rdma_manager_actor manager,
               caf::message_id request);
  CancelOnStop(const CancelOnStop&) = delete;
  CancelOnStop& operator=(const CancelOnStop&) = delete;

private:
  caf::actor requester_;
  rdma_manager_actor manager_;
  caf::message_id request_;
  StopSignal::Armed armed_;  ///< last: disarmed first, before the handles go
};

}  // namespace caf_rdma
