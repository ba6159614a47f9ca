// RdmaManagerActor: transfers — validation, choice of path, the RDMA path, the fallback path,
// completion, timeouts.
#include <algorithm>
#include <atomic>
#include <cstring>

#include <cstdio>

#include "actors/detail/manager_state.h"
#include "actors/transfer_checks.h"

namespace caf_rdma::detail {

TransferOutcome outcome_of(const caf::error& err) {
  TransferOutcome o;
  o.code = static_cast<uint8_t>(error_code(err));
  if (err.category() == caf::atom("system")) {
    auto sec = static_cast<caf::sec>(err.code());
    if (sec == caf::sec::request_timeout)
      o.code = static_cast<uint8_t>(ErrorCode::kTimeout);
    else if (sec == caf::sec::request_receiver_down || sec == caf::sec::remote_linking_failed)
      o.code = static_cast<uint8_t>(ErrorCode::kPeerUnavailable);
  }
  o.message = error_message(err);
  return o;
}

TransferOutcome outcome_of(const Error& err) {
  TransferOutcome o;
  o.code = static_cast<uint8_t>(err.code());
  o.message = err.message();
  return o;
}

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
  auto due = self_->clock().now() + std::chrono::milliseconds(t.timeout_ms);
  t.due = due;
  t.deadline = deadlines_.emplace(due, ticket);
  transfers_.emplace(ticket, std::move(t));
  arm_deadline_tick(due);
  return ticket;
}

void ManagerState::arm_deadline_tick(std::chrono::steady_clock::time_point deadline) {
  if (next_tick_ <= deadline + kDeadlineSlack)
    return;  // a sweep is due soon enough
  next_tick_ = deadline;
  auto delay =
      std::max(deadline - self_->clock().now(), std::chrono::steady_clock::duration::zero());
  self_->delayed_send(
      self_,
      std::chrono::duration_cast<std::chrono::microseconds>(delay) + std::chrono::microseconds(1),
      OpTick{static_cast<int64_t>(deadline.time_since_epoch().count())});
}

void ManagerState::deadline_tick(int64_t at) {
  if (next_tick_.time_since_epoch().count() == at)
    next_tick_ = std::chrono::steady_clock::time_point::max();
  auto now = self_->clock().now();
  while (!deadlines_.empty() && deadlines_.begin()->first <= now) {
    uint64_t ticket = deadlines_.begin()->second;
    auto it = transfers_.find(ticket);
    if (it != transfers_.end())
      it->second.deadline = deadlines_.end();
    deadlines_.erase(deadlines_.begin());
    op_timeout(ticket, 0);
  }
  if (!deadlines_.empty())
    arm_deadline_tick(deadlines_.begin()->first);
}

caf::result<TransferReply> ManagerState::transfer(TransferOp op, uint32_t timeout_ms) {
  if (timeout_ms == 0)
    return make_rdma_error(ErrorCode::kInvalidArgument, "transfer timeout must be > 0 ms");
  Transfer t;
  t.single = self_->make_response_promise<TransferReply>();
  auto rp = t.single;
  t.timeout_ms = capped(timeout_ms);
  OpTrack track;
  track.op = std::move(op);
  t.ops.push_back(std::move(track));
  uint64_t ticket = new_transfer(std::move(t));
  start_op(ticket, 0);
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
  t.many = self_->make_response_promise<std::vector<TransferOutcome>>();
  auto rp = t.many;
  t.timeout_ms = capped(timeout_ms);
  for (auto& op : ops) {
    OpTrack track;
    track.op = std::move(op);
    t.ops.push_back(std::move(track));
  }
  uint64_t ticket = new_transfer(std::move(t));
  batching_ = true;
  for (uint32_t i = 0; i < ops.size(); ++i) {
    if (transfers_.count(ticket) == 0)
      break;
    start_op(ticket, i);
  }
  batching_ = false;
  for (auto& qp : queued_on_)
    qp->post_queued();
  if (!queued_on_.empty())
    poller_->wake();
  queued_on_.clear();
  return rp;
}

// -- validation and path choice ----------------------------------------------------------------

void ManagerState::start_op(uint64_t ticket, uint32_t index) {
  Transfer& t = transfers_.at(ticket);
  OpTrack& o = t.ops[index];
  const TransferOp& op = o.op;
  auto fail = [&](ErrorCode code, const std::string& msg) {
    fail_op(ticket, index, make_rdma_error(code, msg));
  };
  auto lb = local_buffer(op.local, "local");
  if (!lb.ok())
    return fail_op(ticket, index, to_caf_error(lb.error()));
  LocalBuffer& local = **lb;
  auto checked = checked_length(op, local.size, local.access);
  if (!checked.ok())
    return fail_op(ticket, index, to_caf_error(checked.error()));
  uint64_t length = *checked;
  o.length = length;
  o.peer = op.remote.owner.address();
  ++local.in_use;
  o.holds_local = true;
  bool remote_rdma = op.remote.has_rdma();
  // GPU memory its owner's NIC cannot register is only reachable through its owner.
  bool remote_staged = op.remote.memory == static_cast<uint8_t>(BufferMemory::kGpuStaged);
  bool same_fabric = domain_ && remote_rdma && op.remote.ethernet == domain_->port().is_ethernet;
  // Registered on the device (GPU memory a reopened device did not register again is not).
  bool local_rdma = local.memory == BufferMemory::kGpuStaged || !local.rdma.released();
  // Both ranges this node's and overlapping (one buffer, or two over the same memory): the
  // owner's own copy (memmove) moves them right on any transport; RDMA would not (see
  // ranges_overlap).
  if (o.peer == facade_.address() &&
      ranges_overlap(local.addr + op.local_offset, op.remote.addr + op.remote_offset, length))
    return start_fallback(ticket, index);
  if (options_.mode != TransportMode::kFallback && same_fabric && !remote_staged &&
      port_down_.empty() && local_rdma) {
    if (local.memory == BufferMemory::kGpuStaged)
      return start_staged(ticket, index);
    return start_rdma(ticket, index);
  }
  if (options_.mode == TransportMode::kRdma) {
    std::string why = !domain_ ? "this manager has no RDMA device (" + no_rdma_reason_ + ")"
                      : !port_down_.empty() ? "its RDMA port is down (" + port_down_ + ")"
                      : !local_rdma         ? "the local " + describe(op.local) +
                                          " has no registration on the reopened device"
                      : !remote_rdma ? "the owner " + op.remote.owner_name + " registered " +
                                           describe(op.remote) + " without an RDMA device"
                      : remote_staged ? "the owner " + op.remote.owner_name +
                                            "'s NIC cannot "
                                            "register the GPU memory of " +
                                            describe(op.remote) + ", so only its owner can move it"
                                      : "the owner is on another kind of fabric (RoCE vs "
                                        "InfiniBand)";
    return fail(ErrorCode::kNoDevice, std::string(kEnvTransport) +
                                          "=rdma forbids the fallback, "
                                          "but " +
                                          why);
  }
  start_fallback(ticket, index);
}

