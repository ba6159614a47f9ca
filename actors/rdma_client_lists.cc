// RdmaClient's transfer lists: prepare and post (see rdma_client.h and transfer_plan.h).
#include <algorithm>
#include <chrono>
#include <limits>

#include "actors/list_run.h"
#include "actors/rdma_client.h"
#include "actors/stream_lane.h"

namespace caf_rdma {

Result<TransferPlan> RdmaClient::prepare(TransferKind kind, const BufferHandle& local,
                                         const BufferHandle& remote,
                                         std::vector<ListRange> ranges) {
  return TransferPlan::make(kind, local, remote, std::move(ranges));
}

Result<TransferPlan> RdmaClient::prepare(TransferKind kind, const BufferHandle& local,
                                         const BufferHandle& remote, const Strided& strided) {
  return TransferPlan::make(kind, local, remote, strided);
}

ListOutcome RdmaClient::post(const TransferPlan& plan, std::chrono::milliseconds timeout) {
  if (Status alive = node_alive(); !alive.ok()) {
    ListOutcome out;
    out.fail(alive.error());
    return out;
  }
  // The client's own ways: its lanes, then its manager.
  struct Steps final : ListSteps {
    explicit Steps(RdmaClient& c) : client(c) {}
    std::shared_ptr<StreamLane> stream_lane(const TransferPlan& p) override {
      return client.stream_lane(p.local(), p.remote());
    }
    Result<TransferReply> transfer(const TransferOp& op, uint32_t timeout_ms) override {
      return client.transfer(op, timeout_ms);
    }
    Result<std::vector<TransferOutcome>> batch(const std::vector<TransferOp>& ops,
                                               uint32_t timeout_ms) override {
      return client.batch(ops, timeout_ms);
    }
    RdmaClient& client;
  } steps(*this);
  return run_list(plan, std::chrono::steady_clock::now() + timeout, steps);
}

}  // namespace caf_rdma
