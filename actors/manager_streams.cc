// RdmaManagerActor: the fallback's stream channel. A large fallback transfer between host
// buffers asks the owner for a grant over CAF (the owner checks and holds its buffer), then the
// requester's StreamClient moves the bytes over a TCP connection (TLS between nodes with
// credentials) straight between the two registered buffers, and both sides learn the end
// through internal messages. A stream the owner refused before taking it moves in CAF chunks
// instead (manager invariant 11).
#include "actors/detail/manager_state.h"

namespace caf_rdma::detail {

// -- owner side ---------------------------------------------------------------------------------

caf::result<StreamGrantMsg> ManagerState::stream_grant(const BufferRef& ref, uint64_t offset,
                                                       uint64_t length, uint8_t kind,
                                                       uint32_t timeout_ms) {
  if (kind > static_cast<uint8_t>(TransferKind::kWrite))
    return make_rdma_error(
        ErrorCode::kInvalidArgument,
        "stream grant of kind " + std::to_string(kind) + " is neither read (0) nor write (1)");
  if (timeout_ms == 0)
    return make_rdma_error(ErrorCode::kInvalidArgument, "stream grant timeout must be > 0 ms");
  bool write = kind == static_cast<uint8_t>(TransferKind::kWrite);
  auto b = owner_access(ref, offset, length, write);
  if (!b.ok())
    return to_caf_error(b.error());
  LocalBuffer& buf = **b;
  if (!stream_server_ || buf.memory != BufferMemory::kHost)
    return StreamGrantMsg{};  // port 0: use fetch/store chunks
  // Counted per node (a node can speak through many actors).
  const auto& sender = self_->current_sender();
  caf::node_id peer = sender ? sender->node() : caf::node_id{};
  uint32_t& peer_grants = grants_per_peer_[peer];
  if (buf.grants >= kMaxGrantsPerBuffer || peer_grants >= kMaxGrantsPerPeer) {
    if (peer_grants == 0)
      grants_per_peer_.erase(peer);
    return make_rdma_error(
        ErrorCode::kResourceExhausted,
        "stream grant on buffer " + std::to_string(ref.id) + " of " + options_.name + " refused: " +
            (buf.grants >= kMaxGrantsPerBuffer
                 ? "the buffer has " + std::to_string(kMaxGrantsPerBuffer) + " grants outstanding"
                 : "the peer has " + std::to_string(kMaxGrantsPerPeer) + " grants outstanding"));
  }
  const uint32_t limit_ms = capped(timeout_ms);
  caf::actor_addr me = self_->address();
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(limit_ms);
  uint64_t token =
      stream_server_->grant(reinterpret_cast<uint8_t*>(buf.addr) + offset, length,
                            write ? StreamDirection::kIntoOwner : StreamDirection::kOutOfOwner,
                            deadline, [me](uint64_t token, const Status&, uint64_t bytes) {
                              if (auto h = caf::actor_cast<caf::actor>(me))
                                caf::anon_send(h, StreamServed{token, bytes});
                            });
  // Held (released only after the grant was used or withdrawn), by its token.
  ++buf.in_use;
  ++buf.grants;
  ++peer_grants;
  grants_.emplace(token, GrantHold{ref.id, peer});
  // Withdrawn if nobody claims it in time (the requester timed out or died).
  self_->delayed_send(self_, std::chrono::milliseconds(limit_ms) + kRequestBackstop,
                      StreamExpire{token});
  return StreamGrantMsg{token, stream_server_->host(), stream_server_->port()};
}

void ManagerState::end_grant(uint64_t token) {
  auto it = grants_.find(token);
  if (it == grants_.end())
    return;
  GrantHold hold = it->second;
  grants_.erase(it);
  auto p = grants_per_peer_.find(hold.peer);
  if (p != grants_per_peer_.end() && --p->second == 0)
    grants_per_peer_.erase(p);
  if (auto b = buffers_.find(hold.buffer); b != buffers_.end() && b->second.grants > 0)
    --b->second.grants;
  buffer_done(hold.buffer);
}

void ManagerState::revoke_unclaimed_grants(uint64_t buffer) {
  if (!stream_server_)
    return;
  std::vector<uint64_t> tokens;
  for (const auto& [token, hold] : grants_)
    if (hold.buffer == buffer)
      tokens.push_back(token);
  for (uint64_t token : tokens)
    if (stream_server_->revoke(token))
      end_grant(token);
}

void ManagerState::stream_served(uint64_t token, uint64_t bytes) {
  if (grants_.count(token) == 0)
    return;
  counters_.served_fallback_bytes += bytes;
  end_grant(token);
}

void ManagerState::stream_expire(uint64_t token) {
  // Claimed grants end with StreamServed (the server calls `done` once it stops touching the
  // memory); an unclaimed one is withdrawn here.
  if (stream_server_ && stream_server_->revoke(token))
    end_grant(token);
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
  peer_request(op.remote.owner, timeout, stream_grant_atom::value, ref_of(op.remote),
               op.remote_offset, t.ops[index].length, op.kind, t.timeout_ms)
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
            // The transfer's own deadline: the job stops by the time the transfer times out.
            job.deadline = it->second.due;
            o.job_tag = next_job_tag_++;
            job.tag = o.job_tag;
            o.streaming = true;  // a timeout reply waits for the job to stop (stream_done)
            caf::actor_addr me = self_->address();
            uint64_t local_id = o.op.local.id;
            job.done = [me, ticket, index, local_id](const StreamEnd& end) {
              TransferOutcome out =
                  end.status.ok() ? TransferOutcome{} : outcome_of(end.status.error());
              if (auto h = caf::actor_cast<caf::actor>(me))
                caf::anon_send(h, StreamDone{ticket, index, local_id, std::move(out), end.refused});
            };
            stream_client_->submit(std::move(job));
          },
          [this, ticket, index, fail_with](caf::error& err) {
            if (error_code(err) == ErrorCode::kResourceExhausted) {
              // The owner has enough grants out on that buffer or from us: chunks instead.
              auto it = transfers_.find(ticket);
              if (it != transfers_.end() && !it->second.ops[index].done)
                pump_fallback(ticket, index);
              return;
            }
            fail_with(outcome_of(to_error(err)));
          });
}

