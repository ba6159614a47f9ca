// RdmaClient's transfer lists: prepare and post (see rdma_client.h and transfer_plan.h).
#include <algorithm>
#include <chrono>
#include <limits>

#include "actors/detail/async_request.h"
#include "actors/detail/client_list_walk.h"
#include "actors/list_run.h"
#include "actors/rdma_client.h"

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

Status RdmaClient::list_ready(std::chrono::milliseconds timeout) const {
  return timeout.count() > 0 ? node_alive() : Status(zero_list_timeout_error());
}

ListOutcome RdmaClient::post(const TransferPlan& plan, std::chrono::milliseconds timeout) {
  return post_walk(plan, timeout, nullptr);
}

ListOutcome RdmaClient::post(const TransferPlan& plan, std::chrono::milliseconds timeout,
                             const CancelToken& cancel) {
  CancelToken::Use use(cancel);
  ListOutcome out;
  if (use.refused() != nullptr) {
    out.fail(*use.refused());
    return out;
  }
  if (use.stopped())  // CancelToken invariant 3
    out.fail(list_cancelled_error(plan.size(), plan.is_read(), plan.remote(), 0, ""));
  else
    out = post_walk(plan, timeout, use.signal());
  use.end(out.status(), out.landed, out.bytes);
  return out;
}

ListOutcome RdmaClient::post_walk(const TransferPlan& plan, std::chrono::milliseconds timeout,
                                  const StopSignal* stop) {
  Status ready = list_ready(timeout);
  if (!ready.ok()) {
    ListOutcome out;
    out.fail(ready.error());
    return out;
  }
  // The client's own ways: its lanes, then its manager.
  ListWalk walk(*this, stop);
  return run_list(plan, std::chrono::steady_clock::now() + timeout, walk);
}

uint32_t RdmaClient::timeout_ms_of(std::chrono::milliseconds timeout) {
  return static_cast<uint32_t>(
      std::clamp<int64_t>(timeout.count(), 1, std::numeric_limits<uint32_t>::max()));
}

std::future<ListOutcome> RdmaClient::post_async(const TransferPlan& plan,
                                                std::chrono::milliseconds timeout) {
  return post_async_until(plan, timeout, nullptr);
}

std::future<ListOutcome> RdmaClient::post_async(const TransferPlan& plan,
                                                std::chrono::milliseconds timeout,
                                                const CancelToken& cancel) {
  return post_async_until(plan, timeout, std::make_shared<CancelToken::Use>(cancel));
}

std::future<ListOutcome> RdmaClient::post_async_until(
    const TransferPlan& plan, std::chrono::milliseconds timeout,
    const std::shared_ptr<CancelToken::Use>& use) {
  // Every answer passes here once: the token's use ends with it (CancelToken invariant 2).
  auto outcome = [use](Result<ListOutcome> r) {
    ListOutcome out;
    if (r.ok())
      out = std::move(*r);
    else
      out.fail(r.error());
    if (use)
      use->end(out.status(), out.landed, out.bytes);
    return out;
  };
  using detail::ready_future;
  if (use && use->refused() != nullptr) {  // CancelToken invariant 1: another transfer's token
    ListOutcome refused;
    refused.fail(*use->refused());
    return ready_future(std::move(refused));
  }
  if (use && use->stopped())  // CancelToken invariant 3
    return ready_future(
        outcome(list_cancelled_error(plan.size(), plan.is_read(), plan.remote(), 0, "")));
  Status ready = list_ready(timeout);
  if (!ready.ok())
    return ready_future(outcome(ready.error()));
  const uint32_t ms = timeout_ms_of(timeout);
  std::vector<ListRange> ranges(plan.size());
  for (size_t i = 0; i < ranges.size(); ++i)
    ranges[i] = plan.range(i);
  TransferListMsg m{wire_kind(plan.kind()), plan.local(), plan.remote(), std::move(ranges),
                    static_cast<uint8_t>(plan.priority())};
  return detail::async_request_until<ListOutcome>(sys_, manager_, reply_wait(ms), "transfer list",
                                                  use ? use->signal() : nullptr, outcome,
                                                  transfer_list_atom::value, std::move(m), ms);
}

}  // namespace caf_rdma
