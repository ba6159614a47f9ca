// ListWorker (see list_worker.h).
#include "actors/list_worker.h"

#include <caf/actor_cast.hpp>
#include <caf/blocking_actor.hpp>

#include <optional>
#include <utility>
#include <vector>

#include "actors/list_run.h"
#include "actors/rdma_errors.h"
#include "actors/transfer_plan.h"

namespace caf_rdma {

namespace {

/// run_list's steps as requests to the manager from the worker.
class WorkerSteps final : public ListSteps {
public:
  WorkerSteps(caf::blocking_actor* self, rdma_manager_actor manager,
              std::shared_ptr<StreamLane> lane)
      : self_(self), manager_(std::move(manager)), lane_(std::move(lane)) {}

  std::shared_ptr<StreamLane> stream_lane(const TransferPlan&) override { return lane_; }
  Result<TransferReply> transfer(const TransferOp& op, uint32_t timeout_ms) override {
    return ask<TransferReply>(timeout_ms, transfer_atom::value, op, timeout_ms);
  }
  Result<std::vector<TransferOutcome>> batch(const std::vector<TransferOp>& ops,
                                             uint32_t timeout_ms) override {
    return ask<std::vector<TransferOutcome>>(timeout_ms, batch_atom::value, ops, timeout_ms);
  }

private:
  template <class T, class... Ts>
  Result<T> ask(uint32_t timeout_ms, Ts&&... xs) {
    std::optional<Result<T>> out;
    self_
        ->request(manager_, std::chrono::milliseconds(timeout_ms) + kListReplyGrace,
                  std::forward<Ts>(xs)...)
        .receive([&](T& value) { out.emplace(std::move(value)); },
                 [&](caf::error& err) { out.emplace(to_error(err)); });
    return std::move(*out);
  }

  caf::blocking_actor* self_;
  rdma_manager_actor manager_;
  std::shared_ptr<StreamLane> lane_;
};

}  // namespace

list_worker_actor spawn_list_worker(caf::actor_system& sys, rdma_manager_actor manager,
                                    std::shared_ptr<StreamLane> lane) {
  caf::actor worker = sys.spawn<caf::detached>([manager = std::move(manager),
                                                lane = std::move(lane)](caf::blocking_actor* self) {
    self->receive([&](transfer_list_atom, TransferListMsg& m, uint32_t timeout_ms) -> ListOutcome {
      const auto deadline =
          std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
      auto plan = TransferPlan::make(static_cast<TransferKind>(m.kind), m.local, m.remote,
                                     std::move(m.ranges));
      if (!plan.ok()) {
        ListOutcome refused;
        refused.fail(plan.error());
        return refused;
      }
      WorkerSteps steps(self, manager, lane);
      return run_list(*plan, deadline, steps);
    });
  });
  return caf::actor_cast<list_worker_actor>(worker);
}

}  // namespace caf_rdma