// -- completion --------------------------------------------------------------------------------

void ManagerState::fail_op(uint64_t ticket, uint32_t index, const caf::error& err) {
  finish_op(ticket, index, outcome_of(err));
}

void ManagerState::finish_op(uint64_t ticket, uint32_t index, TransferOutcome outcome) {
  auto it = transfers_.find(ticket);
  if (it == transfers_.end())
    return;
  Transfer& t = it->second;
  OpTrack& o = t.ops[index];
  if (o.done)
    return;
  o.done = true;
  const char* path = o.path == OpPath::kFallback ? kPathFallback
                     : o.staged                  ? kPathRdmaStaged
                                                 : kPathRdma;
  if (o.slot >= 0) {
    int slot = o.slot;
    o.slot = -1;
    release_slot(slot);  // the NIC is done with it: the op completed or was flushed
  }
  if (outcome.ok()) {
    outcome.bytes = o.length;
    outcome.path = path;
    if (o.path == OpPath::kRdma) {
      ++counters_.rdma_ops;
      counters_.rdma_bytes += o.length;
    } else {
      ++counters_.fallback_ops;
      counters_.fallback_bytes += o.length;
    }
  } else {
    ++counters_.errors;
    if (o.path != OpPath::kNone)
      outcome.path = path;
  }
  t.outcomes[index] = std::move(outcome);
  bool holds_local = o.holds_local;
  uint64_t local_id = o.op.local.id;
  o.holds_local = false;
  --t.remaining;
  // Reply first: a release waiting for this buffer must be answered after the transfer.
  maybe_reply(ticket);
  if (holds_local)
    buffer_done(local_id);
}

void ManagerState::maybe_reply(uint64_t ticket) {
  auto it = transfers_.find(ticket);
  if (it == transfers_.end() || it->second.remaining > 0)
    return;
  Transfer t = std::move(it->second);
  transfers_.erase(it);
  if (t.deadline != deadlines_.end())
    deadlines_.erase(t.deadline);
  if (t.batch) {
    t.many.deliver(std::move(t.outcomes));
    return;
  }
  TransferOutcome& o = t.outcomes.front();
  if (o.ok())
    t.single.deliver(TransferReply{o.bytes, o.path});
  else
    t.single.deliver(make_rdma_error(static_cast<ErrorCode>(o.code), std::move(o.message)));
}

void ManagerState::op_done(uint64_t ticket, uint32_t index, TransferOutcome outcome, OpFault fault,
                           uint32_t chunk) {
  auto it = transfers_.find(ticket);
  if (it == transfers_.end())
    return;
  OpTrack& o = it->second.ops[index];
  if (o.done)
    return;
  if (o.staged)
    return staged_chunk_done(ticket, index, chunk, std::move(outcome), fault);
  if (!outcome.ok())
    return rdma_failed(ticket, index, std::move(outcome), fault);
  if (options_.verify && o.path == OpPath::kRdma)
    return verify_op(ticket, index);
  finish_op(ticket, index, std::move(outcome));
}

void ManagerState::rdma_failed(uint64_t ticket, uint32_t index, TransferOutcome outcome,
                               OpFault fault) {
  Transfer& t = transfers_.at(ticket);
  OpTrack& o = t.ops[index];
  drop_if_broken(o);
  auto p = peers_.find(o.peer);
  if (p != peers_.end() && !p->second.down_reason.empty()) {
    outcome.code = static_cast<uint8_t>(ErrorCode::kPeerUnavailable);
    outcome.message = std::string(kind_name(o.op.kind)) + " failed: peer manager " +
                      p->second.name + " is down (" + p->second.down_reason + ")";
  } else if (t.timed_out) {
    outcome.code = static_cast<uint8_t>(ErrorCode::kTimeout);
    outcome.message = timeout_message(o.op, o.length, t.timeout_ms);
  } else if (fault == OpFault::kFlushed && !o.retried && !o.staged) {
    // Not this op's fault: another op on the queue pair failed and took the QP to ERR.
    // Reads and writes are idempotent: run it once more, on a new queue pair.
    o.retried = true;
    o.qp.reset();
    return start_rdma(ticket, index);
  } else if (fault == OpFault::kRemoteAccess) {
    return explain_refusal(ticket, index, std::move(outcome));
  }
  finish_op(ticket, index, std::move(outcome));
}

