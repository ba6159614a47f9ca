// RdmaClient's transfer lists: prepare and post (see rdma_client.h and transfer_plan.h).
#include <algorithm>
#include <chrono>
#include <limits>

#include "actors/rdma_client.h"
#include "actors/stream_lane.h"

namespace caf_rdma {

namespace {

using Clock = std::chrono::steady_clock;

/// Milliseconds left until `deadline` as a transfer takes them (0: none left).
uint32_t ms_left(Clock::time_point deadline) {
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return static_cast<uint32_t>(std::clamp<int64_t>(left, 0, std::numeric_limits<uint32_t>::max()));
}

/// The outcome's landed prefix grown to `upto` ranges.
void landed_up_to(const TransferPlan& plan, size_t upto, ListOutcome& out) {
  for (size_t i = out.landed; i < upto; ++i)
    out.bytes += detail::plan_entries(plan)[i].length;
  out.landed = std::max<uint64_t>(out.landed, upto);
}

Error list_timeout(const TransferPlan& plan, const ListOutcome& out) {
  return Error(ErrorCode::kTimeout, "a list of " + std::to_string(plan.size()) + " ranges " +
                                        (plan.is_read() ? "from " : "into ") +
                                        describe(plan.remote()) + ": its time ran out after " +
                                        std::to_string(out.landed) + " ranges had landed");
}

}  // namespace

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
  ListOutcome out;
  if (Status alive = node_alive(); !alive.ok()) {
    out.status = alive;
    return out;
  }
  const auto deadline = Clock::now() + timeout;
  size_t from = 0;
  std::shared_ptr<StreamLane> lane = StreamLane::carries(plan.local(), plan.remote())
                                         ? stream_lane(plan.local(), plan.remote())
                                         : nullptr;
  if (lane) {
    auto end = lane->post_list(plan, 0, deadline);
    if (!end) {
      // The lane knows no endpoint of this owner yet (or cannot hold the local buffer): range
      // 0 goes the way of one transfer, whose grant teaches the lane the endpoint (or whose
      // error names what is wrong); then the lane again.
      auto first = transfer(plan.op(0), std::max<uint32_t>(1, ms_left(deadline)));
      if (!first.ok()) {
        out.status = first.error().with_context("range 0 of " + std::to_string(plan.size()));
        return out;
      }
      landed_up_to(plan, 1, out);
      out.path = first->path;
      from = 1;
      end = lane->post_list(plan, 1, deadline);
    }
    if (end) {
      landed_up_to(plan, end->done, out);
      from = end->done;
      out.path = kPathFallback;
      if (end->error) {
        out.status = *end->error;
        return out;
      }
    }
  }
  post_batches(plan, from, deadline, out);
  return out;
}

void RdmaClient::post_batches(const TransferPlan& plan, size_t from, Clock::time_point deadline,
                              ListOutcome& out) {
  std::vector<TransferOp> ops;
  for (size_t at = from; at < plan.size();) {
    const size_t n = std::min(plan.size() - at, kListBatch);
    const uint32_t left = ms_left(deadline);
    if (left == 0) {
      out.status = list_timeout(plan, out);
      return;
    }
    // The slots keep their handles between batches: only the offsets change.
    while (ops.size() < n)
      ops.push_back(plan.op(at + ops.size()));
    ops.resize(n);
    for (size_t j = 0; j < n; ++j) {
      const ListEntry& e = detail::plan_entries(plan)[at + j];
      ops[j].local_offset = e.peer_offset;
      ops[j].remote_offset = e.offset;
      ops[j].length = e.length;
    }
    auto outcomes = batch(ops, left);
    if (!outcomes.ok()) {
      out.status = outcomes.error();
      return;
    }
    for (size_t j = 0; j < n; ++j) {
      const TransferOutcome& o = (*outcomes)[j];
      if (!o.ok()) {
        out.status = o.status().error().with_context("range " + std::to_string(at + j) + " of " +
                                                     std::to_string(plan.size()));
        return;
      }
      landed_up_to(plan, at + j + 1, out);
      out.path = o.path;
    }
    at += n;
  }
}

}  // namespace caf_rdma
