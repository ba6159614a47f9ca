// RdmaManagerActor: the front of transfers — requests, validation, the choice of a path
// (actors/transfer/path_choice.h), rerouting, the paths' events and the deadlines. The paths
// themselves are in actors/transfer/; every op ends in the reply point (reply_point.cc).
#include <algorithm>
#include <atomic>
#include <cstring>

#include "actors/detail/manager_state.h"
#include "actors/op_texts.h"
#include "actors/transfer/path_choice.h"
#include "actors/transfer_checks.h"

namespace caf_rdma::detail {

// -- requests ----------------------------------------------------------------------------------

std::chrono::milliseconds request_timeout(const Transfer& t) {
  // The transfer's own deadline (the sweep) is what times it out, with its message; CAF's
  // request timeout only backs it up.
  return std::chrono::milliseconds(t.timeout_ms) + kRequestBackstop;
}

uint64_t ManagerState::new_transfer(Transfer t) {
  uint64_t ticket = next_ticket_++;
  t.remaining = t.ops.size();
  t.outcomes.resize(t.ops.size());
  t.started = now();
  auto due = t.started + std::chrono::milliseconds(t.timeout_ms);
  t.due = due;
  t.deadline = deadlines_.emplace(due, ticket);
  if (t.asked_by.first)  // invariant 24: a cancel may name it until its reply
    requests_[t.asked_by] = ticket;
  transfers_.emplace(ticket, std::move(t));
  arm_deadline_tick(due);
  return ticket;
}

RequestKey ManagerState::current_request() const {
  const caf::mailbox_element* e = self_->current_mailbox_element();
  if (e == nullptr || !e->mid.is_request() || !e->sender)
    return {};
  return {caf::actor_cast<caf::actor_addr>(e->sender), e->mid.request_id().integer_value()};
}

void ManagerState::cancel(const caf::actor_addr& sender, uint64_t request) {
  const RequestKey key{sender, request};
  if (auto list = list_stops_.find(key); list != list_stops_.end()) {
    list->second->request();  // its worker stops between steps and cancels its step in flight
    return;
  }
  auto asked = requests_.find(key);
  if (asked == requests_.end())
    return;  // answered already, or never asked: nothing to stop (cancel_request.h 1)
  auto it = transfers_.find(asked->second);
  if (it == transfers_.end() || it->second.timed_out)
    return;  // its timeout stops it already, and says so
  it->second.cancelled = true;
  // Its deadline stays: should an op not end by the kCancelled rule, the timeout still ends it.
  op_timeout(asked->second, DeadlineStage::kCancelled);
}

std::shared_ptr<StopSignal> ManagerState::list_stop() {
  // The stops of lists whose workers ended (only this map holds them) go first: the map stays
  // within the workers running (kMaxListWorkers) plus this one.
  for (auto it = list_stops_.begin(); it != list_stops_.end();)
    it = it->second.use_count() == 1 ? list_stops_.erase(it) : std::next(it);
  auto stop = std::make_shared<StopSignal>();
  if (RequestKey key = current_request(); key.first)
    list_stops_[key] = stop;
  return stop;
}

void ManagerState::arm_deadline_tick(std::chrono::steady_clock::time_point deadline) {
  if (next_tick_ <= deadline + kDeadlineSlack)
    return;  // a sweep is due soon enough
  next_tick_ = deadline;
  auto delay = std::max(deadline - now(), std::chrono::steady_clock::duration::zero());
  self_->delayed_send(
      self_,
      std::chrono::duration_cast<std::chrono::microseconds>(delay) + std::chrono::microseconds(1),
      OpTick{static_cast<int64_t>(deadline.time_since_epoch().count())});
}

void ManagerState::deadline_tick(int64_t at) {
  if (next_tick_.time_since_epoch().count() == at)
    next_tick_ = std::chrono::steady_clock::time_point::max();
  const auto at_now = now();
  while (!deadlines_.empty() && deadlines_.begin()->first <= at_now) {
    uint64_t ticket = deadlines_.begin()->second;
    auto it = transfers_.find(ticket);
    if (it != transfers_.end())
      it->second.deadline = deadlines_.end();
    deadlines_.erase(deadlines_.begin());
    op_timeout(ticket, DeadlineStage::kDue);
  }
  if (!deadlines_.empty())
    arm_deadline_tick(deadlines_.begin()->first);
}

caf::result<TransferReply> ManagerState::transfer(TransferOp op, uint32_t timeout_ms) {
  if (timeout_ms == 0)
    return make_rdma_error(ErrorCode::kInvalidArgument, "transfer timeout must be > 0 ms");
  Transfer t;
  t.asked_by = current_request();  // before the promise, which takes the sender
  t.single = self_->make_response_promise<TransferReply>();
  auto rp = t.single;
  t.timeout_ms = capped(timeout_ms);
  OpRecord record;
  record.op = std::move(op);
  t.ops.push_back(std::move(record));
  uint64_t ticket = new_transfer(std::move(t));
  start_op(OpId{ticket, 0});
  return rp;
}

caf::result<std::vector<TransferOutcome>> ManagerState::batch(std::vector<TransferOp> ops,
                                                              uint32_t timeout_ms) {
  if (timeout_ms == 0)
    return make_rdma_error(ErrorCode::kInvalidArgument, "batch timeout must be > 0 ms");
  if (ops.empty())
    return std::vector<TransferOutcome>{};
  Transfer t;
  t.batch = true;
  t.asked_by = current_request();  // before the promise, which takes the sender
  t.many = self_->make_response_promise<std::vector<TransferOutcome>>();
  auto rp = t.many;
  t.timeout_ms = capped(timeout_ms);
  for (auto& op : ops) {
    OpRecord record;
    record.op = std::move(op);
    t.ops.push_back(std::move(record));
  }
  if (!nic_.rails.empty() || options_.stripe_qps > 1)
    Rails::count_batch(t.ops);  // manager/rails.h invariant 19: a list stripes by its bytes
  uint64_t ticket = new_transfer(std::move(t));
  nic_.batching = true;
  for (uint32_t i = 0; i < ops.size(); ++i) {
    if (transfers_.count(ticket) == 0)
      break;
    start_op(OpId{ticket, i});
  }
  nic_.batching = false;
  chunks_.send_held();  // its small fallback ops, packed (chunk_path.h invariant 5)
  for (auto& qp : nic_.queued_on)
    qp->post_queued();
  if (!nic_.queued_on.empty())
    nic_.poller->wake();
  nic_.queued_on.clear();
  return rp;
}

// -- validation and path choice ----------------------------------------------------------------

void ManagerState::start_op(OpId id) {
  OpRecord& o = transfer_of(id).ops[id.index];
  const TransferOp& op = o.op;
  auto lb = buffer_table.local_buffer(op.local, "local");
  if (!lb.ok())
    return fail_op(id, to_caf_error(lb.error()));
  LocalBuffer& local = **lb;
  auto checked = checked_length(op, local.size, local.access);
  if (!checked.ok())
    return fail_op(id, to_caf_error(checked.error()));
  if (is_atomic(op) && local.memory != BufferMemory::kHost)  // invariant 14
    return fail_op(id, make_rdma_error(ErrorCode::kInvalidArgument,
                                       "the old value of a " + std::string(kind_name(op.kind)) +
                                           " lands in host memory, but the local " +
                                           describe(op.local) + " is GPU memory"));
  o.length = *checked;
  o.peer = op.remote.owner.address();
  ++local.in_use;
  o.holds_local = true;
  PathChoice choice = choose_path(op, path_facts(o, local));
  if (choice.path == PathKind::kNone)
    return fail_op(id, make_rdma_error(choice.code, choice.why));
  if (choice.path == PathKind::kStream && !stream_size_fits(o.length, options_.stream_min_bytes))
    peer_table.peer_for(op.remote.owner, op.remote.owner_name).endpoint_tried = true;
  o.path = choice.path;
  path(choice.path).start(id);
}

PathFacts ManagerState::path_facts(const OpRecord& o, const LocalBuffer& local) const {
  const TransferOp& op = o.op;
  PathFacts f = device_facts(op, options_.mode, nic_.domain != nullptr, nic_.no_rdma_reason,
                             nic_.port_down, nic_.domain && nic_.domain->port().is_ethernet);
  f.same_node = o.peer == facade_.address();
  if (nic_.domain) {
    f.device = nic_.domain->device_name();
    f.device_atomics = nic_.domain->atomics();
  }
  // Both ranges this node's and overlapping (one buffer, or two over the same memory).
  f.ranges_overlap = f.same_node && ranges_overlap(local.addr + op.local_offset,
                                                   op.remote.addr + op.remote_offset, o.length);
  // Registered on the device (GPU memory a reopened device did not register again is not).
  f.local_staged = local.memory == BufferMemory::kGpuStaged;
  f.local_registered = f.local_staged || !local.rdma.released();
  auto p = peer_table.peers().find(o.peer);
  // Smaller ops take the stream channel too while its owner's endpoint is unknown here: the
  // grant names it, and the stream lanes then take the next ones (actors/stream_endpoints.h).
  // Asked last, and only for a small op: the endpoints' lock is not on every op's way.
  auto learns_endpoint = [&] {
    return op.remote.stream_port != 0 && !f.same_node &&
           (p == peer_table.peers().end() || !p->second.endpoint_tried) &&
           !stream_endpoints_->find(o.peer);
  };
  f.stream_fits = !is_atomic(op) && stream_client_ && options_.stream_min_bytes > 0 &&
                  (stream_size_fits(o.length, options_.stream_min_bytes) || learns_endpoint()) &&
                  (p == peer_table.peers().end() || !p->second.no_stream) &&
                  (local.memory == BufferMemory::kHost || options_.device_memory);
  return f;
}

TransferPath& ManagerState::path(PathKind kind) {
  switch (kind) {
    case PathKind::kLocalCopy:
      return local_copy_;
    case PathKind::kRdma:
      return rdma_;
    case PathKind::kRdmaStaged:
      return staged_;
    case PathKind::kStream:
      return stream_;
    case PathKind::kChunks:
    case PathKind::kNone:
      break;
  }
  return chunks_;
}

RdmaPath* ManagerState::rdma_path(PathKind kind) {
  return kind == PathKind::kRdma ? &rdma_ : kind == PathKind::kRdmaStaged ? &staged_ : nullptr;
}

void ManagerState::reroute(OpId id, const std::string& why) {
  OpRecord* o = op_record(id);
  if (o == nullptr)
    return;
  if (o->path == PathKind::kRdmaStaged && staged_.posted_any(id))
    return fail_op(id, make_rdma_error(ErrorCode::kNoDevice,
                                       std::string(kind_name(o->op.kind)) + " with " +
                                           describe(o->op.remote) + " cannot use RDMA: " + why +
                                           " (an rdma-staged transfer had moved part of it)"));
  // Nothing was posted for it: the fallback moves all of it (GPU memory too, by copies).
  if (o->path == PathKind::kRdmaStaged)
    staged_.withdraw(id);
  else
    path(o->path).forget(id);
  if (is_atomic(o->op))  // invariant 14: an atomic never changes paths (NIC vs CPU atomics)
    return fail_op(id, make_rdma_error(ErrorCode::kNoDevice,
                                       std::string(kind_name(o->op.kind)) + " with " +
                                           describe(o->op.remote) + " cannot use RDMA: " + why +
                                           " (an atomic does not move to the fallback: the "
                                           "owner's CPU atomics are not atomic with NIC atomics)"));
  PathFacts facts = path_facts(*o, buffer_table.buffers().at(o->op.local.id));
  facts.rdma_lost = why;
  PathChoice choice = choose_path(o->op, facts);
  if (choice.path == PathKind::kNone)
    return fail_op(id, make_rdma_error(ErrorCode::kNoDevice, std::string(kind_name(o->op.kind)) +
                                                                 " with " + describe(o->op.remote) +
                                                                 " cannot use RDMA: " + why + " (" +
                                                                 fallback_forbidden_text() + ")"));
  o->path = choice.path;
  path(choice.path).start(id);
}

OpRecord* ManagerState::op_record(OpId id) {
  auto it = transfers_.find(id.ticket);
  if (it == transfers_.end() || it->second.ops[id.index].done)
    return nullptr;
  return &it->second.ops[id.index];
}

void ManagerState::resume_op(OpId id) {
  if (OpRecord* o = op_record(id))  // else timed out while it waited
    path(o->path).start(id);
}

// -- events and deadlines ------------------------------------------------------------------------

void ManagerState::stream_done(OpId id, uint64_t local_id, TransferOutcome outcome, bool refused) {
  stream_.job_ended(id, local_id, std::move(outcome), refused);
}

void ManagerState::op_timeout(uint64_t ticket, DeadlineStage stage) {
  auto it = transfers_.find(ticket);
  if (it == transfers_.end())
    return;
  it->second.timed_out = true;
  // Its time ran out after a cancel that left ops running (invariant 24): what ends now ends
  // by the timeout, and says so.
  if (stage == DeadlineStage::kDue)
    it->second.cancelled = false;
  const size_t n = it->second.ops.size();
  bool flushing = false;
  for (uint32_t i = 0; i < n; ++i) {
    // An op's end may complete (and erase) the transfer: look it up every time.
    const OpRecord* o = op_record(OpId{ticket, i});
    if (o == nullptr) {
      if (transfers_.count(ticket) == 0)
        return;
      continue;
    }
    if (o->notifying) {  // its path is done with it
      notices.deadline(OpId{ticket, i});
      continue;
    }
    flushing = path(o->path).deadline(OpId{ticket, i}, stage) || flushing;
  }
  if (flushing) {
    nic_.poller->wake();
    self_->delayed_send(self_, options_.drain_timeout,
                        OpTimeout{ticket, static_cast<uint32_t>(DeadlineStage::kDrainOverdue)});
  }
}

}  // namespace caf_rdma::detail