void ManagerState::drop_if_broken(const OpTrack& o) {
  // A QP in ERR is replaced, not reused (the next transfer makes a new one). Destroying it
  // completes whatever it still holds (flushed), so no op waits on a QP nobody will recover.
  auto qp = o.qp.lock();
  if (!qp || !qp->needs_recovery())
    return;
  if (qp == loopback_) {
    poller_->remove(qp.get());
    loopback_.reset();
  } else if (auto p = peers_.find(o.peer); p != peers_.end()) {
    drop_qp(p->second, qp);
  }
}

void ManagerState::explain_refusal(uint64_t ticket, uint32_t index, TransferOutcome outcome) {
  OpTrack& o = transfers_.at(ticket).ops[index];
  const TransferOp& op = o.op;
  auto owner_said = [op](TransferOutcome owner) {
    owner.message = std::string(kind_name(op.kind)) + " refused by the owner of " +
                    describe(op.remote) + ": " + owner.message;
    return owner;
  };
  if (o.peer == facade_.address()) {
    TransferOutcome owner = check_access(ref_of(op.remote), op.remote_offset, o.length, op.kind);
    return finish_op(ticket, index, owner.ok() ? std::move(outcome) : owner_said(owner));
  }
  // The answer comes well before the transfer's deadline, or the deadline ends the op.
  o.awaiting_owner = true;
  auto fallback = std::make_shared<TransferOutcome>(std::move(outcome));
  ask_peer<TransferOutcome>(
      op.remote.owner, op.remote.owner_name, request_timeout(transfers_.at(ticket)),
      [this, ticket, index, fallback, owner_said](TransferOutcome& owner) {
        finish_op(ticket, index, owner.ok() ? std::move(*fallback) : owner_said(owner));
      },
      [this, ticket, index, fallback](const caf::error& err) {
        if (error_code(err) == ErrorCode::kPeerUnavailable)
          return fail_op(ticket, index, err);  // it died: that is why
        fallback->message += "; its owner did not say why (" + error_message(err) + ")";
        finish_op(ticket, index, std::move(*fallback));
      },
      buf_check_atom::value, ref_of(op.remote), op.remote_offset, o.length, op.kind);
}

void ManagerState::verify_op(uint64_t ticket, uint32_t index) {
  OpTrack& o = transfers_.at(ticket).ops[index];
  const TransferOp& op = o.op;
  auto mine = local_checksum(buffers_.at(op.local.id), op.local_offset, o.length);
  if (!mine.ok())
    return finish_op(ticket, index, outcome_of(mine.error()));
  std::string qp_text;
  if (auto qp = o.qp.lock())
    qp_text = qp->describe();
  auto compare = [this, ticket, index, op, qp_text, length = o.length,
                  local = *mine](uint64_t remote) {
    if (local == remote)
      return finish_op(ticket, index, TransferOutcome{});
    char sums[96];
    std::snprintf(sums, sizeof(sums), "requester checksum 0x%llx, owner checksum 0x%llx",
                  static_cast<unsigned long long>(local), static_cast<unsigned long long>(remote));
    TransferOutcome bad;
    bad.code = static_cast<uint8_t>(ErrorCode::kDataMismatch);
    bad.message = std::string(kind_name(op.kind)) + " of " + std::to_string(length) +
                  " bytes completed, but the bytes differ: local " + describe(op.local) +
                  " offset " + std::to_string(op.local_offset) + " vs remote " +
                  describe(op.remote) + " offset " + std::to_string(op.remote_offset) + " (" +
                  sums + ") on " + (qp_text.empty() ? op.local.device : qp_text);
    finish_op(ticket, index, std::move(bad));
  };
  if (o.peer == facade_.address()) {
    auto rb = owner_access(ref_of(op.remote), op.remote_offset, o.length, false);
    if (!rb.ok())
      return finish_op(ticket, index, outcome_of(rb.error()));
    auto theirs = local_checksum(**rb, op.remote_offset, o.length);
    if (!theirs.ok())
      return finish_op(ticket, index, outcome_of(theirs.error()));
    return compare(*theirs);
  }
  o.awaiting_owner = true;
  ask_peer<uint64_t>(
      op.remote.owner, op.remote.owner_name, request_timeout(transfers_.at(ticket)),
      [compare](uint64_t& remote) { compare(remote); },
      [this, ticket, index, op](const caf::error& err) {
        TransferOutcome out = outcome_of(err);
        out.message = "verifying " + std::string(kind_name(op.kind)) + " with the owner of " +
                      describe(op.remote) + " failed: " + out.message;
        finish_op(ticket, index, std::move(out));
      },
      checksum_atom::value, ref_of(op.remote), op.remote_offset, o.length);
}

