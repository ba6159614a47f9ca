// DirectLane: a queue pair of its own to one owner manager, opened by this node's manager for
// a thread that is not an actor (RdmaClient). That thread posts its reads and writes and polls
// their completions itself: no message and no thread hop per op. (Monarch's design: the
// manager hands out the queue pair, the caller drives it.)
//
// Invariants:
//  1. A lane runs only what it can check without the manager: a local buffer listed in the
//     manager's DirectRegistry (live, registered with the NIC) and a remote handle of the
//     lane's owner with an RDMA registration. For anything else `transfer` returns nothing and
//     the caller asks the manager, which gives the answer (unknown or released buffer, rdma-
//     staged GPU memory, ...). Atomics are never a lane's: the manager runs them.
//  2. The checks and their error texts are the manager's (actors/transfer_checks.h). A timeout
//     flushes the queue pair before `transfer` returns, so the NIC no longer touches the
//     buffers; a release of a local buffer replies only after the lane's op on it ended.
//  3. A lane whose queue pair failed is `broken()`: drop it; its destructor tells the manager,
//     which has the owner close its side. A new lane is a new handshake.
//  4. One op at a time: a thread whose op finds the lane running another thread's op gets
//     nothing from `transfer`/`batch` at once (its caller takes the next way), never a wait on
//     that op. The manager may only `retire` it, from its own thread.
//  5. A retired lane (its device went away) lets go of its queue pair at once if no op of its
//     client is running, else as that op ends, whether or not the client uses the lane again:
//     a lane kept by an idle client does not keep a lost device from being removed. A retired
//     lane is `broken()` and runs nothing (`transfer` returns nothing: the manager answers).
//  6. A transfer list (TransferPlan, validated when it was made) is one op on the queue pair
//     (RdmaQueuePair invariant 13): the local buffer is checked and held once, not per range;
//     it moves every range, or says how many landed (exact from below) and leaves the rest.
//  7. An op or list given a stop flag (a CancelToken's) ends early once it is set: the queue
//     pair is flushed before the answer (QpEndpoint invariant 6), which is kCancelled, and the
//     lane is broken (its client makes a new one). A stopped list says how many ranges landed
//     and ends there: nothing of it goes another way.
#pragma once

#include <caf/actor.hpp>
#include <caf/allowed_unsafe_message_type.hpp>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "actors/direct_registry.h"
#include "actors/lane_grants.h"
#include "actors/rdma_messages.h"
#include "actors/transfer_plan.h"
#include "components/qp_endpoint.h"
#include "primitives/status.h"

namespace caf_rdma {

class DirectLane {
public:
  DirectLane(uint64_t id, std::shared_ptr<QpEndpoint> qp, std::shared_ptr<DirectRegistry> registry,
             caf::actor manager, caf::actor owner, std::string owner_name, uint32_t max_timeout_ms);
  /// Tells the manager the lane is gone (it closes the owner's side).
  ~DirectLane();

  DirectLane(const DirectLane&) = delete;
  DirectLane& operator=(const DirectLane&) = delete;

  /// Runs one transfer; nothing when the lane cannot run it (ask the manager instead).
  /// `timeout_ms` is cut to the manager's max_timeout, as the manager cuts its own.
  /// `fault` (optional) tells what kind of failure a failed op met. `stop` (optional): a flag
  /// whose setting ends the op early (invariant 7).
  std::optional<Result<TransferReply>> transfer(const TransferOp& op, uint32_t timeout_ms,
                                                OpFault* fault = nullptr,
                                                const std::atomic<bool>* stop = nullptr);
  /// Runs a batch as one chain of work requests; nothing unless the lane can run every op.
  /// `faults` (optional) gets one OpFault per op.
  std::optional<std::vector<TransferOutcome>> batch(const std::vector<TransferOp>& ops,
                                                    uint32_t timeout_ms,
                                                    std::vector<OpFault>* faults = nullptr);

  /// Moves ranges [from, plan.size()) of `plan` as one list op on the queue pair (invariant
  /// 6); nothing when the lane cannot (as for `transfer`; buffers of one node; or `verify`, the
  /// grant's verify mode, which checks op by op). Else how far it got (`done`: the ranges
  /// before it are in place); an error only when `stop` (optional) ended it (kCancelled,
  /// invariant 7): else the ranges it did not move go the way of single ops, which explain
  /// their failure.
  std::optional<ListEnd> post_list(const TransferPlan& plan, size_t from, uint32_t timeout_ms,
                                   bool verify, const std::atomic<bool>* stop = nullptr);
  /// The op a lane for ranges [from, plan.size()) of `plan` is chosen by: its first range, as
  /// long as the most any batch of the list moves (the manager stripes a batch by what it
  /// moves together: a list with a batch it would stripe is not a lane's, path_choice.h
  /// invariant 7).
  static TransferOp list_probe(const TransferPlan& plan, size_t from);
  /// The queue pair failed (remote access error, timeout, the owner vanished) or the lane was
  /// retired: drop the lane. While another thread's op runs on it, only retirement is seen.
  bool broken() const;
  /// Invariant 5: the manager's device went away; the lane lets go of its queue pair (now, or
  /// when its client's op in progress ends). Never waits for that op.
  void retire();
  /// Whether `op`'s path is a direct lane's by what its handles show (path_choice.h invariant
  /// 6; the lane's grant checks the rest: device, port, fabric, mode).
  static bool takes(const TransferOp& op);
  /// Whether the lane's manager would stripe `op` (path_choice.h invariant 7; its grant's
  /// `stripe_min_bytes` and `stripes_one_device`): such an op goes to it, not down the lane.
  static bool manager_stripes(const TransferOp& op, uint64_t stripe_min_bytes,
                              bool stripes_one_device);
  uint64_t id() const { return id_; }
  const caf::actor& owner() const { return owner_; }
  const std::string& owner_name() const { return owner_name_; }

private:
  struct Prepared {
    RdmaOp op;
    uint64_t local_id = 0;
    uint64_t length = 0;
  };

  /// Nothing: not this lane's op (nothing acquired). An error: a check failed (nothing held).
  std::optional<Result<Prepared>> prepare(const TransferOp& op);
  /// Ends the op's use of its local buffer and turns the result into an outcome.
  TransferOutcome finish(const TransferOp& op, const Prepared& p, const OpResult& r,
                         uint32_t timeout_ms, std::chrono::steady_clock::time_point started);
  /// Records how op `op` ended in the lanes' telemetry (actors/manager/telemetry.h).
  void record(const TransferOp& op, const TransferOutcome& out,
              std::chrono::steady_clock::time_point started) const;
  /// With mu_ held: lets go of the queue pair if the lane was retired (invariant 5).
  void settle_locked() const;
  /// A client call's hold on the lane: mu_ for its duration; at its end the queue pair goes
  /// if the lane was retired meanwhile (invariant 5).
  class Use;

  uint64_t id_;
  /// Held by the client's calls, tried by `retire` (invariant 5); guards qp_.
  mutable std::mutex mu_;
  std::atomic<bool> retired_{false};
  /// An op found the queue pair failed (set as it ended): broken() sees it without the lock.
  mutable std::atomic<bool> failed_{false};
  mutable std::shared_ptr<QpEndpoint> qp_;  ///< null once retired
  std::shared_ptr<DirectRegistry> registry_;
  caf::actor manager_;
  caf::actor owner_;
  std::string owner_name_;
  uint32_t max_timeout_ms_;  ///< the manager's ManagerOptions::max_timeout
};

}  // namespace caf_rdma
