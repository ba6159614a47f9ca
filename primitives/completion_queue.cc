#include "primitives/completion_queue.h"

#include <fcntl.h>
#include <poll.h>

#include <cerrno>

#include "primitives/ibverbs_error.h"

namespace caf_rdma {

Result<std::shared_ptr<CompletionQueue>> CompletionQueue::create(std::shared_ptr<DeviceContext> ctx,
                                                                 int entries, bool with_channel) {
  if (entries < 1)
    return Error(ErrorCode::kInvalidArgument,
                 "completion queue size " + std::to_string(entries) + " must be 1 or more");
  ibv_comp_channel* channel = nullptr;
  if (with_channel) {
    errno = 0;
    channel = ibv_create_comp_channel(ctx->get());
    if (channel == nullptr)
      return ibverbs_error("ibv_create_comp_channel", errno ? errno : ENOMEM,
                           "device " + ctx->name());
    int flags = fcntl(channel->fd, F_GETFL);
    fcntl(channel->fd, F_SETFL, flags | O_NONBLOCK);
  }
  errno = 0;
  ibv_cq* cq = ibv_create_cq(ctx->get(), entries, nullptr, channel, 0);
  if (cq == nullptr) {
    int err = errno ? errno : ENOMEM;
    if (channel != nullptr)
      ibv_destroy_comp_channel(channel);
    return ibverbs_error("ibv_create_cq(" + std::to_string(entries) + " entries)", err,
                         "device " + ctx->name());
  }
  return std::shared_ptr<CompletionQueue>(new CompletionQueue(std::move(ctx), channel, cq));
}

CompletionQueue::~CompletionQueue() {
  if (unacked_events_ > 0)
    ibv_ack_cq_events(cq_, unacked_events_);
  ibv_destroy_cq(cq_);
  if (channel_ != nullptr)
    ibv_destroy_comp_channel(channel_);
}

Result<int> CompletionQueue::poll(ibv_wc* out, int max) {
  int n = ibv_poll_cq(cq_, max, out);
  if (n < 0)
    return ibverbs_error("ibv_poll_cq", EIO, "CQ of device " + context_->name());
  return n;
}

Status CompletionQueue::request_notify() {
  if (channel_ == nullptr)
    return Error(ErrorCode::kInvalidArgument, "request_notify on a CQ without a channel");
  if (int rc = ibv_req_notify_cq(cq_, 0); rc != 0)
    return ibverbs_error("ibv_req_notify_cq", rc, "CQ of device " + context_->name());
  return {};
}

Status CompletionQueue::resize(int entries) {
  const int before = cq_->cqe;
  if (int rc = ibv_resize_cq(cq_, entries); rc != 0)
    return ibverbs_error(
        "ibv_resize_cq(" + std::to_string(before) + " -> " + std::to_string(entries) + " entries)",
        rc, "device " + context_->name());
  return {};
}

Result<bool> CompletionQueue::wait_event(std::chrono::milliseconds timeout) {
  if (channel_ == nullptr)
    return Error(ErrorCode::kInvalidArgument, "wait_event on a CQ without a channel");
  pollfd pfd{channel_->fd, POLLIN, 0};
  int rc = ::poll(&pfd, 1, static_cast<int>(timeout.count()));
  if (rc < 0)
    return ibverbs_error("poll(completion channel)", errno, "device " + context_->name());
  if (rc == 0)
    return false;
  ibv_cq* ev_cq = nullptr;
  void* ev_ctx = nullptr;
  if (ibv_get_cq_event(channel_, &ev_cq, &ev_ctx) != 0) {
    if (errno == EAGAIN)
      return false;
    return ibverbs_error("ibv_get_cq_event", errno, "device " + context_->name());
  }
  // Acknowledging takes a mutex; batch the acks.
  if (++unacked_events_ >= 64) {
    ibv_ack_cq_events(cq_, unacked_events_);
    unacked_events_ = 0;
  }
  return true;
}

}  // namespace caf_rdma