void ManagerState::op_timeout(uint64_t ticket, uint32_t stage) {
  auto it = transfers_.find(ticket);
  if (it == transfers_.end())
    return;
  it->second.timed_out = true;
  const uint32_t timeout_ms = it->second.timeout_ms;
  const size_t n = it->second.ops.size();
  std::string text = "timed out after " + std::to_string(timeout_ms) + " ms";
  auto timed_out = [&text](const OpTrack& o, const char* more) {
    TransferOutcome out;
    out.code = static_cast<uint8_t>(ErrorCode::kTimeout);
    out.message = std::string(kind_name(o.op.kind)) + " of " + std::to_string(o.length) +
                  " bytes between " + describe(o.op.local) + " and " + describe(o.op.remote) + " " +
                  text + more;
    return out;
  };
  bool flushing = false;
  for (uint32_t i = 0; i < n; ++i) {
    // finish_op may complete (and erase) the transfer: look it up every time.
    auto cur = transfers_.find(ticket);
    if (cur == transfers_.end())
      return;
    OpTrack& o = cur->second.ops[i];
    if (o.done)
      continue;
    if (o.streaming) {
      // A running stream job stops at this same deadline, a queued one is cancelled now;
      // either way stream_done finishes the op once the job no longer touches the memory.
      if (stage == 0 && stream_client_)
        (void)stream_client_->cancel_queued(o.job_tag);
      continue;
    }
    if (o.path == OpPath::kFallback && o.in_flight > 0 &&
        o.op.kind == static_cast<uint8_t>(TransferKind::kWrite)) {
      // Fallback store chunks on their way: the reply waits for their answers (each bounded
      // by the deadline plus the backstop), so none is applied after it (invariant 10).
      if (!o.fallback_error)
        o.fallback_error = timed_out(o, "");
      continue;
    }
    // An op whose RDMA is over and that waits for its owner's answer has nothing to flush.
    auto qp = o.awaiting_owner ? nullptr : o.qp.lock();
    if (o.path == OpPath::kRdma && qp) {
      if (stage == 0) {
        // Flush: every outstanding request completes (with an error), then we reply.
        (void)qp->abort("a transfer " + text);
        flushing = true;
        continue;
      }
      // The flush did not finish in time: destroy the QP so the NIC stops for sure.
      if (auto p = peers_.find(o.peer); p != peers_.end())
        drop_qp(p->second, qp);
      if (qp == loopback_) {
        poller_->remove(qp.get());
        loopback_.reset();
      }
    }
    TransferOutcome out = timed_out(o, qp ? "; its queue pair was destroyed" : "");
    // Ours was the last reference: the QP is gone (the NIC stopped) before finish_op hands a
    // staged op's bounce buffer to another transfer.
    qp.reset();
    finish_op(ticket, i, std::move(out));
  }
  if (flushing) {
    poller_->wake();
    self_->delayed_send(self_, options_.drain_timeout, OpTimeout{ticket, 1});
  }
}

// -- RDMA path ---------------------------------------------------------------------------------

void ManagerState::start_rdma(uint64_t ticket, uint32_t index) {
  OpTrack& o = transfers_.at(ticket).ops[index];
  o.path = OpPath::kRdma;
  if (!domain_ || !port_down_.empty())  // lost (or port down) since the op started
    return reroute(ticket, index,
                   !domain_ ? "this manager's RDMA device is gone (" + no_rdma_reason_ + ")"
                            : "its RDMA port is down (" + port_down_ + ")");
  if (o.peer == facade_.address()) {
    auto qp = loopback_qp();
    if (!qp.ok())
      return fail_op(ticket, index, to_caf_error(qp.error()));
    return post_rdma(ticket, index, *qp);
  }
  Peer& p = peer_for(o.op.remote.owner, o.op.remote.owner_name);
  if (!p.down_reason.empty())
    return fail_op(ticket, index,
                   make_rdma_error(ErrorCode::kPeerUnavailable,
                                   "peer manager " + p.name + " is down (" + p.down_reason + ")"));
  if (p.reconnecting) {  // invariant 13: until the link is made again (or its timeout)
    p.parked.emplace_back(ticket, index);
    return;
  }
  if (p.initiated && p.initiated->needs_recovery())
    drop_qp(p, p.initiated);
  if (p.initiated)
    return post_rdma(ticket, index, p.initiated);
  p.waiting.emplace_back(ticket, index);
  if (!p.handshaking)
    handshake(o.peer);
}

void ManagerState::post_rdma(uint64_t ticket, uint32_t index,
                             const std::shared_ptr<RdmaQueuePair>& qp) {
  auto it = transfers_.find(ticket);
  if (it == transfers_.end() || it->second.ops[index].done)
    return;
  OpTrack& o = it->second.ops[index];
  const TransferOp& op = o.op;
  if (op.remote.incarnation != 0 && op.remote.incarnation != qp->remote_incarnation()) {
    // Usually a handle from before its owner's device came back; rarely (a handle faster than
    // the owner's device_gone notice) a connection from before. Either way its remote key is
    // not for this connection: the owner moves the bytes.
    char both[96];
    std::snprintf(both, sizeof(both), "handle's incarnation %016llx, connection's %016llx",
                  static_cast<unsigned long long>(op.remote.incarnation),
                  static_cast<unsigned long long>(qp->remote_incarnation()));
    return reroute(ticket, index,
                   "the owner " + op.remote.owner_name +
                       "'s RDMA device went away and came back between the registration of " +
                       describe(op.remote) + " and this connection (" + both +
                       "), so its remote key is not for this connection");
  }
  if (o.staged) {
    post_staged(ticket, index, qp);
    return staged_settle(ticket, index);
  }
  // Accepted before any release of the buffer: the entry (and its region) lives until we finish.
  LocalBuffer& local = buffers_.at(op.local.id);
  RemoteBuffer remote{op.remote.addr, op.remote.size, op.remote.rkey, op.remote.device,
                      op.remote.incarnation};
  LocalSlice slice{local.rdma, op.local_offset, o.length};
  RdmaOp rop = op.kind == static_cast<uint8_t>(TransferKind::kRead)
                   ? RdmaOp::read(std::move(slice), std::move(remote), op.remote_offset)
                   : RdmaOp::write(std::move(slice), std::move(remote), op.remote_offset);
  // A single small transfer is polled for here (below); `landed` tells when it completed.
  bool poll_inline =
      options_.inline_poll.count() > 0 && !it->second.batch && o.length <= kInlinePollMaxBytes;
  std::shared_ptr<std::atomic<bool>> landed;
  if (poll_inline)
    landed = std::make_shared<std::atomic<bool>>(false);
  Status st = submit_rdma(ticket, index, 0, qp, std::move(rop), landed);
  if (!st.ok())
    return fail_op(ticket, index, to_caf_error(st.error()));
  if (batching_)
    return;  // posted with the rest of the batch (see batch())
  // A single small transfer: poll for its completion here for a moment, sparing the hop
  // through the poller thread (op_done then waits in our own mailbox, handled right after).
  if (poll_inline) {
    auto until = std::chrono::steady_clock::now() + options_.inline_poll;
    while (!landed->load(std::memory_order_acquire) && std::chrono::steady_clock::now() < until)
      qp->progress();
    if (landed->load(std::memory_order_acquire))
      return;
  }
  poller_->wake();
}

