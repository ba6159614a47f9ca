// ListRun: how a transfer list moves, one rule for RdmaClient::post and for the manager's
// transfer_list request (an actor's list): the stream lane when it carries the list (one
// request per kMaxListRanges ranges), range 0 first as one transfer when the lane knows no
// endpoint of the owner yet (its grant teaches it); then what is left as one list op on a
// direct lane's queue pair where the caller has one; and the ranges no lane took in batches
// of kListBatch ops.
//
// Invariants:
//  1. ListOutcome::landed grows only over ranges whose move ended well, in list order: a lane
//     request's ranges once it ended well, a transfer's range once it answered, a batch's ops
//     up to the first that failed (transfer_plan.h invariant 4).
//  2. The first error ends the list; its text names the range (`range i of n`) or the lane
//     request's ranges (`ranges i to j of n`) it met the failure in.
//  3. Every step gets what is left of the list's deadline; none starts after it (the outcome is
//     then a timeout naming how many ranges landed).
//  4. None starts once the steps say the list was stopped (a CancelToken's cancel); a step that
//     stopped answers kCancelled. Either way the outcome is `cancelled` naming how many ranges
//     landed (invariant 1), and no later step runs.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "actors/rdma_messages.h"
#include "actors/transfer_plan.h"
#include "components/stop_signal.h"
#include "primitives/status.h"

namespace caf_rdma {

class StreamLane;

/// What run_list needs of whoever moves the list (a client's blocking calls, or a worker's
/// requests to its manager).
class ListSteps {
public:
  virtual ~ListSteps() = default;
  /// The stream lane for `plan`'s buffers; null: none.
  virtual std::shared_ptr<StreamLane> stream_lane(const TransferPlan& plan) = 0;
  /// Ranges [from, plan.size()) of `plan` as one list op on a queue pair of the caller's own
  /// (a direct lane: DirectLane invariant 6); nothing: none takes it.
  virtual std::optional<ListEnd> rdma_list(const TransferPlan& plan, size_t from,
                                           std::chrono::steady_clock::time_point deadline) {
    (void)plan, (void)from, (void)deadline;
    return std::nullopt;
  }
  /// One op, within `timeout_ms`, the way a single transfer goes.
  virtual Result<TransferReply> transfer(const TransferOp& op, uint32_t timeout_ms) = 0;
  /// Ops together, within `timeout_ms`, one outcome each.
  virtual Result<std::vector<TransferOutcome>> batch(const std::vector<TransferOp>& ops,
                                                     uint32_t timeout_ms) = 0;
  /// The list's stop (invariant 4): null, or a CancelToken's signal, which the stream lane's
  /// requests watch too (actors/stream_lane.h invariant 6).
  virtual const StopSignal* stop_signal() const { return nullptr; }
  /// Whether the list was stopped (invariant 4).
  bool stopped() const { return stop_requested(stop_signal()); }
};

/// Moves every range of `plan` by `deadline` (invariants 1-3).
ListOutcome run_list(const TransferPlan& plan, std::chrono::steady_clock::time_point deadline,
                     ListSteps& steps);

}  // namespace caf_rdma
