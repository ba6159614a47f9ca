// RdmaClient::ListWalk: the ListSteps of a client's list (actors/list_run.h), private to
// RdmaClient's sources. Each step is one inline call into the RdmaClient file that owns that
// way (rdma_client_lanes.cc for its lanes, rdma_client.cc for its manager), so that the walk of
// one list from RdmaClient::post down to the queue pair enters each file once
// (docs/architecture.md, Transfer lists). A nested class of RdmaClient: it reaches the client's
// private ways without making ListSteps part of the public rdma_client.h.
//
// Invariants:
//  1. It holds no state of its own: a walk lives for one post, on the posting thread.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <vector>

#include "actors/list_run.h"
#include "actors/rdma_client.h"

namespace caf_rdma {

class RdmaClient::ListWalk final : public ListSteps {
public:
  /// `stop`: null, or a CancelToken's signal (list_run.h invariant 4).
  ListWalk(RdmaClient& client, const StopSignal* stop) : client_(client), stop_(stop) {}

  std::shared_ptr<StreamLane> stream_lane(const TransferPlan& plan) override {
    return client_.stream_lane(plan.local(), plan.remote());
  }
  std::optional<ListEnd> rdma_list(const TransferPlan& plan, size_t from,
                                   std::chrono::steady_clock::time_point deadline) override {
    return client_.rdma_list(plan, from, deadline, stop_);
  }
  Result<TransferReply> transfer(const TransferOp& op, uint32_t timeout_ms) override {
    return client_.transfer_until(op, timeout_ms, stop_);
  }
  Result<std::vector<TransferOutcome>> batch(const std::vector<TransferOp>& ops,
                                             uint32_t timeout_ms) override {
    return client_.batch_until(ops, timeout_ms, stop_);
  }
  const StopSignal* stop_signal() const override { return stop_; }

private:
  RdmaClient& client_;
  const StopSignal* stop_;
};

}  // namespace caf_rdma
