// ListWorker (see list_worker.h).
#include "actors/list_worker.h"

#include <caf/actor_cast.hpp>
#include <caf/blocking_actor.hpp>

#include <exception>
#include <optional>
#include <utility>
#include <vector>

#include "actors/cancel_request.h"
#include "actors/detail/node_objects.h"
#include "actors/direct_lane.h"
#include "actors/lane_grants.h"
#include "actors/list_run.h"
#include "actors/rdma_errors.h"
#include "actors/transfer_plan.h"

namespace caf_rdma {

namespace {

/// What a worker is called in its node's objects and its errors (node_objects.h).
constexpr const char* kWorkerName = "transfer list worker";

/// run_list's steps as requests to the manager from the worker.
class WorkerSteps final : public ListSteps {
public:
  WorkerSteps(caf::blocking_actor* self, rdma_manager_actor manager,
              std::shared_ptr<StreamLane> lane, std::shared_ptr<StopSignal> stop)
      : self_(self), manager_(std::move(manager)), lane_(std::move(lane)), stop_(std::move(stop)) {}

  std::shared_ptr<StreamLane> stream_lane(const TransferPlan&) override { return lane_; }
  /// Invariant 4: a list of more than one batch, over RDMA, on a direct lane of the worker's
  /// own, asked of the manager and closed as the list ends.
  std::optional<ListEnd> rdma_list(const TransferPlan& plan, size_t from,
                                   std::chrono::steady_clock::time_point deadline) override {
    const TransferOp probe = DirectLane::list_probe(plan, from);
    const uint32_t left = list_ms_left(deadline);
    if (plan.size() - from <= kListBatch || left == 0 || !DirectLane::takes(probe))
      return std::nullopt;
    if (probe.remote.owner.node() == manager_.node())
      return std::nullopt;  // buffers of one node: the manager's copies, no lane to open
    auto grant = ask<LaneGrant>(left, lane_open_atom::value, plan.remote(), left,
                                static_cast<uint8_t>(plan.priority()));
    if (!grant.ok() || !grant->lane ||
        DirectLane::manager_stripes(probe, grant->stripe_min_bytes, grant->stripes_one_device))
      return std::nullopt;  // striped ranges are the manager's
    return grant->lane->post_list(plan, from, list_ms_left(deadline), grant->verify,
                                  stop_flag(stop_.get()));
  }
  Result<TransferReply> transfer(const TransferOp& op, uint32_t timeout_ms) override {
    return ask<TransferReply>(timeout_ms, transfer_atom::value, op, timeout_ms);
  }
  Result<std::vector<TransferOutcome>> batch(const std::vector<TransferOp>& ops,
                                             uint32_t timeout_ms) override {
    auto outcomes =
        ask<std::vector<TransferOutcome>>(timeout_ms, batch_atom::value, ops, timeout_ms);
    if (outcomes.ok() && outcomes->size() != ops.size())
      return Error(ErrorCode::kInternal, "the manager answered a batch of " +
                                             std::to_string(ops.size()) + " ops with " +
                                             std::to_string(outcomes->size()) + " outcomes");
    return outcomes;
  }
  /// Invariant 5: the list's cancel.
  const StopSignal* stop_signal() const override { return stop_.get(); }

private:
  template <class T, class... Ts>
  Result<T> ask(uint32_t timeout_ms, Ts&&... xs) {
    // A node destroyed meanwhile: nothing to ask (invariant 3).
    if (Status alive = detail::node_alive(self_->home_system(), kWorkerName); !alive.ok())
      return alive.error();
    std::optional<Result<T>> out;
    auto handle = self_->request(manager_, std::chrono::milliseconds(timeout_ms) + kListReplyGrace,
                                 std::forward<Ts>(xs)...);
    // Invariant 5: a cancel of the list cancels this step too; its answer says how it ended.
    CancelOnStop on_stop(stop_.get(), caf::actor_cast<caf::actor>(self_), manager_, handle.id());
    handle.receive([&](T& value) { out.emplace(std::move(value)); },
                   [&](caf::error& err) { out.emplace(to_error(err)); });
    return std::move(*out);
  }

  caf::blocking_actor* self_;
  rdma_manager_actor manager_;
  std::shared_ptr<StreamLane> lane_;
  std::shared_ptr<StopSignal> stop_;
};

ListOutcome failed(const Error& e) {
  ListOutcome out;
  out.fail(e);
  return out;
}

}  // namespace

list_worker_actor spawn_list_worker(caf::actor_system& sys, rdma_manager_actor manager,
                                    std::shared_ptr<StreamLane> lane,
                                    const std::shared_ptr<std::atomic<size_t>>& running,
                                    std::shared_ptr<StopSignal> stop) {
  caf::actor worker =
      sys.spawn<caf::detached>([manager = std::move(manager), lane = std::move(lane), running,
                                stop = std::move(stop)](caf::blocking_actor* self) {
        // Listed among its node's objects for its life (invariant 3); counted until it ends.
        const uint64_t listed = detail::node_object_added(self->home_system(), kWorkerName);
        struct Leave {
          caf::actor_system& sys;
          uint64_t listed;
          std::shared_ptr<std::atomic<size_t>> running;
          ~Leave() {
            detail::node_object_removed(sys, listed);
            --*running;
          }
        } leave{self->home_system(), listed, running};
        self->receive(
            [&](transfer_list_atom, TransferListMsg& m, uint32_t timeout_ms) -> ListOutcome {
              // Invariant 2: an answer whatever happens (an exception included).
              try {
                const auto deadline =
                    std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
                auto plan = TransferPlan::make(static_cast<TransferKind>(m.kind), m.local, m.remote,
                                               std::move(m.ranges));
                if (!plan.ok())
                  return failed(plan.error());
                const auto priority = priority_from_wire(m.priority);
                if (!priority)
                  return failed(Error(ErrorCode::kInvalidArgument,
                                      "transfer list: " + unknown_priority_text(m.priority)));
                WorkerSteps steps(self, manager, lane, stop);
                return run_list(plan->as(*priority), deadline, steps);
              } catch (const std::exception& e) {
                return failed(Error(ErrorCode::kInternal,
                                    std::string("the transfer list's worker failed: ") + e.what()));
              }
            },
            [&](caf::message& other) -> caf::result<ListOutcome> {
              return make_rdma_error(ErrorCode::kInternal,
                                     "a transfer list's worker got " + to_string(other));
            });
      });
  return caf::actor_cast<list_worker_actor>(worker);
}

}  // namespace caf_rdma