Status ManagerState::submit_rdma(uint64_t ticket, uint32_t index, uint32_t chunk,
                                 const std::shared_ptr<RdmaQueuePair>& qp, RdmaOp rop,
                                 const std::shared_ptr<std::atomic<bool>>& landed) {
  caf::actor_addr me = self_->address();
  auto callback = [me, ticket, index, chunk, landed](const OpResult& r) {
    TransferOutcome out;
    if (!r.status.ok()) {
      out.code = static_cast<uint8_t>(r.status.error().code());
      out.message = r.status.error().message();
    }
    // Runs on the poller thread (or ours, polling inline): report to the manager if it still
    // exists.
    if (auto h = caf::actor_cast<caf::actor>(me))
      caf::anon_send(h,
                     OpDone{ticket, index, std::move(out), static_cast<uint8_t>(r.fault), chunk});
    if (landed)
      landed->store(true, std::memory_order_release);
  };
  Status st = batching_ ? qp->submit_queued(std::move(rop), std::move(callback))
                        : qp->submit(std::move(rop), std::move(callback));
  if (!st.ok())
    return st;
  transfers_.at(ticket).ops[index].qp = qp;
  if (batching_ && std::find(queued_on_.begin(), queued_on_.end(), qp) == queued_on_.end())
    queued_on_.push_back(qp);
  return {};
}

// -- rdma-staged path --------------------------------------------------------------------------

void ManagerState::start_staged(uint64_t ticket, uint32_t index) {
  if (!domain_ || !port_down_.empty())  // lost (or port down) while it waited for a slot
    return reroute(ticket, index,
                   !domain_ ? "this manager's RDMA device is gone (" + no_rdma_reason_ + ")"
                            : "its RDMA port is down (" + port_down_ + ")");
  OpTrack& o = transfers_.at(ticket).ops[index];
  o.staged = true;
  o.path = OpPath::kRdma;
  int free_slot = -1;
  for (size_t i = 0; i < staging_.size() && free_slot < 0; ++i)
    if (!staging_[i].busy)
      free_slot = static_cast<int>(i);
  if (free_slot < 0 && staging_.size() < options_.staging_buffers) {
    StagingSlot slot;
    int gpu = buffers_.at(o.op.local.id).gpu;
    auto memory = BounceBuffer::allocate(options_.staging_bytes, options_.device_memory, gpu);
    if (!memory.ok())
      return fail_op(ticket, index,
                     to_caf_error(memory.error().with_context("allocating a staging buffer")));
    slot.memory = std::move(*memory);
    if (!slot.memory->page_locked() && !staging_lock_reported_) {
      staging_lock_reported_ = true;  // once: every buffer would say the same
      std::fprintf(stderr,
                   "caf-rdma: %s: staging buffers stay pageable, so GPU copies go through the "
                   "driver's own staging (slower): %s\n",
                   options_.name.c_str(), slot.memory->lock_error().c_str());
    }
    auto b = domain_->register_local(slot.memory->data(), options_.staging_bytes);
    if (!b.ok())
      return fail_op(ticket, index,
                     to_caf_error(b.error().with_context("registering a staging buffer")));
    slot.rdma = *b;
    staging_.push_back(std::move(slot));
    free_slot = static_cast<int>(staging_.size() - 1);
  }
  if (free_slot < 0) {
    staging_waiters_.emplace_back(ticket, index);  // its timeout still runs
    return;
  }
  staging_[free_slot].busy = true;
  o.slot = free_slot;
  o.chunks = plan_staging(o.length, staging_chunk_bytes());
  o.next_chunk = 0;
  o.chunks_done = 0;
  o.chunks_on_nic = 0;
  o.half_busy[0] = o.half_busy[1] = false;
  o.staged_error.reset();
  start_rdma(ticket, index);
}

size_t ManagerState::staging_halves() const {
  // Two, so one chunk's GPU copy overlaps the other's RDMA (a 1-byte buffer has one).
  return options_.staging_bytes >= 2 ? 2 : 1;
}

uint64_t ManagerState::staging_chunk_bytes() const {
  return options_.staging_bytes / staging_halves();
}

