// WriteNotices: write notifications (see write_notices.h).
#include "actors/manager/write_notices.h"

#include <algorithm>
#include <utility>

#include "actors/detail/manager_state.h"
#include "actors/manager/direct_link.h"
#include "actors/op_texts.h"
#include "primitives/log.h"

namespace caf_rdma::detail {

// -- owner side --------------------------------------------------------------------------------

caf::result<bool> WriteNotices::watch(uint64_t id, const caf::actor& watcher) {
  auto b = m_.buffer_table.owned_buffer(id, "watched");
  if (!b.ok())
    return to_caf_error(b.error());
  (*b)->watcher = watcher;
  return true;
}

caf::result<uint64_t> WriteNotices::notice(const BufferRef& ref, uint64_t offset, uint64_t length,
                                           uint64_t tag, uint64_t receipt,
                                           const std::string& writer) {
  const auto& sender = m_.self()->current_sender();
  // A peer's notice comes through the facade with the writing node's actor as sender.
  const std::string node = m_.receipts.sender_node();
  if (sender && sender->node() == m_.self()->node()) {  // this node's own: its copy is done
    auto n = deliver(ref, offset, length, tag, node, writer, true);
    if (!n.ok())
      return to_caf_error(n.error());
    return *n;
  }
  auto refuse = [this, id = ref.id](const Error& e) {
    ++m_.counters().notices_refused;
    return to_caf_error(Error(e.code(), notice_refused_text(id, m_.options().name, e.message())));
  };
  // What is refused whatever its receipt is refused at once, and claims nothing.
  auto pending = pending_by_node_.find(node);
  auto target = m_.buffer_table.owner_access(ref, offset, length, true);
  if (!target.ok() || !(*target)->watcher ||
      (pending != pending_by_node_.end() && pending->second >= kMaxPendingNotices)) {
    auto n = deliver(ref, offset, length, tag, node, writer, false);  // names the refusal
    if (!n.ok())
      return to_caf_error(n.error());
    return *n;
  }
  // Invariant 15: only a write its owner saw land is notified (its receipt, claimed once).
  // Invariant 17: whether its node is directly connected decides which budgets it takes.
  const caf::node_id from = sender ? sender->node() : caf::node_id{};
  auto rp = m_.self()->make_response_promise<uint64_t>();
  std::string name = writer.substr(0, kMaxWriterName + 1);  // deliver() cuts it
  auto claim = [this, rp, ref, offset, length, tag, receipt, node, name,
                refuse](bool direct) mutable {
    m_.receipts.claim(node, receipt, ref.id, offset, length, direct,
                      [this, rp, ref, offset, length, tag, node, name, refuse,
                       direct](const Status& landed) mutable {
                        if (!landed.ok()) {
                          rp.deliver(refuse(landed.error()));
                          return;
                        }
                        auto n = deliver(ref, offset, length, tag, node, name, direct);
                        if (n.ok())
                          rp.deliver(*n);
                        else
                          rp.deliver(to_caf_error(n.error()));
                      });
  };
  if (from == caf::node_id{})
    claim(false);
  else
    ask_direct_link(m_.self(), from,
                    [claim](caf::expected<bool> direct) mutable { claim(direct && *direct); });
  return rp;
}

Result<uint64_t> WriteNotices::deliver(const BufferRef& ref, uint64_t offset, uint64_t length,
                                       uint64_t tag, const std::string& node,
                                       const std::string& writer, bool direct) {
  auto checked = m_.buffer_table.owner_access(ref, offset, length, true);
  if (!checked.ok()) {
    ++m_.counters().notices_refused;
    return checked.error();
  }
  LocalBuffer& b = **checked;
  const std::string who = node.empty() ? m_.options().name : "node " + node;
  if (!b.watcher) {
    ++m_.counters().notices_refused;
    return Error(ErrorCode::kInvalidArgument,
                 notice_refused_text(ref.id, m_.options().name,
                                     "nobody watches it (its owner did not call watch_writes)"));
  }
  auto found = pending_by_node_.find(node);
  const uint64_t mine = found == pending_by_node_.end() ? 0 : found->second;
  // Invariant 17: the first full budget names itself (the node's, the indirect share, all).
  const uint64_t share = kMaxPendingNoticesTotal / kIndirectShare;
  const char* full = nullptr;
  uint64_t count = 0, limit = 0;
  if (mine >= kMaxPendingNotices) {
    full = "";
    count = mine;
    limit = kMaxPendingNotices;
  } else if (!direct && pending_indirect_ >= share) {
    full = "from nodes not directly connected ";
    count = pending_indirect_;
    limit = share;
  } else if (pending_ >= kMaxPendingNoticesTotal) {
    full = "from all writers ";
    count = pending_;
    limit = kMaxPendingNoticesTotal;
  }
  if (full != nullptr) {
    ++m_.counters().notices_refused;
    return Error(ErrorCode::kResourceExhausted,
                 notice_refused_text(ref.id, m_.options().name,
                                     std::to_string(count) + " notices " +
                                         (*full == '\0' ? "from " + who + " " : std::string(full)) +
                                         "wait for its watcher's answers (limit " +
                                         std::to_string(limit) + ")"));
  }
  ++pending_by_node_[node];
  ++pending_;
  if (!direct)
    ++pending_indirect_;
  ++m_.counters().notices_sent;
  // Invariant 17: a pending notice's size is bounded too, whatever name its writer sent.
  std::string name =
      writer.size() <= kMaxWriterName ? writer : writer.substr(0, kMaxWriterName) + "...";
  WriteNotice n{ref.id, offset, length, tag, node, std::move(name)};
  caf::actor watcher = b.watcher;
  const uint64_t id = ref.id;
  auto answered = [this, node, direct] {
    auto it = pending_by_node_.find(node);
    if (it != pending_by_node_.end() && --it->second == 0)
      pending_by_node_.erase(it);
    --pending_;
    if (!direct)
      --pending_indirect_;
  };
  m_.self()
      ->request(watcher, m_.options().max_timeout, write_notice_atom::value, std::move(n))
      .then([answered] { answered(); },
            [this, answered, watcher, id](caf::error& err) {
              answered();
              // A watcher that is gone hears no more: later notify writes fail, naming why.
              if (err != caf::sec::request_receiver_down)
                return;
              auto it = m_.buffer_table.buffers().find(id);
              if (it != m_.buffer_table.buffers().end() && it->second.watcher == watcher) {
                it->second.watcher = nullptr;
                log_line(LogLevel::kWarn, "caf-rdma: %s: the watcher of buffer %llu is gone",
                         m_.options().name.c_str(), static_cast<unsigned long long>(id));
              }
            });
  return pending_by_node_[node];
}

// -- writer side -------------------------------------------------------------------------------

void WriteNotices::after_write(OpId id, TransferOutcome written,
                               const std::weak_ptr<QpEndpoint>& qp) {
  written_[id] = Pending{std::move(written), false, {}};
  auto q = qp.lock();
  if (!q)
    return tell_owner(id);  // the fallback (its owner stored the bytes: a receipt), or no QP
  OpRecord& o = *m_.op_record(id);
  const TransferOp& op = o.op;
  RemoteBuffer remote{op.remote.addr, op.remote.size, op.remote.rkey, op.remote.device,
                      op.remote.incarnation};
  const bool ours = op.remote.owner.address() == m_.facade().address();
  Status st;
  RdmaOp after;
  if (ours) {
    // Invariant 15, our own buffer (the loopback queue pair): a READ of the write's last byte,
    // after it on the same queue pair.
    auto target = m_.receipts.sink();
    if (!target.ok())
      st = target.error();
    else
      after = RdmaOp::read(LocalSlice{*target, 0, 1}, std::move(remote),
                           op.remote_offset + o.length - 1);
  } else {
    // Invariant 15: a zero-byte WRITE WITH IMMEDIATE after it on the same queue pair; its owner
    // records the immediate as the write's receipt once it (and so the write) landed.
    o.receipt = m_.receipts.next_rdma_receipt();
    after =
        RdmaOp::write_imm(std::move(remote), op.remote_offset, static_cast<uint32_t>(o.receipt));
  }
  if (st.ok()) {
    caf::actor_addr me = m_.self()->address();
    st = q->submit(std::move(after), [me, id](const OpResult& r) {
      TransferOutcome out;
      if (!r.status.ok()) {
        out.code = static_cast<uint8_t>(r.status.error().code());
        out.message = r.status.error().message();
      }
      if (auto h = caf::actor_cast<caf::actor>(me))
        caf::anon_send(h, FenceDone{id.ticket, id.index, std::move(out)});
    });
  }
  if (st.ok())
    written_[id].fence = q;  // until it completes: fences_on
  if (!st.ok()) {
    Error e(st.error().code(), fence_failed_text(ours, st.error().message()));
    return finish(id, &e);
  }
  m_.nic().poller->wake();
}

void WriteNotices::fenced(OpId id, const TransferOutcome& fence) {
  if (m_.op_record(id) == nullptr) {
    written_.erase(id);
    return;  // ended before the fence came back
  }
  if (written_.count(id) == 0)
    return;
  written_[id].fence.reset();
  if (!fence.ok()) {
    const OpRecord* o = m_.op_record(id);
    const bool ours = o->op.remote.owner.address() == m_.facade().address();
    Error e(static_cast<ErrorCode>(fence.code), fence_failed_text(ours, fence.message));
    return finish(id, &e);
  }
  tell_owner(id);
}

bool WriteNotices::fences_on(uint64_t ticket,
                             const std::vector<std::shared_ptr<QpEndpoint>>& qps) const {
  for (const auto& [id, pending] : written_) {
    if (id.ticket == ticket)
      continue;
    auto q = pending.fence.lock();
    if (q && std::find(qps.begin(), qps.end(), q) != qps.end())
      return true;
  }
  return false;
}

void WriteNotices::tell_owner(OpId id) {
  const OpRecord& o = *m_.op_record(id);
  const TransferOp& op = o.op;
  const Transfer& t = m_.transfer_of(id);
  if (t.timed_out || m_.now() >= t.due) {  // invariant 16: no notice leaves after the deadline
    Error e = unsent(t);
    return finish(id, &e);
  }
  if (op.remote.owner.address() == m_.facade().address()) {  // ours: no message to send
    auto n =
        deliver(ref_of(op.remote), op.remote_offset, o.length, op.tag, "", m_.options().name, true);
    return finish(id, n.ok() ? nullptr : &n.error());
  }
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(t.due - m_.now());
  left = std::max(left, std::chrono::milliseconds(1)) + kNoticeGrace;
  m_.peer_table.ask_peer<uint64_t>(
      op.remote.owner, op.remote.owner_name, left, [this, id](uint64_t&) { finish(id, nullptr); },
      [this, id](const caf::error& err) {
        // Failed at once inside ask_peer (a peer known down, a link being made again): nothing
        // was sent, so nobody was notified. After it was sent: the owner's refusal (its own
        // codes) notified nobody; no answer (CAF's timeout, the owner gone, a link lost)
        // leaves open whether the notice reached the watcher.
        auto it = written_.find(id);
        const bool sent = it != written_.end() && it->second.asked;
        Error e = to_error(err);
        const bool no_answer =
            err.category() == caf::atom("system")
                ? err == caf::sec::request_timeout || err == caf::sec::request_receiver_down
                : e.code() == ErrorCode::kPeerUnavailable || e.code() == ErrorCode::kTimeout;
        finish(id, &e, sent && no_answer);
      },
      notice_atom::value, ref_of(op.remote), op.remote_offset, o.length, op.tag, o.receipt,
      m_.options().name);
  if (auto it = written_.find(id); it != written_.end())  // not failed at once: it left
    it->second.asked = true;
}

void WriteNotices::deadline(OpId id) {
  auto it = written_.find(id);
  if (it == written_.end() || it->second.asked)
    return;  // the owner's answer, or kNoticeGrace after the deadline, ends it (invariant 16)
  Error e = unsent(m_.transfer_of(id));
  finish(id, &e);
}

Error WriteNotices::unsent(const Transfer& t) {
  // Invariant 16 (manager invariant 24: a cancel before the notice left is no timeout).
  return t.cancelled ? Error(ErrorCode::kCancelled, notice_cancelled_text())
                     : Error(ErrorCode::kTimeout, notice_unsent_text(t.timeout_ms));
}

void WriteNotices::end(OpId id, const Error& why) {
  auto it = written_.find(id);
  finish(id, &why, it != written_.end() && it->second.asked);
}

void WriteNotices::finish(OpId id, const Error* failed, bool unknown) {
  auto it = written_.find(id);
  if (it == written_.end())
    return;
  TransferOutcome out = std::move(it->second.written);
  written_.erase(it);
  const OpRecord* o = m_.op_record(id);
  if (o == nullptr)
    return;
  if (failed != nullptr && unknown)
    out = outcome_of(Error(ErrorCode::kPeerUnavailable,
                           notice_unknown_text(o->op, o->length, failed->message())));
  else if (failed != nullptr)
    out =
        outcome_of(Error(failed->code(), notice_failed_text(o->op, o->length, failed->message())));
  else
    ++m_.counters().notified_writes;
  m_.finish_op(id, std::move(out));
}

}  // namespace caf_rdma::detail
