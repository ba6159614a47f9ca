// RdmaManagerActor: the fallback's stream channel. A large fallback transfer between host
// buffers asks the owner for a grant over CAF (the owner checks and holds its buffer), then the
// requester's StreamClient moves the bytes over a plain TCP connection straight between the two
// registered buffers, and both sides learn the end through internal messages.
#include "actors/detail/manager_state.h"

namespace caf_rdma::detail {

// -- owner side ---------------------------------------------------------------------------------

caf::result<StreamGrantMsg> ManagerState::stream_grant(uint64_t id, uint64_t offset,
                                                       uint64_t length, uint8_t kind,
                                                       uint32_t timeout_ms) {
  if (kind > static_cast<uint8_t>(TransferKind::kWrite))
    return make_rdma_error(
        ErrorCode::kInvalidArgument,
        "stream grant of kind " + std::to_string(kind) + " is neither read (0) nor write (1)");
  bool write = kind == static_cast<uint8_t>(TransferKind::kWrite);
  auto b = owner_access(id, offset, length, write);
  if (!b.ok())
    return to_caf_error(b.error());
  LocalBuffer& buf = **b;
  if (!stream_server_ || buf.memory != BufferMemory::kHost)
    return StreamGrantMsg{};  // port 0: use fetch/store chunks
  ++buf.in_use;               // released only after the grant was used or withdrawn
  caf::actor_addr me = self_->address();
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  uint64_t token =
      stream_server_->grant(reinterpret_cast<uint8_t*>(buf.addr) + offset, length,
                            write ? StreamDirection::kIntoOwner : StreamDirection::kOutOfOwner,
                            deadline, [me, id](const Status&, uint64_t bytes) {
                              if (auto h = caf::actor_cast<caf::actor>(me))
                                caf::anon_send(h, stream_served_atom::value, id, bytes);
                            });
  // Withdrawn if nobody claims it in time (the requester timed out or died).
  self_->delayed_send(self_, std::chrono::milliseconds(timeout_ms) + kRequestBackstop,
                      stream_expire_atom::value, id, token);
  return StreamGrantMsg{token, stream_server_->host(), stream_server_->port()};
}

void ManagerState::stream_served(uint64_t id, uint64_t bytes) {
  counters_.served_fallback_bytes += bytes;
  buffer_done(id);
}

void ManagerState::stream_expire(uint64_t id, uint64_t token) {
  if (stream_server_ && stream_server_->revoke(token))
    buffer_done(id);
}

// -- requester side -----------------------------------------------------------------------------

bool ManagerState::wants_stream(const OpTrack& o, const LocalBuffer& local,
                                const Peer& peer) const {
  return stream_client_ && options_.stream_min_bytes > 0 && o.length >= options_.stream_min_bytes &&
         !peer.no_stream && local.memory == BufferMemory::kHost &&
         o.op.remote.memory == static_cast<uint8_t>(BufferMemory::kHost);
}

void ManagerState::start_stream(uint64_t ticket, uint32_t index) {
  Transfer& t = transfers_.at(ticket);
  const TransferOp& op = t.ops[index].op;
  auto timeout = request_timeout(t);
  auto fail_with = [this, ticket, index](TransferOutcome out) {
    auto it = transfers_.find(ticket);
    if (it == transfers_.end() || it->second.ops[index].done)
      return;
    const TransferOp& op = it->second.ops[index].op;
    out.message = std::string(kind_name(op.kind)) + " via the fallback to " + describe(op.remote) +
                  " failed: " + out.message;
    finish_op(ticket, index, std::move(out));
  };
  self_
      ->request(op.remote.owner, timeout, stream_grant_atom::value, op.remote.id, op.remote_offset,
                t.ops[index].length, op.kind, t.timeout_ms)
      .then(
          [this, ticket, index](StreamGrantMsg& grant) {
            auto it = transfers_.find(ticket);
            if (it == transfers_.end() || it->second.ops[index].done)
              return;  // timed out: the owner withdraws the grant at its deadline
            OpTrack& o = it->second.ops[index];
            if (grant.port == 0) {
              // The owner has no stream channel: chunks from now on.
              peers_.at(o.peer).no_stream = true;
              return pump_fallback(ticket, index);
            }
            LocalBuffer& local = buffers_.at(o.op.local.id);
            ++local.in_use;  // until the stream job has stopped touching the memory
            StreamJob job;
            job.host = grant.host;
            job.port = grant.port;
            job.token = grant.token;
            job.direction = o.op.kind == static_cast<uint8_t>(TransferKind::kRead)
                                ? StreamDirection::kOutOfOwner
                                : StreamDirection::kIntoOwner;
            job.addr = reinterpret_cast<uint8_t*>(local.addr) + o.op.local_offset;
            job.length = o.length;
            job.deadline =
                std::chrono::steady_clock::now() + std::chrono::milliseconds(it->second.timeout_ms);
            caf::actor_addr me = self_->address();
            uint64_t local_id = o.op.local.id;
            job.done = [me, ticket, index, local_id](const Status& st) {
              TransferOutcome out = st.ok() ? TransferOutcome{} : outcome_of(st.error());
              if (auto h = caf::actor_cast<caf::actor>(me))
                caf::anon_send(h, stream_done_atom::value, ticket, index, local_id, std::move(out));
            };
            stream_client_->submit(std::move(job));
          },
          [fail_with](caf::error& err) { fail_with(outcome_of(to_error(err))); });
}

void ManagerState::stream_done(uint64_t ticket, uint32_t index, uint64_t local_id,
                               TransferOutcome outcome) {
  auto it = transfers_.find(ticket);
  if (it != transfers_.end() && !it->second.ops[index].done) {
    if (outcome.ok()) {
      ++counters_.stream_ops;
      finish_op(ticket, index, std::move(outcome));
    } else {
      OpTrack& o = it->second.ops[index];
      auto p = peers_.find(o.peer);
      if (p != peers_.end() && !p->second.down_reason.empty()) {
        outcome.code = static_cast<uint8_t>(ErrorCode::kPeerUnavailable);
        outcome.message +=
            " (peer manager " + p->second.name + " is down: " + p->second.down_reason + ")";
      }
      outcome.message = std::string(kind_name(o.op.kind)) + " via the fallback to " +
                        describe(o.op.remote) + " failed: " + outcome.message;
      finish_op(ticket, index, std::move(outcome));
    }
  }
  buffer_done(local_id);  // the stream job no longer touches the local memory
}

}  // namespace caf_rdma::detail