void ManagerState::post_staged(uint64_t ticket, uint32_t index,
                               const std::shared_ptr<RdmaQueuePair>& qp) {
  OpTrack& o = transfers_.at(ticket).ops[index];
  const TransferOp& op = o.op;
  const bool is_read = op.kind == static_cast<uint8_t>(TransferKind::kRead);
  const uint64_t chunk_bytes = staging_chunk_bytes();
  const size_t halves = staging_halves();
  bool posted = false;
  while (!o.staged_error && o.next_chunk < o.chunks.size() && !o.half_busy[o.next_chunk % halves]) {
    const auto chunk = static_cast<uint32_t>(o.next_chunk);
    const StagingChunk& c = o.chunks[chunk];
    const size_t half = chunk % halves;
    const uint64_t at = half * chunk_bytes;
    StagingSlot& slot = staging_[o.slot];
    if (!is_read) {
      // Out of the GPU into this half while the NIC may still move the other half's chunk.
      if (o.chunks_on_nic > 0)
        ++counters_.staged_overlapped;
      Status st = copy_out(buffers_.at(op.local.id), op.local_offset + c.offset,
                           slot.memory->data() + at, c.length);
      if (!st.ok()) {
        o.staged_error.emplace(outcome_of(to_caf_error(st.error().with_context(
                                   "rdma-staged write from " + describe(op.local)))),
                               OpFault::kNone);
        break;
      }
    }
    RemoteBuffer remote{op.remote.addr, op.remote.size, op.remote.rkey, op.remote.device,
                        op.remote.incarnation};
    LocalSlice slice{slot.rdma, at, c.length};
    RdmaOp rop =
        is_read ? RdmaOp::read(std::move(slice), std::move(remote), op.remote_offset + c.offset)
                : RdmaOp::write(std::move(slice), std::move(remote), op.remote_offset + c.offset);
    Status st = submit_rdma(ticket, index, chunk, qp, std::move(rop), nullptr);
    if (!st.ok()) {
      o.staged_error.emplace(outcome_of(to_caf_error(st.error())), OpFault::kNone);
      break;
    }
    o.half_busy[half] = true;
    ++o.chunks_on_nic;
    ++o.next_chunk;
    posted = true;
  }
  if (posted && !batching_)
    poller_->wake();
}

void ManagerState::staged_chunk_done(uint64_t ticket, uint32_t index, uint32_t chunk,
                                     TransferOutcome outcome, OpFault fault) {
  Transfer& t = transfers_.at(ticket);
  OpTrack& o = t.ops[index];
  if (o.slot < 0 || chunk >= o.chunks.size() || o.chunks_on_nic == 0)
    return;  // not one of its chunks on the NIC (e.g. a late completion of a destroyed QP)
  const uint64_t chunk_bytes = staging_chunk_bytes();
  const size_t halves = staging_halves();
  const size_t half = chunk % halves;
  --o.chunks_on_nic;
  if (!outcome.ok()) {
    if (!o.staged_error)
      o.staged_error.emplace(std::move(outcome), fault);
    // Its QP in ERR goes now: a chunk posted after the error (while we copied) would otherwise
    // wait in it for a recovery nobody runs; destroyed, it completes as flushed.
    drop_if_broken(o);
  } else if (!o.staged_error && !t.timed_out) {
    if (o.op.kind == static_cast<uint8_t>(TransferKind::kRead)) {
      // Into the GPU from this half while the NIC may still fill the other one.
      if (o.chunks_on_nic > 0)
        ++counters_.staged_overlapped;
      const StagingChunk& c = o.chunks[chunk];
      Status st = copy_in(buffers_.at(o.op.local.id), o.op.local_offset + c.offset,
                          staging_[o.slot].memory->data() + half * chunk_bytes, c.length);
      if (!st.ok())
        o.staged_error.emplace(outcome_of(to_caf_error(st.error().with_context(
                                   "rdma-staged read into " + describe(o.op.local)))),
                               OpFault::kNone);
    }
    if (!o.staged_error) {
      ++o.chunks_done;
      ++counters_.staged_chunks;
    }
  }
  o.half_busy[half] = false;
  if (!o.staged_error && !t.timed_out && o.next_chunk < o.chunks.size()) {
    if (auto qp = o.qp.lock(); qp && !qp->needs_recovery())
      post_staged(ticket, index, qp);
    else if (o.chunks_on_nic == 0)  // else the chunk still out brings the QP's own error
      o.staged_error.emplace(
          outcome_of(make_rdma_error(ErrorCode::kPeerUnavailable,
                                     "the queue pair of an rdma-staged transfer to " +
                                         o.op.remote.owner_name + " is gone")),
          OpFault::kNone);
  }
  staged_settle(ticket, index);
}

void ManagerState::staged_settle(uint64_t ticket, uint32_t index) {
  Transfer& t = transfers_.at(ticket);
  OpTrack& o = t.ops[index];
  if (o.done || o.chunks_on_nic > 0)
    return;  // the NIC may still use the bounce buffer: answer when its last chunk is back
  if (o.chunks_done == o.chunks.size()) {
    if (!options_.verify)
      return finish_op(ticket, index, TransferOutcome{});
    // The NIC is done with the bounce buffer: another transfer may have it while the owner
    // computes its checksum.
    int slot = o.slot;
    o.slot = -1;
    release_slot(slot);
    return verify_op(ticket, index);
  }
  TransferOutcome out;
  OpFault fault = OpFault::kNone;
  if (o.staged_error) {
    out = std::move(o.staged_error->first);
    fault = o.staged_error->second;
  } else {
    // Timed out between chunks (a chunk that completed after the deadline is not enough).
    out.code = static_cast<uint8_t>(ErrorCode::kTimeout);
    out.message = timeout_message(o.op, o.length, t.timeout_ms);
  }
  rdma_failed(ticket, index, std::move(out), fault);
}

void ManagerState::release_slot(int slot) {
  staging_[slot].busy = false;
  // A waiter may not take it (rerouted to the fallback): then the next one may.
  while (!staging_waiters_.empty() && !staging_[slot].busy) {
    auto [ticket, index] = staging_waiters_.front();
    staging_waiters_.erase(staging_waiters_.begin());
    auto it = transfers_.find(ticket);
    if (it == transfers_.end() || it->second.ops[index].done)
      continue;  // finished (timed out) while waiting
    return start_staged(ticket, index);
  }
}

