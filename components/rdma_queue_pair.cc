#include "components/rdma_queue_pair.h"

#include <algorithm>
#include <thread>

#include "primitives/ibverbs_error.h"

namespace caf_rdma {

namespace {

constexpr uint64_t kRecvBit = uint64_t{1} << 63;
constexpr int kAtomicSlots = 64;
constexpr int kPollBatch = 32;
constexpr uint32_t kSpinsBeforeYield = 512;
// Credits of a shared CQ taken at a time (RdmaQueuePair invariant 10): few enough that one
// queue pair's backlog does not take them all from the others.
constexpr uint32_t kCreditBatch = 16;

using Clock = std::chrono::steady_clock;

}  // namespace

struct RdmaQueuePair::Op {
  uint64_t id = 0;
  RdmaOp op;
  OpCallback done;
  std::vector<PlannedWorkRequest> wrs;
  size_t posted = 0;     ///< work requests posted so far
  size_t in_flight = 0;  ///< posted and not yet retired
  bool aborted = false;  ///< no more of its work requests will be posted
  int atomic_slot = -1;
  uint64_t bytes = 0;
  std::optional<Error> error;
  OpFault fault = OpFault::kNone;  ///< with `error`: what kind of failure
};

// -- construction ----------------------------------------------------------------------------

RdmaQueuePair::RdmaQueuePair(std::shared_ptr<RdmaDomain> domain, const Options& options)
    : domain_(std::move(domain)), options_(options) {}

Result<std::unique_ptr<RdmaQueuePair>> RdmaQueuePair::create(
    const std::shared_ptr<RdmaDomain>& domain) {
  return create(domain, Options{});
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
  std::unique_ptr<RdmaQueuePair> q(new RdmaQueuePair(domain, options));
  const IbverbsConfig& config = domain->config();
  if (options.completions) {
    q->cq_ = options.completions->completion_queue();
  } else {
    CAF_RDMA_ASSIGN_OR_RETURN(
        q->cq_, CompletionQueue::create(domain->context(),
                                        static_cast<int>(config.effective_cq_entries()), false));
  }
  {
    // Not shared yet: only the router's poll lock matters (attach).
    std::lock_guard<std::mutex> poll_guard(q->poll_lock());
    CAF_RDMA_RETURN_IF_ERROR(q->create_qp_locked());
  }
  uint64_t port_max = domain->max_message_size() ? domain->max_message_size() : (1ull << 31);
  q->max_message_ =
      options.max_message_bytes ? std::min(options.max_message_bytes, port_max) : port_max;
  uint32_t max_wr = q->send_limit_;
  q->signal_interval_ =
      options.signal_interval ? options.signal_interval : std::max<uint32_t>(1, max_wr / 4);
  q->atomic_scratch_.assign(kAtomicSlots, 0);
  CAF_RDMA_ASSIGN_OR_RETURN(q->atomic_buffer_,
                            domain->register_local(q->atomic_scratch_.data(),
                                                   q->atomic_scratch_.size() * sizeof(uint64_t)));
  for (int i = kAtomicSlots - 1; i >= 0; --i)
    q->free_atomic_slots_.push_back(i);
  q->local_psn_ = random_psn();
  return q;
}

RdmaQueuePair::~RdmaQueuePair() {
  Done done;
  {
    std::lock_guard<std::mutex> poll_guard(poll_lock());
    std::lock_guard<std::mutex> guard(mu_);
    // Destroying the QP guarantees the NIC no longer accesses any buffer of ours; once
    // detached, no completion reaches this object (CompletionRouter invariant 2).
    if (options_.completions && qp_)
      options_.completions->detach(qp_->qp_num(), this);
    qp_.reset();
    if (error_) {
      // Another op's error took the QP to ERR: the ops still outstanding would have been
      // flushed, and are so reported (retryable on a new QP), their flush completions not
      // waited for.
      for (auto& [id, op] : ops_)
        if (!op->error) {
          op->fault = OpFault::kFlushed;
          op->error = Error(ErrorCode::kWorkCompletion,
                            std::string(to_string(op->op.kind)) + " on " + describe() +
                                " flushed: the queue pair entered ERR (" + error_cause_ +
                                ") and was destroyed before the op's flush completion");
        }
    }
    fail_all_locked(
        Error(ErrorCode::kPeerUnavailable, "queue pair destroyed with the op outstanding"), done);
  }
  run(done);
}

std::mutex& RdmaQueuePair::poll_lock() {
  return options_.completions ? options_.completions->poll_mutex() : poll_mu_;
}

Status RdmaQueuePair::create_qp_locked() {
  CAF_RDMA_ASSIGN_OR_RETURN(qp_, QueuePair::create(domain_->pd(), cq_, cq_, domain_->config()));
  if (options_.completions)
    options_.completions->attach(qp_->qp_num(), this);
  return fit_queues_locked();
}

uint64_t RdmaQueuePair::next_wr_id_locked() {
  return options_.completions ? options_.completions->next_wr_id() : next_wr_seq_++;
}

bool RdmaQueuePair::take_credit_locked(uint32_t want) {
  if (!options_.completions)
    return true;
  if (credit_ == 0) {
    credit_ = options_.completions->acquire(std::clamp<uint32_t>(want, 1, kCreditBatch), resuming_);
    // One batch per turn: for more, wait behind the others again (CompletionRouter inv. 5).
    resuming_ = false;
    if (credit_ == 0) {
      options_.completions->wait_for_credit(this);
      return false;
    }
  }
  --credit_;
  return true;
}

void RdmaQueuePair::clear_in_flight_locked() {
  // Their completions may still come (or sit in the CQ): the credits come back once the CQ
  // was found empty after now (CompletionRouter invariant 1). The poll lock is held.
  if (options_.completions)
    options_.completions->park(send_in_flight_.size() + recv_in_flight_.size());
  send_in_flight_.clear();
  recv_in_flight_.clear();
}

std::string RdmaQueuePair::describe() const {
  return qp_ ? qp_->describe() : domain_->device_name() + " QP (destroyed)";
}

QpInfo RdmaQueuePair::local_info() const {
  std::lock_guard<std::mutex> guard(mu_);
  return local_info_locked();
}

QpInfo RdmaQueuePair::local_info_locked() const {
  QpInfo info = domain_->port_qp_info();
  info.qp_num = qp_->qp_num();
  info.psn = local_psn_;
  return info;
}

bool RdmaQueuePair::connected() const {
  std::lock_guard<std::mutex> guard(mu_);
  return connected_;
}

// -- connection --------------------------------------------------------------------------------

Status RdmaQueuePair::connect_locked(const QpInfo& remote) {
  if (!qp_)
    return Error(ErrorCode::kPeerUnavailable,
                 describe() + " has no queue pair to connect (creating it failed)");
  Status st = qp_->connect(domain_->config(), remote, local_psn_, domain_->gid_index());
  if (!st.ok())
    return st;
  remote_ = remote;
  connected_ = true;
  error_ = false;
  error_cause_.clear();
  return {};
}

Status RdmaQueuePair::connect(const QpInfo& remote, ReconnectFn reconnect) {
  std::lock_guard<std::mutex> guard(mu_);
  if (connected_)
    return Error(ErrorCode::kInvalidArgument,
                 describe() + " is already connected to " + to_string(remote_));
  reconnect_ = std::move(reconnect);
  return connect_locked(remote);
}

Status RdmaQueuePair::connect_loopback() {
  QpInfo self = local_info();
  std::lock_guard<std::mutex> guard(mu_);
  loopback_ = true;
  return connect_locked(self);
}

Status RdmaQueuePair::connect_pair(RdmaQueuePair& a, RdmaQueuePair& b) {
  QpInfo ai = a.local_info();
  QpInfo bi = b.local_info();
  CAF_RDMA_RETURN_IF_ERROR(
      a.connect(bi, [&b](const QpInfo& local) { return b.accept_reconnect(local); }));
  return b.connect(ai, [&a](const QpInfo& local) { return a.accept_reconnect(local); });
}

// -- validation --------------------------------------------------------------------------------

Status RdmaQueuePair::validate(const RdmaOp& op, const ibv_qp_cap& caps) const {
  const char* what = to_string(op.kind);
  bool atomic = op.kind == OpKind::kFetchAdd || op.kind == OpKind::kCompareSwap;
  if (atomic) {
    if (!op.local.empty())
      return Error(ErrorCode::kInvalidArgument,
                   std::string(what) + " takes no local slices (the result is returned)");
    CAF_RDMA_RETURN_IF_ERROR(op.remote.check_range(op.remote_offset, 8, what));
    if ((op.remote.addr + op.remote_offset) % 8 != 0)
      return Error(ErrorCode::kInvalidArgument, std::string(what) + ": remote word at offset " +
                                                    std::to_string(op.remote_offset) + " of " +
                                                    op.remote.describe() +
                                                    " is not 8-byte aligned");
    return {};
  }
  if (op.local.empty())
    return Error(ErrorCode::kInvalidArgument, std::string(what) + " without local memory");
  bool local_is_destination = op.kind == OpKind::kRead || op.kind == OpKind::kRecv;
  for (const auto& s : op.local) {
    CAF_RDMA_RETURN_IF_ERROR(s.buffer.check_range(
        s.offset, s.length, local_is_destination ? "local destination" : "local source"));
    if (s.buffer.region()->pd() != domain_->pd())
      return Error(ErrorCode::kInvalidArgument, std::string(what) + ": " + s.buffer.describe() +
                                                    " is registered with another domain than " +
                                                    describe());
    if (local_is_destination && s.buffer.access() == Access::kReadOnly)
      return Error(ErrorCode::kInvalidArgument, std::string(what) + ": " + s.buffer.describe() +
                                                    " is read-only and cannot be written");
  }
  uint64_t length = op.local_length();
  size_t max_sge = op.kind == OpKind::kRecv ? caps.max_recv_sge : caps.max_send_sge;
  if (op.kind == OpKind::kSend || op.kind == OpKind::kRecv) {
    if (length > max_message_)
      return Error(ErrorCode::kInvalidArgument,
                   std::string(what) + " of " + std::to_string(length) +
                       " bytes exceeds the maximum message size " + std::to_string(max_message_) +
                       " of " + describe());
    if (op.local.size() > max_sge)
      return Error(ErrorCode::kInvalidArgument,
                   std::string(what) + " with " + std::to_string(op.local.size()) +
                       " slices exceeds max SGE " + std::to_string(max_sge));
    return {};
  }
  return op.remote.check_range(op.remote_offset, length,
                               op.kind == OpKind::kWrite ? "remote destination" : "remote source");
}

// -- submission and posting --------------------------------------------------------------------

Status RdmaQueuePair::submit(RdmaOp op, OpCallback done) {
  return submit_internal(std::move(op), std::move(done), nullptr);
}

Status RdmaQueuePair::submit_queued(RdmaOp op, OpCallback done) {
  return submit_internal(std::move(op), std::move(done), nullptr, false);
}

void RdmaQueuePair::post_queued() {
  Done done;
  {
    std::lock_guard<std::mutex> guard(mu_);
    pump_locked(done);
  }
  run(done);
}

Status RdmaQueuePair::submit_internal(RdmaOp op, OpCallback done, uint64_t* id_out, bool post_now) {
  ibv_qp_cap caps{};
  {
    std::lock_guard<std::mutex> guard(mu_);
    if (!connected_)
      return Error(ErrorCode::kInvalidArgument,
                   describe() + " is not connected; cannot " + to_string(op.kind));
    if (!qp_)
      return Error(ErrorCode::kPeerUnavailable,
                   describe() +
                       " lost its queue pair (creating a new one after a failed flush "
                       "failed); cannot " +
                       to_string(op.kind));
    caps = qp_->caps();
    // Invariant 9: a remote key of another opening of the peer's device never reaches the NIC.
    if (op.remote.incarnation != 0 && remote_.incarnation != 0 &&
        op.remote.incarnation != remote_.incarnation)
      return Error(ErrorCode::kInvalidArgument,
                   std::string(to_string(op.kind)) + ": " + op.remote.describe() +
                       " was registered before its owner's device " + op.remote.device +
                       " went away and came back; its remote key is gone (ask the owner for a "
                       "new handle)");
  }
  CAF_RDMA_RETURN_IF_ERROR(validate(op, caps));
  auto rec = std::make_unique<Op>();
  rec->op = std::move(op);
  rec->done = std::move(done);
  const RdmaOp& o = rec->op;
  if (o.kind == OpKind::kFetchAdd || o.kind == OpKind::kCompareSwap) {
    PlannedWorkRequest wr;
    wr.remote_addr = o.remote.addr + o.remote_offset;
    wr.length = 8;
    rec->wrs.push_back(wr);
  } else if (o.local.size() == 1 && o.local[0].length > 0 && o.local[0].length <= max_message_ &&
             o.local[0].length <= (uint64_t{1} << 31)) {
    // One slice that fits one work request (the common case): no plan needed.
    const LocalSlice& s = o.local[0];
    PlannedWorkRequest wr;
    wr.remote_addr = o.remote.addr + o.remote_offset;
    wr.length = s.length;
    wr.sges.push_back(
        PlannedSge{s.buffer.addr() + s.offset, static_cast<uint32_t>(s.length), s.buffer.lkey()});
    rec->wrs.push_back(std::move(wr));
  } else {
    std::vector<LocalSegment> segs;
    for (const auto& s : o.local)
      segs.push_back(LocalSegment{s.buffer.addr() + s.offset, s.length, s.buffer.lkey()});
    uint64_t remote_addr = o.remote.addr + o.remote_offset;
    bool single = o.kind == OpKind::kSend || o.kind == OpKind::kRecv;
    uint32_t sge =
        single ? static_cast<uint32_t>(segs.size()) : static_cast<uint32_t>(caps.max_send_sge);
    CAF_RDMA_ASSIGN_OR_RETURN(
        rec->wrs, plan_work_requests(segs, remote_addr, single ? ~uint64_t{0} : max_message_,
                                     std::max<uint32_t>(1, sge)));
  }
  Done done_now;
  {
    std::lock_guard<std::mutex> guard(mu_);
    rec->id = next_op_id_++;
    if (id_out != nullptr)
      *id_out = rec->id;
    pending_.push_back(rec->id);
    ops_.emplace(rec->id, std::move(rec));
    if (options_.completions)
      options_.completions->op_started();
    if (post_now)
      pump_locked(done_now);
    else
      queued_waiting_.store(true, std::memory_order_release);
  }
  run(done_now);
  return {};
}

void RdmaQueuePair::pump_locked(Done& done) {
  if (!qp_ || error_ || !connected_)
    return;
  const uint32_t max_send = send_limit_;
  const uint32_t max_recv = recv_limit_;
  // Build one chain of send work requests across as many queued ops as slots allow. The
  // scratch vectors are members, reused from call to call (this is the hot path).
  std::vector<ibv_send_wr>& chain = chain_;
  std::vector<ibv_sge>& chain_sges = chain_sges_;
  std::vector<std::pair<uint32_t, uint32_t>>& chain_sge_spans = chain_sge_spans_;
  std::vector<uint64_t>& chain_ops = chain_ops_;
  chain.clear();
  chain_sges.clear();
  chain_sge_spans.clear();
  chain_ops.clear();
  auto flush_chain = [&]() {
    if (chain.empty())
      return;
    for (size_t i = 0; i < chain.size(); ++i) {
      chain[i].sg_list =
          chain_sge_spans[i].second == 0 ? nullptr : chain_sges.data() + chain_sge_spans[i].first;
      chain[i].next = i + 1 < chain.size() ? &chain[i + 1] : nullptr;
    }
    chain.back().send_flags |= IBV_SEND_SIGNALED;
    ibv_send_wr* bad = nullptr;
    int rc = ibv_post_send(qp_->get(), chain.data(), &bad);
    bool bad_known = bad != nullptr && bad >= chain.data() && bad < chain.data() + chain.size();
    size_t ok = rc == 0 ? chain.size() : bad_known ? static_cast<size_t>(bad - chain.data()) : 0;
    if (rc != 0 && (ok > 0 || !bad_known)) {
      // The accepted prefix must end signaled, or its slots would never be retired: there is
      // no way to change a posted request, so move the QP to ERR; everything flushes.
      enter_error_locked(bad_known ? "ibv_post_send accepted only part of a chain"
                                   : "ibv_post_send failed without naming the request it refused");
    }
    for (size_t i = 0; i < chain.size(); ++i) {
      auto it = ops_.find(chain_ops[i]);
      if (i < ok) {
        ++stats_.work_requests;
        if (chain[i].send_flags & IBV_SEND_SIGNALED)
          ++stats_.signaled;
        if (chain[i].send_flags & IBV_SEND_INLINE)
          ++stats_.inline_requests;
        continue;
      }
      // Not posted: undo the accounting for this request and fail its op.
      send_in_flight_.pop_back();
      if (options_.completions)
        ++credit_;  // returned at the end of pump_locked
      if (it != ops_.end()) {
        Op& op = *it->second;
        --op.in_flight;
        --op.posted;
        op.aborted = true;
        if (!op.error)
          op.error = ibverbs_error("ibv_post_send", rc, describe());
      }
    }
    if (rc != 0) {
      for (size_t i = ok; i < chain.size(); ++i)
        maybe_finish_locked(chain_ops[i], done);
    }
    chain.clear();
    chain_sges.clear();
    chain_sge_spans.clear();
    chain_ops.clear();
  };
  while (!pending_.empty() && !error_) {
    auto it = ops_.find(pending_.front());
    if (it == ops_.end()) {
      pending_.pop_front();
      continue;
    }
    Op& op = *it->second;
    if (op.aborted) {
      pending_.pop_front();
      maybe_finish_locked(op.id, done);
      continue;
    }
    if (op.op.kind == OpKind::kRecv) {
      if (recv_in_flight_.size() >= max_recv || !take_credit_locked(1))
        break;
      std::vector<ibv_sge> sges;
      for (const auto& s : op.wrs.front().sges)
        sges.push_back(ibv_sge{s.addr, s.length, s.lkey});
      ibv_recv_wr wr{};
      uint64_t seq = next_wr_id_locked();
      wr.wr_id = seq | kRecvBit;
      wr.sg_list = sges.data();
      wr.num_sge = static_cast<int>(sges.size());
      ibv_recv_wr* bad = nullptr;
      if (int rc = ibv_post_recv(qp_->get(), &wr, &bad); rc != 0) {
        op.error = ibverbs_error("ibv_post_recv", rc, describe());
        op.aborted = true;
        if (options_.completions)
          ++credit_;  // not posted: its credit stays ours
      } else {
        recv_in_flight_.push_back(PostedWr{seq, op.id});
        op.posted = 1;
        ++op.in_flight;
      }
      pending_.pop_front();
      maybe_finish_locked(op.id, done);
      continue;
    }
    bool atomic = op.op.kind == OpKind::kFetchAdd || op.op.kind == OpKind::kCompareSwap;
    if (atomic && op.atomic_slot < 0) {
      if (free_atomic_slots_.empty())
        break;
      op.atomic_slot = free_atomic_slots_.back();
      free_atomic_slots_.pop_back();
    }
    bool progressed = false;
    bool starved = false;
    while (op.posted < op.wrs.size() && send_in_flight_.size() < max_send) {
      if (!take_credit_locked(max_send - static_cast<uint32_t>(send_in_flight_.size()))) {
        starved = true;
        break;
      }
      const PlannedWorkRequest& p = op.wrs[op.posted];
      ibv_send_wr wr{};
      uint64_t seq = next_wr_id_locked();
      wr.wr_id = seq;
      auto first_sge = static_cast<uint32_t>(chain_sges.size());
      switch (op.op.kind) {
        case OpKind::kWrite:
        case OpKind::kRead:
          wr.opcode = op.op.kind == OpKind::kWrite ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_READ;
          wr.wr.rdma.remote_addr = p.remote_addr;
          wr.wr.rdma.rkey = op.op.remote.rkey;
          for (const auto& s : p.sges)
            chain_sges.push_back(ibv_sge{s.addr, s.length, s.lkey});
          break;
        case OpKind::kSend:
          wr.opcode = IBV_WR_SEND;
          for (const auto& s : p.sges)
            chain_sges.push_back(ibv_sge{s.addr, s.length, s.lkey});
          break;
        default:  // atomics
          wr.opcode = op.op.kind == OpKind::kFetchAdd ? IBV_WR_ATOMIC_FETCH_AND_ADD
                                                      : IBV_WR_ATOMIC_CMP_AND_SWP;
          wr.wr.atomic.remote_addr = p.remote_addr;
          wr.wr.atomic.rkey = op.op.remote.rkey;
          wr.wr.atomic.compare_add = op.op.compare_add;
          wr.wr.atomic.swap = op.op.swap;
          chain_sges.push_back(ibv_sge{
              atomic_buffer_.addr() + static_cast<uint64_t>(op.atomic_slot) * sizeof(uint64_t),
              sizeof(uint64_t), atomic_buffer_.lkey()});
          break;
      }
      auto sge_count = static_cast<uint32_t>(chain_sges.size()) - first_sge;
      wr.num_sge = static_cast<int>(sge_count);
      // Small WRITEs and SENDs travel inside the work request: no DMA read of the source.
      if ((op.op.kind == OpKind::kWrite || op.op.kind == OpKind::kSend) && p.length > 0 &&
          p.length <= inline_limit_)
        wr.send_flags |= IBV_SEND_INLINE;
      // Signal periodically so long chains retire slots before they end.
      if ((++posted_wrs_ % signal_interval_) == 0)
        wr.send_flags |= IBV_SEND_SIGNALED;
      chain.push_back(wr);
      chain_sge_spans.emplace_back(first_sge, sge_count);
      chain_ops.push_back(op.id);
      send_in_flight_.push_back(PostedWr{seq, op.id});
      ++op.posted;
      ++op.in_flight;
      progressed = true;
    }
    if (op.posted == op.wrs.size()) {
      pending_.pop_front();
      continue;
    }
    if (starved || !progressed || send_in_flight_.size() >= max_send)
      break;
  }
  flush_chain();
  if (credit_ > 0) {
    options_.completions->release(credit_);
    credit_ = 0;
  }
}

// -- completions -------------------------------------------------------------------------------

int RdmaQueuePair::progress() {
  if (options_.completions) {
    int n = options_.completions->poll();
    if (queued_waiting_.exchange(false, std::memory_order_acq_rel))
      post_queued();  // what submit_queued left, as with a CQ of its own
    return n;
  }
  std::unique_lock<std::mutex> poll_guard(poll_mu_, std::try_to_lock);
  if (!poll_guard.owns_lock())
    return 0;
  ibv_wc wcs[kPollBatch];
  auto n = cq_->poll(wcs, kPollBatch);
  Done done;
  {
    std::lock_guard<std::mutex> guard(mu_);
    if (!n.ok()) {
      enter_error_locked(n.error().message());
      fail_all_locked(n.error(), done);
    } else {
      for (int i = 0; i < *n; ++i)
        handle_completion_locked(wcs[i], done);
      stats_.completions += static_cast<uint64_t>(*n);
      pump_locked(done);
    }
  }
  poll_guard.unlock();
  run(done);
  return n.ok() ? *n : 0;
}

void RdmaQueuePair::take_completions(const ibv_wc* wcs, int count, Done& done) {
  std::lock_guard<std::mutex> guard(mu_);
  for (int i = 0; i < count; ++i)
    handle_completion_locked(wcs[i], done);
  stats_.completions += static_cast<uint64_t>(count);
  pump_locked(done);
}

void RdmaQueuePair::take_poll_error(const Error& error, Done& done) {
  std::lock_guard<std::mutex> guard(mu_);
  enter_error_locked(error.message());
  fail_all_locked(error, done);
}

void RdmaQueuePair::take_credit(Done& done) {
  std::lock_guard<std::mutex> guard(mu_);
  resuming_ = true;
  pump_locked(done);
  resuming_ = false;
}

void RdmaQueuePair::handle_completion_locked(const ibv_wc& wc, Done& done) {
  if (wc.wr_id & kRecvBit) {
    uint64_t seq = wc.wr_id & ~kRecvBit;
    while (!recv_in_flight_.empty() && recv_in_flight_.front().seq <= seq) {
      PostedWr w = recv_in_flight_.front();
      recv_in_flight_.pop_front();
      if (options_.completions)
        options_.completions->release(1);
      auto it = ops_.find(w.op_id);
      if (it == ops_.end())
        continue;
      retire_locked(*it->second, w.seq == seq ? &wc : nullptr, done);
    }
    return;
  }
  // RC completes send work requests in order: this completion retires every earlier one.
  while (!send_in_flight_.empty() && send_in_flight_.front().seq <= wc.wr_id) {
    PostedWr w = send_in_flight_.front();
    send_in_flight_.pop_front();
    if (options_.completions)
      options_.completions->release(1);
    auto it = ops_.find(w.op_id);
    if (it == ops_.end())
      continue;
    retire_locked(*it->second, w.seq == wc.wr_id ? &wc : nullptr, done);
  }
}

void RdmaQueuePair::retire_locked(Op& op, const ibv_wc* wc, Done& done) {
  --op.in_flight;
  if (wc != nullptr && wc->status != IBV_WC_SUCCESS) {
    if (!error_) {
      enter_error_locked(completion_error(*wc, describe()).message());
    }
    if (!op.error) {
      if (wc->status == IBV_WC_WR_FLUSH_ERR) {
        op.fault = OpFault::kFlushed;
        op.error =
            Error(ErrorCode::kWorkCompletion, std::string(to_string(op.op.kind)) +
                                                  " flushed (IBV_WC_WR_FLUSH_ERR): " + describe() +
                                                  " entered ERR: " + error_cause_);
      } else {
        Error e = completion_error(*wc, describe());
        op.fault = wc->status == IBV_WC_REM_ACCESS_ERR || wc->status == IBV_WC_REM_INV_REQ_ERR
                       ? OpFault::kRemoteAccess
                       : OpFault::kOther;
        std::string hint;
        if (wc->status == IBV_WC_REM_ACCESS_ERR)
          hint = "; the remote region " + op.op.remote.describe() +
                 " rejected the access (wrong rkey, deregistered or released region, or "
                 "missing remote permission)";
        else if (wc->status == IBV_WC_RETRY_EXC_ERR)
          hint = "; the peer did not answer (peer QP gone, or no route to " +
                 to_string(remote_.gid) + ")";
        op.error =
            Error(e.code(), std::string(to_string(op.op.kind)) + " failed: " + e.message() + hint);
      }
    }
    op.aborted = true;
  } else if (wc != nullptr && op.op.kind == OpKind::kRecv) {
    op.bytes = wc->byte_len;
  }
  maybe_finish_locked(op.id, done);
}

void RdmaQueuePair::maybe_finish_locked(uint64_t op_id, Done& done) {
  auto it = ops_.find(op_id);
  if (it == ops_.end())
    return;
  Op& op = *it->second;
  if (op.in_flight > 0 || (!op.aborted && op.posted < op.wrs.size()))
    return;
  OpResult result;
  if (op.error) {
    result.status = *op.error;
    result.fault = op.fault;
    ++stats_.ops_failed;
  } else {
    if (op.op.kind == OpKind::kFetchAdd || op.op.kind == OpKind::kCompareSwap)
      result.atomic_value = atomic_scratch_[static_cast<size_t>(op.atomic_slot)];
    result.bytes = op.op.kind == OpKind::kRecv ? op.bytes
                   : (op.op.kind == OpKind::kFetchAdd || op.op.kind == OpKind::kCompareSwap)
                       ? 8
                       : op.op.local_length();
    stats_.bytes += result.bytes;
    ++stats_.ops_completed;
  }
  if (options_.completions)
    options_.completions->op_finished();
  if (op.atomic_slot >= 0)
    free_atomic_slots_.push_back(op.atomic_slot);
  auto pit = std::find(pending_.begin(), pending_.end(), op_id);
  if (pit != pending_.end())
    pending_.erase(pit);
  done.emplace_back(std::move(op.done), std::move(result));
  ops_.erase(it);
}

void RdmaQueuePair::run(Done& done) {
  for (auto& [cb, result] : done)
    if (cb)
      cb(std::move(result));
  done.clear();
}

// -- errors and recovery ------------------------------------------------------------------------

void RdmaQueuePair::enter_error_locked(const std::string& cause) {
  if (!error_) {
    error_ = true;
    error_cause_ = cause;
  }
  if (qp_)
    (void)qp_->to_error();
  // Ops not posted at all yet stay queued: they are posted after recovery. Partly posted ops
  // cannot be resumed on a reset QP: they fail.
  for (uint64_t id : pending_) {
    auto it = ops_.find(id);
    if (it == ops_.end() || it->second->posted == 0)
      continue;
    Op& op = *it->second;
    op.aborted = true;
    if (!op.error) {
      op.fault = OpFault::kFlushed;
      op.error = Error(ErrorCode::kWorkCompletion, std::string(to_string(op.op.kind)) +
                                                       " interrupted: " + describe() +
                                                       " entered ERR: " + cause);
    }
  }
}

void RdmaQueuePair::fail_all_locked(const Error& error, Done& done) {
  clear_in_flight_locked();
  pending_.clear();
  std::vector<uint64_t> ids;
  for (auto& [id, op] : ops_)
    ids.push_back(id);
  std::sort(ids.begin(), ids.end());
  for (uint64_t id : ids) {
    Op& op = *ops_[id];
    op.in_flight = 0;
    op.aborted = true;
    if (!op.error)
      op.error = Error(error.code(), std::string(to_string(op.op.kind)) + " on " + describe() +
                                         ": " + error.message());
    maybe_finish_locked(id, done);
  }
}

Status RdmaQueuePair::abort(const std::string& reason) {
  std::lock_guard<std::mutex> guard(mu_);
  if (!qp_)
    return Error(ErrorCode::kInternal, describe() + " has no QP");
  enter_error_locked(reason);
  return {};
}

Status RdmaQueuePair::drain(std::chrono::milliseconds timeout) {
  auto deadline = Clock::now() + timeout;
  while (true) {
    {
      std::lock_guard<std::mutex> guard(mu_);
      if (send_in_flight_.empty() && recv_in_flight_.empty())
        return {};
    }
    if (Clock::now() > deadline) {
      std::lock_guard<std::mutex> guard(mu_);
      return Error(ErrorCode::kTimeout, describe() + ": " + std::to_string(send_in_flight_.size()) +
                                            " send and " + std::to_string(recv_in_flight_.size()) +
                                            " receive work requests still outstanding after " +
                                            std::to_string(timeout.count()) + " ms");
    }
    if (progress() == 0)
      std::this_thread::yield();
  }
}

uint64_t RdmaQueuePair::remote_incarnation() const {
  std::lock_guard<std::mutex> guard(mu_);
  return remote_.incarnation;
}

bool RdmaQueuePair::needs_recovery() const {
  std::lock_guard<std::mutex> guard(mu_);
  return error_;
}

Status RdmaQueuePair::reset_locked() {
  CAF_RDMA_RETURN_IF_ERROR(qp_->reset());
  local_psn_ = random_psn();
  return {};
}

Status RdmaQueuePair::recreate_qp_locked() {
  // Destroying the QP discards its outstanding work requests: the NIC no longer touches them.
  // Completions of the old QP still in a shared CQ find no target (or, should its number come
  // back, older ids than ours: CompletionRouter invariant 3).
  if (options_.completions && qp_)
    options_.completions->detach(qp_->qp_num(), this);
  qp_.reset();
  local_psn_ = random_psn();
  return create_qp_locked();
}

Status RdmaQueuePair::fit_queues_locked() {
  const ibv_qp_cap& caps = qp_->caps();
  send_limit_ = caps.max_send_wr;
  recv_limit_ = caps.max_recv_wr;
  inline_limit_ = caps.max_inline_data;
  if (options_.completions)
    return {};  // a shared CQ: credits bound what is posted (invariant 10)
  const uint64_t needed = uint64_t{send_limit_} + recv_limit_;
  if (static_cast<uint64_t>(cq_->entries()) >= needed)
    return {};
  // A CQ that overflows loses completions (and errors the CQ and its QPs): grow it.
  uint64_t max_cqe = domain_->context()->device_attr().max_cqe;
  uint64_t want = max_cqe > 0 ? std::min(needed, max_cqe) : needed;
  if (want > static_cast<uint64_t>(cq_->entries()) &&
      cq_->resize(static_cast<int>(std::min<uint64_t>(want, INT32_MAX))).ok() &&
      static_cast<uint64_t>(cq_->entries()) >= needed)
    return {};
  // It cannot hold them all: post no more than it holds.
  auto cqe = static_cast<uint32_t>(cq_->entries());
  recv_limit_ = std::min(recv_limit_, cqe / 2);
  send_limit_ = std::min(send_limit_, cqe - recv_limit_);
  if (send_limit_ == 0)
    return Error(ErrorCode::kInvalidArgument, describe() + ": its completion queue of " +
                                                  std::to_string(cqe) +
                                                  " entries cannot hold one send completion");
  return {};
}

Status RdmaQueuePair::restart_locked(const Status& drained, bool keep_queued, Done& done) {
  if (drained.ok())
    return qp_ ? reset_locked() : recreate_qp_locked();
  // The device did not flush in time (or an earlier attempt left no QP): destroy the QP (the
  // NIC stops for sure) and fail the ops whose work requests went with it.
  CAF_RDMA_RETURN_IF_ERROR(recreate_qp_locked());
  if (!keep_queued) {
    fail_all_locked(drained.error(), done);
    return {};
  }
  // Only ops with posted work requests fail; queued ones survive and are posted later.
  Error e(ErrorCode::kTimeout, "QP destroyed after a failed drain: " + drained.error().message());
  for (auto& [id, op] : ops_)
    if (op->posted > 0) {
      op->in_flight = 0;
      op->aborted = true;
      if (!op->error)
        op->error = e;
    }
  clear_in_flight_locked();
  std::vector<uint64_t> ids;
  for (auto& [id, op] : ops_)
    ids.push_back(id);
  for (uint64_t id : ids)
    maybe_finish_locked(id, done);
  return {};
}

Status RdmaQueuePair::recover() {
  std::lock_guard<std::mutex> recover_guard(recover_mu_);
  if (!needs_recovery())
    return {};
  std::string cause;
  bool loopback;
  ReconnectFn reconnect;
  {
    std::lock_guard<std::mutex> guard(mu_);
    cause = error_cause_;
    loopback = loopback_;
    reconnect = reconnect_;
  }
  if (!loopback && !reconnect)
    return Error(ErrorCode::kInternal,
                 describe() + " is in ERR (" + cause + ") and has no way to reconnect");
  Status drained = drain(options_.drain_timeout);
  Done done;
  QpInfo local;
  Status restarted;
  {
    std::lock_guard<std::mutex> poll_guard(poll_lock());
    std::lock_guard<std::mutex> guard(mu_);
    restarted = restart_locked(drained, /*keep_queued=*/true, done);
    if (restarted.ok()) {
      connected_ = false;
      local = local_info_locked();
    }
  }
  run(done);  // the ops the restart failed complete, whatever came of it
  CAF_RDMA_RETURN_IF_ERROR(restarted);
  QpInfo remote = local;
  if (!loopback) {
    auto r = reconnect(local);
    if (!r.ok())
      return r.error().with_context("recovering " + describe() + " after: " + cause);
    remote = *r;
  }
  {
    std::lock_guard<std::mutex> guard(mu_);
    Status st = connect_locked(remote);
    if (!st.ok()) {
      error_ = true;
      return st.error().with_context("recovering " + describe());
    }
    ++stats_.recoveries;
    pump_locked(done);
  }
  run(done);
  return {};
}

Result<QpInfo> RdmaQueuePair::accept_reconnect(const QpInfo& remote) {
  std::lock_guard<std::mutex> recover_guard(recover_mu_);
  {
    // Stop posting while we drain, so the reset discards nothing.
    std::lock_guard<std::mutex> guard(mu_);
    if (!error_) {
      error_ = true;
      error_cause_ = "peer " + to_string(remote_) + " is reconnecting";
    }
  }
  Status drained = drain(options_.drain_timeout);
  Done done;
  QpInfo local;
  Status st;
  {
    std::lock_guard<std::mutex> poll_guard(poll_lock());
    std::lock_guard<std::mutex> guard(mu_);
    st = restart_locked(drained, /*keep_queued=*/false, done);
    if (st.ok())
      st = connect_locked(remote);
    if (st.ok()) {
      ++stats_.recoveries;
      local = local_info_locked();
      pump_locked(done);
    } else {
      error_ = true;
    }
  }
  run(done);  // the ops the restart failed complete, whatever came of it
  CAF_RDMA_RETURN_IF_ERROR(st);
  return local;
}

// -- blocking interface -------------------------------------------------------------------------

std::string RdmaQueuePair::timeout_message(OpKind kind, uint64_t bytes,
                                           std::chrono::milliseconds timeout) const {
  return std::string(to_string(kind)) + " of " + std::to_string(bytes) + " bytes on " + describe() +
         " did not complete within " + std::to_string(timeout.count()) +
         " ms; the queue pair was moved to ERR and drained, so the NIC no longer accesses the "
         "buffers; it reconnects on next use";
}

bool RdmaQueuePair::wait_for(const std::function<bool()>& finished, Clock::time_point deadline,
                             std::chrono::milliseconds timeout, const uint64_t* ids,
                             size_t id_count, const std::function<void()>& at_deadline) {
  bool timed_out = false;
  uint32_t idle_polls = 0;
  while (!finished()) {
    if (progress() > 0) {
      idle_polls = 0;
    } else if (++idle_polls >= kSpinsBeforeYield) {
      // Busy-poll first (a yield is a system call, slow to come back from); then be polite.
      idle_polls = 0;
      if (needs_recovery() && outstanding_work_requests() == 0) {
        // Another op's failure put the QP in ERR while ours wait to be posted.
        (void)recover();
      }
      std::this_thread::yield();
    }
    if (!timed_out && Clock::now() > deadline) {
      timed_out = true;
      at_deadline();
      withdraw_after_timeout(timeout, std::vector<uint64_t>(ids, ids + id_count));
      deadline = Clock::now() + options_.drain_timeout * 2;
    } else if (timed_out && Clock::now() > deadline) {
      break;  // defensive: never hang even if a completion were lost
    }
  }
  return timed_out;
}

std::vector<OpResult> RdmaQueuePair::execute_batch(std::vector<RdmaOp> ops,
                                                   std::chrono::milliseconds timeout) {
  auto deadline = Clock::now() + timeout;
  // Shared with the callbacks, which may outlive this call only if a callback was lost.
  struct Shared {
    std::mutex mu;
    size_t remaining = 0;
    std::vector<OpResult> results;
    std::vector<bool> finished;
  };
  auto shared = std::make_shared<Shared>();
  shared->results.resize(ops.size());
  shared->finished.assign(ops.size(), false);
  if (ops.empty())
    return {};
  if (needs_recovery()) {
    Status st = recover();
    if (!st.ok()) {
      for (auto& r : shared->results)
        r.status = st;
      return std::move(shared->results);
    }
  }
  // Kind and size of each op, for timeout messages (built only if one is needed).
  std::vector<std::pair<OpKind, uint64_t>> shapes(ops.size());
  std::vector<uint64_t> ids;
  ids.reserve(ops.size());
  for (size_t i = 0; i < ops.size(); ++i) {
    bool atomic = ops[i].kind == OpKind::kFetchAdd || ops[i].kind == OpKind::kCompareSwap;
    shapes[i] = {ops[i].kind, atomic ? 8 : ops[i].local_length()};
    {
      std::lock_guard<std::mutex> g(shared->mu);
      ++shared->remaining;
    }
    uint64_t id = 0;
    Status st = submit_internal(
        std::move(ops[i]),
        [shared, i](OpResult r) {
          std::lock_guard<std::mutex> g(shared->mu);
          shared->results[i] = std::move(r);
          shared->finished[i] = true;
          --shared->remaining;
        },
        &id);
    if (st.ok())
      ids.push_back(id);
    if (!st.ok()) {
      std::lock_guard<std::mutex> g(shared->mu);
      shared->results[i].status = st;
      shared->finished[i] = true;
      --shared->remaining;
    }
  }
  std::vector<bool> finished_in_time;
  bool timed_out = wait_for(
      [&] {
        std::lock_guard<std::mutex> g(shared->mu);
        return shared->remaining == 0;
      },
      deadline, timeout, ids.data(), ids.size(),
      [&] {
        std::lock_guard<std::mutex> g(shared->mu);
        finished_in_time = shared->finished;
      });
  std::lock_guard<std::mutex> g(shared->mu);
  if (timed_out)
    for (size_t i = 0; i < shared->results.size(); ++i)
      if (!finished_in_time[i])
        shared->results[i].status =
            Error(ErrorCode::kTimeout, timeout_message(shapes[i].first, shapes[i].second, timeout));
  return std::move(shared->results);
}

void RdmaQueuePair::withdraw_after_timeout(std::chrono::milliseconds timeout,
                                           const std::vector<uint64_t>& ids) {
  // Flush everything outstanding, then wait (bounded) for the flush to retire it.
  (void)abort("an op timed out after " + std::to_string(timeout.count()) + " ms");
  Status drained = drain(options_.drain_timeout);
  Done done;
  {
    std::lock_guard<std::mutex> poll_guard(poll_lock());
    std::lock_guard<std::mutex> guard(mu_);
    if (!drained.ok()) {
      // The device did not flush in time: destroying the QP is the only way to be sure.
      Status recreated = recreate_qp_locked();
      fail_all_locked(Error(ErrorCode::kTimeout,
                            "QP destroyed after " + drained.error().message() +
                                (recreated.ok() ? "" : "; " + recreated.error().message())),
                      done);
      error_ = true;
    }
    // Our ops that were only queued (never posted) are withdrawn too; other callers' queued
    // ops stay and are posted after recovery.
    std::vector<uint64_t> queued;
    for (uint64_t id : ids) {
      auto it = ops_.find(id);
      if (it != ops_.end() && it->second->posted == 0) {
        it->second->aborted = true;
        if (!it->second->error)
          it->second->error = Error(ErrorCode::kTimeout, "withdrawn after a timeout");
        queued.push_back(id);
      }
    }
    for (uint64_t id : queued)
      maybe_finish_locked(id, done);
  }
  run(done);
}

OpResult RdmaQueuePair::execute(RdmaOp op, std::chrono::milliseconds timeout) {
  // execute_batch for one op, without its per-op vectors and locks (the latency path).
  auto deadline = Clock::now() + timeout;
  if (needs_recovery()) {
    Status st = recover();
    if (!st.ok())
      return OpResult{st};
  }
  // Shared with the callback, which may outlive this call only if a completion was lost.
  struct Waiter {
    std::atomic<bool> finished{false};
    OpResult result;
  };
  auto waiter = std::make_shared<Waiter>();
  OpKind kind = op.kind;
  bool atomic = kind == OpKind::kFetchAdd || kind == OpKind::kCompareSwap;
  uint64_t bytes = atomic ? 8 : op.local_length();
  uint64_t id = 0;
  Status st = submit_internal(
      std::move(op),
      [waiter](OpResult r) {
        waiter->result = std::move(r);
        waiter->finished.store(true, std::memory_order_release);
      },
      &id);
  if (!st.ok())
    return OpResult{st};
  bool finished_in_time = true;
  bool timed_out = wait_for(
      [&] { return waiter->finished.load(std::memory_order_acquire); }, deadline, timeout, &id, 1,
      [&] { finished_in_time = waiter->finished.load(std::memory_order_acquire); });
  // wait_for returns once the op finished, or after the deadline: then finished_in_time says.
  if (timed_out && !finished_in_time)
    return OpResult{Error(ErrorCode::kTimeout, timeout_message(kind, bytes, timeout))};
  return std::move(waiter->result);
}

RdmaQueuePair::Stats RdmaQueuePair::stats() const {
  std::lock_guard<std::mutex> guard(mu_);
  return stats_;
}

bool RdmaQueuePair::idle() const {
  std::lock_guard<std::mutex> guard(mu_);
  return ops_.empty();
}

size_t RdmaQueuePair::outstanding_work_requests() const {
  std::lock_guard<std::mutex> guard(mu_);
  return send_in_flight_.size();
}

uint32_t RdmaQueuePair::inline_limit() const {
  std::lock_guard<std::mutex> guard(mu_);
  return inline_limit_;
}

int RdmaQueuePair::completion_queue_entries() const {
  std::lock_guard<std::mutex> guard(mu_);
  return cq_->entries();
}

uint32_t RdmaQueuePair::send_limit() const {
  std::lock_guard<std::mutex> guard(mu_);
  return send_limit_;
}

uint32_t RdmaQueuePair::receive_limit() const {
  std::lock_guard<std::mutex> guard(mu_);
  return recv_limit_;
}

}  // namespace caf_rdma
