// ListWorker: the manager's answer to an actor's transfer list (transfer_list_atom): a detached
// blocking actor per list, to which the manager delegates the request, that validates the list
// (TransferPlan::make) and moves it with run_list (actors/list_run.h), over this node's stream
// lane, a direct lane of its own or through batches asked of the manager, then answers the
// actor that asked.
//
// Invariants:
//  1. The manager's thread never blocks on a list: validation and every wait run on the
//     worker's own thread; what the worker asks of the manager (one transfer, batches) are
//     requests like any local actor's, each bounded by what is left of the list's timeout plus
//     kListReplyGrace. At most kMaxListWorkers run at once per manager; beyond, a list is
//     refused (resource_exhausted) before any thread starts.
//  2. A worker answers exactly one request, whatever happens in it (an exception is answered
//     as an internal error), and ends. It moves the list by the same steps (run_list) as
//     RdmaClient::post, over this node's stream lane, with the manager's transfers and
//     batches where no lane takes it (never a client's direct lanes).
//  3. A worker is listed among its node's objects while it runs (detail/node_objects.h): a
//     node destroyed meanwhile never waits for it (its system is kept, said on stderr), and
//     the worker's next step fails at once.
//  4. What is left of a list after the stream lane, if more than one batch (kListBatch ranges)
//     and over RDMA, moves as one list op on a direct lane of the worker's own (DirectLane
//     invariant 6), asked of the manager as a client asks (lane_open_atom) and closed when the
//     list ends: one handshake instead of a request and its ops' state per batch. Not in the
//     manager's verify mode, nor for ranges it would stripe.
//  5. A cancel of the list's request (manager invariant 24) asks the worker's stop: no step
//     starts after it (list_run.h invariant 4), the stream lane's and the direct lane's step
//     stop mid-way, and a step asked of the manager is cancelled there (cancel_request.h).
#pragma once

#include <caf/actor_system.hpp>
#include <caf/typed_actor.hpp>

#include <atomic>
#include <chrono>
#include <memory>

#include "actors/rdma_manager_interface.h"
#include "components/stop_signal.h"

namespace caf_rdma {

class StreamLane;

/// How long past a step's own timeout a worker waits for the manager's answer.
constexpr std::chrono::seconds kListReplyGrace{10};
/// Workers one manager runs at once (invariant 1).
constexpr size_t kMaxListWorkers = 16;

using list_worker_actor = caf::typed_actor<
    caf::replies_to<transfer_list_atom, TransferListMsg, uint32_t>::with<ListOutcome>>;

/// A worker for one list, asking `manager` for what `lane` (this node's stream lane; null:
/// none) does not move. The caller counted it in `running`, which the worker counts down when
/// it ends; `stop` is the list's cancel (invariant 5).
list_worker_actor spawn_list_worker(caf::actor_system& sys, rdma_manager_actor manager,
                                    std::shared_ptr<StreamLane> lane,
                                    const std::shared_ptr<std::atomic<size_t>>& running,
                                    std::shared_ptr<StopSignal> stop);

}  // namespace caf_rdma
