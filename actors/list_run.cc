// ListRun (see list_run.h).
#include "actors/list_run.h"

#include <algorithm>
#include <chrono>

#include "actors/stream_lane.h"

namespace caf_rdma {

namespace {

using Clock = std::chrono::steady_clock;

/// The outcome's landed prefix grown to `upto` ranges.
void landed_up_to(const TransferPlan& plan, size_t upto, ListOutcome& out) {
  for (size_t i = out.landed; i < upto; ++i)
    out.bytes += detail::plan_entries(plan)[i].length;
  out.landed = std::max<uint64_t>(out.landed, upto);
}

/// Invariant 4: true (the outcome failed `cancelled`) when the list was stopped before its
/// next step.
bool ended_by_stop(const TransferPlan& plan, const ListSteps& steps, ListOutcome& out) {
  if (!steps.stopped())
    return false;
  out.fail(list_cancelled_error(plan.size(), plan.is_read(), plan.remote(), out.landed, ""));
  return true;
}

/// A step's error ends the list: a step that was stopped (kCancelled) as invariant 4 says.
void fail_by_step(const TransferPlan& plan, const Error& error, ListOutcome& out) {
  if (error.code() == ErrorCode::kCancelled)
    out.fail(list_cancelled_error(plan.size(), plan.is_read(), plan.remote(), out.landed,
                                  error.message()));
  else
    out.fail(error);
}

/// Ranges [from, size) of `plan` through batches of kListBatch ops.
void post_batches(const TransferPlan& plan, size_t from, Clock::time_point deadline,
                  ListSteps& steps, ListOutcome& out) {
  std::vector<TransferOp> ops;
  for (size_t at = from; at < plan.size();) {
    if (ended_by_stop(plan, steps, out))
      return;
    const size_t n = std::min(plan.size() - at, kListBatch);
    const uint32_t left = list_ms_left(deadline);
    if (left == 0) {
      out.fail(list_timeout_error(plan.size(), plan.is_read(), plan.remote(), out.landed));
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
    auto outcomes = steps.batch(ops, left);
    if (!outcomes.ok()) {
      out.fail(outcomes.error());
      return;
    }
    for (size_t j = 0; j < n; ++j) {
      const TransferOutcome& o = (*outcomes)[j];
      if (!o.ok()) {
        out.fail(o.status().error().with_context(list_range_name(at + j, plan.size())));
        return;
      }
      landed_up_to(plan, at + j + 1, out);
      out.path = o.path;
    }
    at += n;
  }
}

}  // namespace

ListOutcome run_list(const TransferPlan& plan, Clock::time_point deadline, ListSteps& steps) {
  ListOutcome out;
  size_t from = 0;
  if (ended_by_stop(plan, steps, out))
    return out;
  // Whether any stream lane could carry it (its handles), before the lane is asked for; then
  // whether this one does, by its manager's threshold (path_choice.h invariant 6).
  std::shared_ptr<StreamLane> lane =
      StreamLane::may_carry(plan) ? steps.stream_lane(plan) : nullptr;
  if (lane && !lane->carries(plan))
    lane = nullptr;
  if (lane) {
    auto end = lane->post_list(plan, 0, deadline, steps.stop_signal());
    if (!end) {
      // The lane knows no endpoint of this owner yet (or cannot hold the local buffer): range
      // 0 goes the way of one transfer, whose grant teaches the lane the endpoint (or whose
      // error names what is wrong); then the lane again.
      const uint32_t left = list_ms_left(deadline);
      if (left == 0) {
        out.fail(list_timeout_error(plan.size(), plan.is_read(), plan.remote(), out.landed));
        return out;
      }
      if (ended_by_stop(plan, steps, out))
        return out;
      auto first = steps.transfer(plan.op(0), left);
      if (!first.ok()) {
        if (first.error().code() == ErrorCode::kCancelled)
          fail_by_step(plan, first.error(), out);
        else
          out.fail(first.error().with_context(list_range_name(0, plan.size())));
        return out;
      }
      landed_up_to(plan, 1, out);
      out.path = first->path;
      from = 1;
      if (ended_by_stop(plan, steps, out))
        return out;
      end = lane->post_list(plan, 1, deadline, steps.stop_signal());
    }
    if (end) {
      landed_up_to(plan, end->done, out);
      from = end->done;
      out.path = kPathFallback;
      if (end->error) {  // the lane's own list error (a stop's too: stream_lane.h invariant 6)
        out.fail(*end->error);
        return out;
      }
    }
  }
  if (from < plan.size() && !ended_by_stop(plan, steps, out))
    if (auto end = steps.rdma_list(plan, from, deadline)) {
      if (end->done > from)
        out.path = kPathRdma;
      landed_up_to(plan, end->done, out);
      from = end->done;
      if (end->error) {
        fail_by_step(plan, *end->error, out);
        return out;
      }
    }
  if (!out.ok())
    return out;  // stopped before the lane's step
  post_batches(plan, from, deadline, steps, out);
  return out;
}

}  // namespace caf_rdma