// -- fallback path -----------------------------------------------------------------------------

void ManagerState::start_fallback(uint64_t ticket, uint32_t index) {
  OpTrack& o = transfers_.at(ticket).ops[index];
  o.path = OpPath::kFallback;
  const TransferOp& op = o.op;
  bool is_read = op.kind == static_cast<uint8_t>(TransferKind::kRead);
  if (o.peer == facade_.address()) {
    // Both buffers are ours: the owner's checks, then a copy.
    auto rb = owned_buffer(op.remote.id, "remote");
    if (!rb.ok())
      return fail_op(ticket, index, to_caf_error(rb.error()));
    LocalBuffer& remote = **rb;
    if (!secrets_equal(remote.secret_hi, remote.secret_lo, op.remote.secret_hi,
                       op.remote.secret_lo))
      return fail_op(ticket, index,
                     make_rdma_error(ErrorCode::kPermissionDenied,
                                     "remote " + describe(op.remote) +
                                         ": the handle's secret is not the one its owner issued "
                                         "(forged, or a handle of an earlier registration)"));
    if (op.remote_offset + o.length > remote.size)
      return fail_op(
          ticket, index,
          make_rdma_error(ErrorCode::kOutOfBounds, "remote " + describe(op.remote) + " is only " +
                                                       std::to_string(remote.size) + " bytes"));
    if (!is_read && remote.access != BufferAccess::kReadWrite)
      return fail_op(ticket, index,
                     make_rdma_error(ErrorCode::kInvalidArgument,
                                     "cannot write into read-only " + describe(op.remote)));
    LocalBuffer& local = buffers_.at(op.local.id);
    const LocalBuffer& src = is_read ? remote : local;
    const LocalBuffer& dst = is_read ? local : remote;
    uint64_t src_off = is_read ? op.remote_offset : op.local_offset;
    uint64_t dst_off = is_read ? op.local_offset : op.remote_offset;
    if (src.memory == BufferMemory::kHost && dst.memory == BufferMemory::kHost) {
      std::memmove(reinterpret_cast<uint8_t*>(dst.addr) + dst_off,
                   reinterpret_cast<uint8_t*>(src.addr) + src_off, o.length);
    } else {
      // GPU memory on either side: through a host buffer a chunk at a time (bounded memory),
      // back to front when the destination lies after the source (overlapping ranges).
      const uint64_t chunk = std::min<uint64_t>(o.length, kLocalCopyChunk);
      std::unique_ptr<uint8_t[]> tmp(new (std::nothrow) uint8_t[chunk]);
      if (!tmp)
        return fail_op(ticket, index,
                       make_rdma_error(ErrorCode::kResourceExhausted,
                                       "cannot allocate " + std::to_string(chunk) +
                                           " bytes of host memory to copy between " +
                                           describe(op.local) + " and " + describe(op.remote)));
      const bool backwards = dst.addr + dst_off > src.addr + src_off;
      Status st;
      for (uint64_t done = 0, n = 0; done < o.length && st.ok(); done += n) {
        n = std::min(chunk, o.length - done);
        uint64_t at = backwards ? o.length - done - n : done;
        st = copy_out(src, src_off + at, tmp.get(), n);
        if (st.ok())
          st = copy_in(dst, dst_off + at, tmp.get(), n);
      }
      if (!st.ok())
        return fail_op(ticket, index, to_caf_error(st.error()));
    }
    return finish_op(ticket, index, TransferOutcome{});
  }
  Peer& p = peer_for(op.remote.owner, op.remote.owner_name);
  if (!p.down_reason.empty())
    return fail_op(ticket, index,
                   make_rdma_error(ErrorCode::kPeerUnavailable,
                                   "peer manager " + p.name + " is down (" + p.down_reason + ")"));
  if (p.reconnecting) {  // invariant 13: until the link is made again (or its timeout)
    p.parked.emplace_back(ticket, index);
    return;
  }
  if (wants_stream(o, buffers_.at(op.local.id), p))
    return start_stream(ticket, index);
  pump_fallback(ticket, index);
}

