#include "components/rdma_queue_pair.h"

#include <algorithm>

#include "components/qp_validation.h"

namespace caf_rdma {

namespace {

constexpr int kPollBatch = 32;

/// Invariants 7 and 8 for a new QP: takes the granted queue and inline sizes, and grows the
/// CQ of its own to hold them (or lowers the posting limits to what it holds).
Status fit_queues(detail::QpState& s) {
  const ibv_qp_cap& caps = s.qp->caps();
  s.limits.send = caps.max_send_wr;
  s.limits.receive = caps.max_recv_wr;
  s.limits.inline_bytes = caps.max_inline_data;
  if (s.router)
    return {};  // a shared CQ: credits bound what is posted (invariant 10)
  const uint64_t needed = uint64_t{s.limits.send} + s.limits.receive;
  if (static_cast<uint64_t>(s.cq->entries()) >= needed)
    return {};
  // A CQ that overflows loses completions (and errors the CQ and its QPs): grow it.
  uint64_t max_cqe = s.domain->context()->device_attr().max_cqe;
  uint64_t want = max_cqe > 0 ? std::min(needed, max_cqe) : needed;
  if (want > static_cast<uint64_t>(s.cq->entries()) &&
      s.cq->resize(static_cast<int>(std::min<uint64_t>(want, INT32_MAX))).ok() &&
      static_cast<uint64_t>(s.cq->entries()) >= needed)
    return {};
  // It cannot hold them all: post no more than it holds.
  auto cqe = static_cast<uint32_t>(s.cq->entries());
  s.limits.receive = std::min(s.limits.receive, cqe / 2);
  s.limits.send = std::min(s.limits.send, cqe - s.limits.receive);
  if (s.limits.send == 0)
    return Error(ErrorCode::kInvalidArgument, s.name + ": its completion queue of " +
                                                  std::to_string(cqe) +
                                                  " entries cannot hold one send completion");
  return {};
}

}  // namespace

// -- construction -----------------------------------------------------------------------------

RdmaQueuePair::RdmaQueuePair(std::shared_ptr<RdmaDomain> domain, const Options& options)
    : options_(options) {
  state_.domain = std::move(domain);
  state_.router = options.completions;
}

Result<std::unique_ptr<RdmaQueuePair>> RdmaQueuePair::create(
    const std::shared_ptr<RdmaDomain>& domain, const Options& options) {
  if (options.completions &&
      options.completions->completion_queue()->context()->get() != domain->context()->get())
    return Error(ErrorCode::kInvalidArgument,
                 "the shared completion queue given for a queue pair on " + domain->device_name() +
                     " was made on another opening of a device (" +
                     options.completions->completion_queue()->context()->name() +
                     "): a QP and its CQ must share one device context");
  CAF_RDMA_RETURN_IF_ERROR(
      options.traffic.check("the queue pair's traffic on " + domain->device_name()));
  std::unique_ptr<RdmaQueuePair> q(new RdmaQueuePair(domain, options));
  detail::QpState& s = q->state_;
  const IbverbsConfig& config = domain->config();
  if (options.completions) {
    s.cq = options.completions->completion_queue();
  } else {
    CAF_RDMA_ASSIGN_OR_RETURN(
        s.cq, CompletionQueue::create(domain->context(),
                                      static_cast<int>(config.effective_cq_entries()), false));
  }
  {
    // Not shared yet: only the router's poll lock matters (attach).
    std::lock_guard<std::mutex> poll_guard(s.poll_lock());
    std::lock_guard<std::mutex> guard(s.mu);
    CAF_RDMA_ASSIGN_OR_RETURN(s.qp, QueuePair::create(domain->pd(), s.cq, s.cq, config));
    s.name = s.qp->describe();
    if (s.router)
      s.router->attach(s.qp->qp_num(), q.get());
    CAF_RDMA_RETURN_IF_ERROR(fit_queues(s));
  }
  uint64_t port_max = domain->max_message_size() ? domain->max_message_size() : (1ull << 31);
  s.max_message =
      options.max_message_bytes ? std::min(options.max_message_bytes, port_max) : port_max;
  s.signal_interval =
      options.signal_interval ? options.signal_interval : std::max<uint32_t>(1, s.limits.send / 4);
  s.local_psn = random_psn();
  return q;
}

RdmaQueuePair::~RdmaQueuePair() {
  Done done;
  {
    std::lock_guard<std::mutex> poll_guard(state_.poll_lock());
    std::lock_guard<std::mutex> guard(state_.mu);
    destroy_qp_locked();
    if (state_.error)
      completions_.mark_flushed_locked();
    completions_.fail_all_locked(
        Error(ErrorCode::kPeerUnavailable, "queue pair destroyed with the op outstanding"), done);
  }
  QpCompletions::run(done);
}

void RdmaQueuePair::destroy_qp_locked() {
  // Destroying the QP guarantees the NIC no longer accesses any buffer of ours; once
  // detached, no completion reaches this object (CompletionRouter invariant 2).
  if (state_.router && state_.qp)
    state_.router->detach(state_.qp->qp_num(), this);
  state_.qp.reset();
}

QpInfo RdmaQueuePair::local_info() const {
  std::lock_guard<std::mutex> guard(state_.mu);
  QpInfo info = state_.domain->port_qp_info();
  info.qp_num = state_.qp ? state_.qp->qp_num() : 0;
  info.psn = state_.local_psn;
  return info;
}

// -- connection -------------------------------------------------------------------------------

Status RdmaQueuePair::connect(const QpInfo& remote) {
  std::lock_guard<std::mutex> guard(state_.mu);
  detail::QpState& s = state_;
  if (s.connected)
    return Error(ErrorCode::kInvalidArgument,
                 s.name + " is already connected to " + to_string(s.remote));
  if (!s.qp)
    return Error(ErrorCode::kPeerUnavailable, s.name + " has no queue pair to connect");
  // Invariant 14: a traffic class and service level of its own where its options give them.
  IbverbsConfig config = s.domain->config();
  if (options_.traffic.traffic_class >= 0)
    config.traffic_class = static_cast<uint8_t>(options_.traffic.traffic_class);
  if (options_.traffic.service_level >= 0)
    config.service_level = static_cast<uint8_t>(options_.traffic.service_level);
  CAF_RDMA_RETURN_IF_ERROR(s.qp->connect(config, remote, s.local_psn, s.domain->gid_index()));
  s.remote = remote;
  s.connected = true;
  return {};
}

Result<QpTraffic> RdmaQueuePair::traffic() const {
  std::lock_guard<std::mutex> guard(state_.mu);
  if (!state_.qp || !state_.connected)
    return Error(ErrorCode::kInvalidArgument, state_.name + " is not connected");
  CAF_RDMA_ASSIGN_OR_RETURN(ibv_ah_attr ah, state_.qp->address());
  QpTraffic t;
  t.service_level = ah.sl;
  t.traffic_class = ah.is_global ? ah.grh.traffic_class : -1;
  return t;
}

Status RdmaQueuePair::connect_loopback() {
  return connect(local_info());
}

Status RdmaQueuePair::connect_pair(RdmaQueuePair& a, RdmaQueuePair& b) {
  QpInfo ai = a.local_info();
  QpInfo bi = b.local_info();
  CAF_RDMA_RETURN_IF_ERROR(a.connect(bi));
  return b.connect(ai);
}

// -- submission -------------------------------------------------------------------------------

Status RdmaQueuePair::submit(RdmaOp op, OpCallback done) {
  return submit_internal(std::move(op), std::move(done), nullptr);
}

Status RdmaQueuePair::submit_queued(RdmaOp op, OpCallback done) {
  return submit_internal(std::move(op), std::move(done), nullptr, false);
}

void RdmaQueuePair::post_queued() {
  Done done;
  {
    std::lock_guard<std::mutex> guard(state_.mu);
    posting_.post_locked(done);
  }
  QpCompletions::run(done);
}

Status RdmaQueuePair::submit_internal(RdmaOp op, OpCallback done, uint64_t* id_out, bool post_now) {
  OpBounds bounds;
  {
    std::lock_guard<std::mutex> guard(state_.mu);
    if (!state_.connected)
      return Error(ErrorCode::kInvalidArgument,
                   state_.name + " is not connected; cannot " + to_string(op.kind));
    if (!state_.qp)
      return Error(ErrorCode::kPeerUnavailable,
                   state_.name +
                       " was destroyed after a timeout whose flush did not finish; cannot " +
                       to_string(op.kind));
    bounds.caps = state_.qp->caps();
    bounds.remote_incarnation = state_.remote.incarnation;
  }
  bounds.max_message = state_.max_message;
  bounds.pd = state_.domain->pd().get();
  bounds.qp_name = state_.name;
  CAF_RDMA_RETURN_IF_ERROR(validate_op(op, bounds));
  auto rec = std::make_unique<detail::QpOp>();
  CAF_RDMA_RETURN_IF_ERROR(posting_.plan(op, bounds.caps, *rec));
  rec->op = std::move(op);
  rec->done = std::move(done);
  Done done_now;
  {
    std::lock_guard<std::mutex> guard(state_.mu);
    if (detail::is_atomic(rec->op.kind))
      CAF_RDMA_RETURN_IF_ERROR(atomics_.ensure(*state_.domain));  // invariant 11
    rec->id = state_.next_op_id++;
    if (id_out != nullptr)
      *id_out = rec->id;
    state_.pending.push_back(rec->id);
    // Invariant 12: a receive waits on the peer, not on this side: it keeps nobody polling.
    const bool receive = rec->op.kind == OpKind::kRecv;
    state_.ops.emplace(rec->id, std::move(rec));
    if (receive)
      ++state_.receives;
    else if (state_.router)
      state_.router->op_started();
    if (post_now)
      posting_.post_locked(done_now);
    else
      queued_waiting_.store(true, std::memory_order_release);
  }
  QpCompletions::run(done_now);
  return {};
}

// -- completions ------------------------------------------------------------------------------

int RdmaQueuePair::progress() {
  if (state_.router) {
    int n = state_.router->poll();
    if (queued_waiting_.exchange(false, std::memory_order_acq_rel))
      post_queued();  // what submit_queued left, as with a CQ of its own
    return n;
  }
  std::unique_lock<std::mutex> poll_guard(state_.poll_mu, std::try_to_lock);
  if (!poll_guard.owns_lock())
    return 0;
  ibv_wc wcs[kPollBatch];
  auto n = state_.cq->poll(wcs, kPollBatch);
  Done done;
  if (n.ok())
    take_completions(wcs, *n, done);
  else
    take_poll_error(n.error(), done);
  poll_guard.unlock();
  QpCompletions::run(done);
  return n.ok() ? *n : 0;
}

void RdmaQueuePair::take_completions(const ibv_wc* wcs, int count, Done& done) {
  std::lock_guard<std::mutex> guard(state_.mu);
  completions_.take_locked(wcs, count, done);
  posting_.post_locked(done);
}

void RdmaQueuePair::take_poll_error(const Error& error, Done& done) {
  std::lock_guard<std::mutex> guard(state_.mu);
  completions_.enter_error_locked(error.message());
  completions_.fail_all_locked(error, done);
}

void RdmaQueuePair::take_credit(Done& done) {
  std::lock_guard<std::mutex> guard(state_.mu);
  posting_.resume_locked(done);
}

// -- errors and inspection --------------------------------------------------------------------

Status RdmaQueuePair::abort(const std::string& reason) {
  std::lock_guard<std::mutex> guard(state_.mu);
  if (!state_.qp)
    return Error(ErrorCode::kInternal, state_.name + " has no QP");
  completions_.enter_error_locked(reason);
  return {};
}

bool RdmaQueuePair::needs_recovery() const {
  std::lock_guard<std::mutex> guard(state_.mu);
  return state_.error;
}

uint64_t RdmaQueuePair::remote_incarnation() const {
  std::lock_guard<std::mutex> guard(state_.mu);
  return state_.remote.incarnation;
}

RdmaQueuePair::Stats RdmaQueuePair::stats() const {
  std::lock_guard<std::mutex> guard(state_.mu);
  return state_.stats;
}

size_t RdmaQueuePair::outstanding_work_requests() const {
  std::lock_guard<std::mutex> guard(state_.mu);
  return state_.send_in_flight.size();
}

size_t RdmaQueuePair::pending_ops() const {
  std::lock_guard<std::mutex> guard(state_.mu);
  return state_.ops.size();
}

bool RdmaQueuePair::idle() const {
  std::lock_guard<std::mutex> guard(state_.mu);
  return state_.ops.size() == state_.receives;  // invariant 12
}

RdmaQueuePair::Limits RdmaQueuePair::limits() const {
  std::lock_guard<std::mutex> guard(state_.mu);
  Limits l = state_.limits;
  l.completion_entries = state_.cq->entries();
  return l;
}

}  // namespace caf_rdma
