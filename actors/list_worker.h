// ListWorker: the manager's answer to an actor's transfer list (transfer_list_atom): a detached
// blocking actor per list, to which the manager delegates the request, that validates the list
// (TransferPlan::make) and moves it with run_list (actors/list_run.h), over this node's stream
// lane or through batches asked of the manager, then answers the actor that asked.
//
// Invariants:
//  1. The manager's thread never blocks on a list: validation and every wait run on the
//     worker's own thread; what the worker asks of the manager (one transfer, batches) are
//     requests like any local actor's, each bounded by what is left of the list's timeout plus
//     kListReplyGrace.
//  2. A worker answers exactly one request and ends; the answer is the ListOutcome
//     RdmaClient::post would give for the same list (the same run_list).
#pragma once

#include <caf/actor_system.hpp>
#include <caf/typed_actor.hpp>

#include <chrono>
#include <memory>

#include "actors/rdma_manager_interface.h"

namespace caf_rdma {

class StreamLane;

/// How long past a step's own timeout a worker waits for the manager's answer.
constexpr std::chrono::seconds kListReplyGrace{10};

using list_worker_actor = caf::typed_actor<
    caf::replies_to<transfer_list_atom, TransferListMsg, uint32_t>::with<ListOutcome>>;

/// A worker for one list, asking `manager` for what `lane` (this node's stream lane; null:
/// none) does not move.
list_worker_actor spawn_list_worker(caf::actor_system& sys, rdma_manager_actor manager,
                                    std::shared_ptr<StreamLane> lane);

}  // namespace caf_rdma