void ManagerState::pump_fallback(uint64_t ticket, uint32_t index) {
  auto it = transfers_.find(ticket);
  if (it == transfers_.end())
    return;
  Transfer& t = it->second;
  OpTrack& o = t.ops[index];
  const TransferOp& op = o.op;
  bool is_read = op.kind == static_cast<uint8_t>(TransferKind::kRead);
  // A chunk's request ends by the transfer's deadline (plus the backstop): a timed-out write
  // that waits for its chunks (invariant 10) replies soon after its timeout.
  auto left =
      std::max(std::chrono::milliseconds(0),
               std::chrono::duration_cast<std::chrono::milliseconds>(t.due - self_->clock().now()));
  auto timeout = left + kRequestBackstop;  // never more than request_timeout(t)
  // A write chunk failed or never left: the op fails once none of its chunks is on its way.
  auto write_chunk_failed = [this, ticket, index](OpTrack& o, TransferOutcome out) {
    --o.in_flight;
    if (!o.fallback_error)
      o.fallback_error = std::move(out);
    if (o.in_flight == 0)
      finish_op(ticket, index, *o.fallback_error);
  };
  auto on_error = [this, ticket, index, is_read, write_chunk_failed](caf::error& err) {
    auto it = transfers_.find(ticket);
    if (it == transfers_.end() || it->second.ops[index].done)
      return;
    OpTrack& o = it->second.ops[index];
    TransferOutcome out = outcome_of(err);
    if (out.code == static_cast<uint8_t>(ErrorCode::kPeerUnavailable) ||
        err.category() == caf::atom("system"))
      out.message = std::string(kind_name(o.op.kind)) + " via the fallback to " +
                    describe(o.op.remote) + " failed: " + out.message;
    if (is_read)  // late data of a failed read is dropped: nothing to wait for
      return finish_op(ticket, index, std::move(out));
    write_chunk_failed(o, std::move(out));
  };
  Peer& owner = peers_.at(o.peer);
  while (!o.fallback_error && o.in_flight < options_.fallback_window && o.next_offset < o.length) {
    uint64_t off = o.next_offset;
    uint64_t n = std::min<uint64_t>(options_.fallback_chunk_bytes, o.length - off);
    // Reads ask an owner for at most a window of answers at once (invariant 12): more wait here,
    // not at the owner.
    const uint64_t charge = std::max(n, kWindowMinCharge);
    if (is_read && owner.fetching > 0 && owner.fetching + charge > options_.peer_window_bytes) {
      if (!o.fetch_queued) {
        o.fetch_queued = true;
        owner.fetch_queue.emplace_back(ticket, index);
      }
      break;
    }
    if (is_read)
      owner.fetching += charge;
    o.next_offset += n;
    ++o.in_flight;
    LocalBuffer& local = buffers_.at(op.local.id);
    uint64_t local_off = op.local_offset + off;
    auto chunk_done = [this, ticket, index](uint64_t bytes) {
      auto it = transfers_.find(ticket);
      if (it == transfers_.end() || it->second.ops[index].done)
        return;
      OpTrack& o = it->second.ops[index];
      --o.in_flight;
      o.bytes_done += bytes;
      if (o.fallback_error) {  // failed or timed out: answered once no chunk is on its way
        if (o.in_flight == 0)
          finish_op(ticket, index, *o.fallback_error);
        return;
      }
      if (o.bytes_done >= o.length)
        return finish_op(ticket, index, TransferOutcome{});
      pump_fallback(ticket, index);
    };
    if (is_read) {
      caf::actor_addr key = o.peer;
      const uint64_t link = owner.link;
      peer_request(op.remote.owner, timeout, fetch_atom::value, ref_of(op.remote),
                   op.remote_offset + off, n)
          .then(
              [this, ticket, index, local_off, n, chunk_done, key, charge, link](ByteChunk& data) {
                fetch_answered(key, charge, link);
                auto it = transfers_.find(ticket);
                if (it == transfers_.end() || it->second.ops[index].done)
                  return;  // timed out or failed: drop late data
                if (data.size != n)
                  return finish_op(
                      ticket, index,
                      outcome_of(Error(ErrorCode::kInternal,
                                       "fallback read chunk of " + std::to_string(n) +
                                           " bytes came back with " + std::to_string(data.size))));
                auto& o = transfers_.at(ticket).ops[index];
                Status st = copy_in(buffers_.at(o.op.local.id), local_off, data.data, n);
                if (!st.ok())
                  return finish_op(ticket, index, outcome_of(st.error()));
                chunk_done(n);
              },
              [this, on_error, key, charge, link](caf::error& err) mutable {
                fetch_answered(key, charge, link);
                on_error(err);
              });
    } else {
      // Zero-copy: the chunk points into the local buffer, which stays in use (so its release
      // waits) until the last copy of the message carrying it is destroyed, i.e. until it has
      // been serialized and sent (or dropped), whenever its reply comes: the pin's deleter tells
      // us (ChunkSent).
      ByteChunk bytes;
      uint64_t local_id = op.local.id;
      if (local.memory == BufferMemory::kHost) {
        bytes.data = reinterpret_cast<uint8_t*>(local.addr) + local_off;
        bytes.size = n;
        ++local.in_use;
        caf::actor_addr me = self_->address();
        bytes.pin = std::shared_ptr<void>(nullptr, [me, local_id](void*) {
          if (auto h = caf::actor_cast<caf::actor>(me))
            caf::anon_send(h, ChunkSent{local_id});
        });
      } else {  // GPU memory: copied to the host first
        bytes = ByteChunk::allocate(n);
        if (Status st = copy_out(local, local_off, bytes.owned.get(), n); !st.ok())
          return write_chunk_failed(o, outcome_of(st.error()));  // earlier ones may be out
      }
      peer_request(op.remote.owner, timeout, store_atom::value, ref_of(op.remote),
                   op.remote_offset + off, std::move(bytes))
          .then([chunk_done](uint64_t stored) { chunk_done(stored); }, on_error);
    }
  }
}

void ManagerState::fetch_answered(const caf::actor_addr& key, uint64_t charge, uint64_t link) {
  auto p = peers_.find(key);
  if (p == peers_.end() || p->second.link != link)
    return;  // asked over a link lost since: forgotten with it (invariant 13)
  Peer& owner = p->second;
  owner.fetching -= std::min(owner.fetching, charge);
  // The reads waiting for this owner's window, each once (one that still does not fit queues
  // again at the back).
  for (size_t n = owner.fetch_queue.size(); n > 0 && !owner.fetch_queue.empty(); --n) {
    if (owner.fetching > 0 && owner.fetching + kWindowMinCharge > options_.peer_window_bytes)
      break;
    auto [ticket, index] = owner.fetch_queue.front();
    owner.fetch_queue.pop_front();
    auto it = transfers_.find(ticket);
    if (it == transfers_.end() || it->second.ops[index].done)
      continue;  // finished (timed out, failed) while it waited
    it->second.ops[index].fetch_queued = false;
    pump_fallback(ticket, index);
  }
}

}  // namespace caf_rdma::detail
