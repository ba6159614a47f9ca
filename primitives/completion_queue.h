// CompletionQueue: RAII owner of an ibv_cq and, optionally, its completion channel.
//
// Destruction order: QPs hold a shared_ptr to their CQs, so a CQ is destroyed after its QPs;
// the CQ is destroyed before its completion channel, and both before the DeviceContext.
#pragma once

#include <infiniband/verbs.h>

#include <chrono>
#include <memory>

#include "primitives/device_context.h"

namespace caf_rdma {

class CompletionQueue {
public:
  /// Creates a CQ with at least `entries` entries; with `with_channel`, completions can also be
  /// waited for with `wait_event` instead of busy polling.
  static Result<std::shared_ptr<CompletionQueue>> create(std::shared_ptr<DeviceContext> ctx,
                                                         int entries, bool with_channel);

  CompletionQueue(const CompletionQueue&) = delete;
  CompletionQueue& operator=(const CompletionQueue&) = delete;
  ~CompletionQueue();

  ibv_cq* get() const { return cq_; }
  int entries() const { return cq_->cqe; }
  bool has_channel() const { return channel_ != nullptr; }
  const std::shared_ptr<DeviceContext>& context() const { return context_; }

  /// Grows the CQ to at least `entries` (ibv_resize_cq); `entries()` is then what the device
  /// granted. The error names the device and both sizes (some providers cannot resize).
  Status resize(int entries);

  /// Takes up to `max` completions without blocking; returns how many were written to `out`.
  Result<int> poll(ibv_wc* out, int max);

  /// Arms the CQ for the next completion event (channel CQs only).
  Status request_notify();

  /// Waits up to `timeout` for a completion event on the channel and acknowledges it. Returns
  /// false when the timeout passed without an event. Call `request_notify` before, and poll after.
  Result<bool> wait_event(std::chrono::milliseconds timeout);

private:
  CompletionQueue(std::shared_ptr<DeviceContext> ctx, ibv_comp_channel* channel, ibv_cq* cq)
      : context_(std::move(ctx)), channel_(channel), cq_(cq) {}

  std::shared_ptr<DeviceContext> context_;
  ibv_comp_channel* channel_;
  ibv_cq* cq_;
  unsigned unacked_events_ = 0;
};

}  // namespace caf_rdma