void ManagerState::stream_done(uint64_t ticket, uint32_t index, uint64_t local_id,
                               TransferOutcome outcome, bool refused) {
  auto it = transfers_.find(ticket);
  if (it != transfers_.end())
    it->second.ops[index].streaming = false;
  if (it != transfers_.end() && !it->second.ops[index].done) {
    auto p = peers_.find(it->second.ops[index].peer);
    const bool down = p != peers_.end() && !p->second.down_reason.empty();
    // A queued job cancelled because its peer went down ends with a timeout code too
    // (StreamClient::cancel_queued): that one is the peer's failure, not the deadline's.
    const bool job_timed_out = outcome.code == static_cast<uint8_t>(ErrorCode::kTimeout) && !down &&
                               self_->clock().now() >= it->second.due;
    if ((it->second.timed_out || job_timed_out) && !outcome.ok()) {
      // Its transfer timed out and waited for the job to stop, or the job stopped at its
      // deadline (the transfer's) just before the transfer's own timeout: that is the error.
      OpTrack& o = it->second.ops[index];
      outcome.code = static_cast<uint8_t>(ErrorCode::kTimeout);
      outcome.message = std::string(kind_name(o.op.kind)) + " of " + std::to_string(o.length) +
                        " bytes between " + describe(o.op.local) + " and " + describe(o.op.remote) +
                        " over the fallback's stream channel did not " + "complete within " +
                        std::to_string(it->second.timeout_ms) +
                        " ms; the stream was stopped, so it no longer touches the buffers";
      finish_op(ticket, index, std::move(outcome));
    } else if (outcome.ok()) {
      ++counters_.stream_ops;
      finish_op(ticket, index, std::move(outcome));
    } else {
      OpTrack& o = it->second.ops[index];
      // Its link lost and being made again (invariant 13): ops in flight fail at once, as
      // on_link_lost failed the others (a refusal then is the dead link's, not the owner's).
      const bool lost = p != peers_.end() && p->second.reconnecting;
      if (refused && !down && !lost) {
        // Invariant 11: the owner never took the request, so no byte moved: CAF chunks instead
        // (the op itself still holds the local buffer).
        ++counters_.stream_refused;
        pump_fallback(ticket, index);
      } else {
        if (down) {
          outcome.code = static_cast<uint8_t>(ErrorCode::kPeerUnavailable);
          outcome.message +=
              " (peer manager " + p->second.name + " is down: " + p->second.down_reason + ")";
        } else if (lost) {
          outcome = outcome_of(link_lost_error(p->second));
        }
        outcome.message = std::string(kind_name(o.op.kind)) + " via the fallback to " +
                          describe(o.op.remote) + " failed: " + outcome.message;
        finish_op(ticket, index, std::move(outcome));
      }
    }
  }
  buffer_done(local_id);  // the stream job no longer touches the local memory
}

}  // namespace caf_rdma::detail
