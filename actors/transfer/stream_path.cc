// StreamPath: the fallback's stream channel, requester side (see stream_path.h).
#include "actors/transfer/stream_path.h"

#include "actors/detail/manager_state.h"
#include "actors/op_texts.h"
#include "actors/stream_lane.h"
#include "actors/transfer_checks.h"
#include "components/same_host.h"

namespace caf_rdma::detail {

uint32_t StreamPath::time_left(OpId id) const {
  // The time the transfer has left, not its whole timeout: the owner's grant (and a same-host
  // owner's copy into our memory) must end before we give up on it.
  const Transfer& t = m_.transfer_of(id);
  const auto spent = std::chrono::duration_cast<std::chrono::milliseconds>(m_.now() - t.started);
  return static_cast<uint32_t>(
      std::max<int64_t>(1, static_cast<int64_t>(t.timeout_ms) - spent.count()));
}

void StreamPath::start(OpId id) {
  if (m_.peer_table.reachable(id) == nullptr)
    return;  // failed (down) or parked until its link is made again
  const OpRecord& o = *m_.op_record(id);
  // Invariant 6: one that cannot end by its deadline behind the jobs queued ahead of it is
  // refused now, before its owner is asked for a grant.
  if (Status st = m_.stream_client()->admits(o.length, m_.transfer_of(id).due, priority_of(o.op));
      !st.ok())
    return refuse(id, st.error());
  StreamOp& s = ops_[id];
  const TransferOp& op = o.op;
  // GPU memory on either side moves by grant (stream_client.h invariant 10, stream_server.h
  // invariant 19): the handle alone authorizes host memory only.
  if (op.notify || op.remote.stream_port == 0 ||
      op.remote.memory != static_cast<uint8_t>(BufferMemory::kHost) ||
      m_.buffer_table.buffers().at(op.local.id).memory != BufferMemory::kHost)
    return ask_grant(id);
  // Invariant 4: authorized by the handle, no grant round trip, at the endpoint its owner named.
  auto endpoint = m_.stream_endpoints()->find(op.remote.owner.address());
  if (!endpoint)
    return ask_grant(id);
  s.by_handle = true;
  run(id, job_by_handle(*endpoint, op.remote, op.remote_offset, time_left(id), priority_of(op)));
}

void StreamPath::ask_grant(OpId id) {
  const OpRecord& o = *m_.op_record(id);
  const Transfer& t = m_.transfer_of(id);
  const TransferOp& op = o.op;
  ++m_.counters().stream_grants_asked;
  m_.peer_table
      .peer_request(op.remote.owner, request_timeout(t), stream_grant_atom::value,
                    ref_of(op.remote), op.remote_offset, o.length, op.kind, time_left(id))
      .then([this, id](StreamGrantMsg& grant) { granted(id, grant); },
            [this, id](caf::error& err) {
              const OpRecord* o = m_.op_record(id);
              if (o == nullptr)
                return;
              if (error_code(err) == ErrorCode::kResourceExhausted)
                return m_.chunk_path().take_over(id);  // invariant 3: enough grants out
              TransferOutcome out = outcome_of(err);
              out.message = fallback_failed_text(o->op, out.message);
              m_.finish_op(id, std::move(out));
            });
}

void StreamPath::granted(OpId id, const StreamGrantMsg& grant) {
  OpRecord* o = m_.op_record(id);
  if (o == nullptr)
    return;  // timed out: the owner withdraws the grant at its deadline
  if (grant.port == 0) {
    // Invariant 3: chunks from now on, or for this op only where it asked for GPU memory.
    if (o->op.remote.memory == static_cast<uint8_t>(BufferMemory::kHost))
      m_.peer_table.peers().at(o->peer).no_stream = true;
    return m_.chunk_path().take_over(id);
  }
  if (o->op.notify)
    o->receipt = grant.token;  // what its owner records once every byte landed
  StreamEndpoint endpoint{grant.host, grant.port,
                          same_host_endpoint(grant.host_id, grant.unix_name)};
  if (stream_reachable(endpoint, o->op.remote.owner_name))  // invariant 4
    m_.stream_endpoints()->learn(o->op.remote.owner.address(), endpoint);
  StreamJob job;
  job.host = endpoint.host;
  job.port = endpoint.port;
  job.unix_name = endpoint.unix_name;
  job.token = grant.token;
  run(id, std::move(job));
}

void StreamPath::run(OpId id, StreamJob job) {
  OpRecord* o = m_.op_record(id);
  LocalBuffer& local = m_.buffer_table.buffers().at(o->op.local.id);
  ++local.in_use;  // invariant 1: until the stream job has stopped touching the memory
  job.direction = o->is_read() ? StreamDirection::kOutOfOwner : StreamDirection::kIntoOwner;
  job.addr = reinterpret_cast<uint8_t*>(local.addr) + o->op.local_offset;
  job.length = o->length;
  // GPU memory moves through the stream threads' bounce buffers (stream_client.h invariant 10).
  if (local.memory != BufferMemory::kHost)
    job.staged = StagedMemory{m_.options().device_memory, local.gpu};
  job.owner_gpu = o->op.remote.memory != static_cast<uint8_t>(BufferMemory::kHost);
  // The transfer's own deadline: the job stops by the time the transfer times out.
  job.deadline = m_.transfer_of(id).due;
  job.priority = priority_of(o->op);  // its class orders the stream client's queue
  StreamOp& s = ops_[id];
  s.job_tag = next_job_tag_++;
  job.tag = s.job_tag;
  s.streaming = true;
  s.stop = std::make_shared<StopSignal>();  // invariant 5
  job.stop = s.stop.get();
  caf::actor_addr me = m_.self()->address();
  const uint64_t local_id = o->op.local.id;
  job.done = [me, id, local_id, stop = s.stop](const StreamEnd& end) {
    TransferOutcome out = end.status.ok() ? TransferOutcome{} : outcome_of(end.status.error());
    if (end.stopped)  // invariant 5: nothing of it moves any more
      out.code = static_cast<uint8_t>(ErrorCode::kCancelled);
    if (auto h = caf::actor_cast<caf::actor>(me))
      caf::anon_send(h, StreamDone{id.ticket, id.index, local_id, std::move(out), end.refused});
  };
  if (Status st = m_.stream_client()->submit(std::move(job)); !st.ok()) {
    s.streaming = false;  // invariant 6: refused, never queued: nothing of it ran
    m_.buffer_table.buffer_done(local_id);
    refuse(id, st.error());
  }
}

void StreamPath::refuse(OpId id, const Error& why) {
  // Invariant 6: no byte moved; never the chunks instead (they would wait behind the same).
  const OpRecord& o = *m_.op_record(id);
  m_.finish_op(id, outcome_of(Error(why.code(), fallback_failed_text(o.op, why.message()))));
}

void StreamPath::job_ended(OpId id, uint64_t local_id, TransferOutcome outcome, bool refused) {
  bool by_handle = false;
  if (auto it = ops_.find(id); it != ops_.end()) {
    it->second.streaming = false;
    by_handle = std::exchange(it->second.by_handle, false);
  }
  if (const OpRecord* o = m_.op_record(id); o != nullptr) {
    const Transfer& t = m_.transfer_of(id);
    auto p = m_.peer_table.peers().find(o->peer);
    const bool down = p != m_.peer_table.peers().end() && !p->second.down_reason.empty();
    if (by_handle && !down && !t.timed_out && m_.now() < t.due &&
        (refused || outcome.code == static_cast<uint8_t>(ErrorCode::kNotFound))) {
      // Invariant 4: the owner does not serve it by handle (no byte moved): ask for a grant.
      ask_grant(id);
      m_.buffer_table.buffer_done(local_id);
      return;
    }
    // A queued job cancelled because its peer went down ends with a timeout code too
    // (StreamClient::cancel_queued): that one is the peer's failure, not the deadline's.
    const bool job_timed_out =
        outcome.code == static_cast<uint8_t>(ErrorCode::kTimeout) && !down && m_.now() >= t.due;
    const bool stopped = outcome.code == static_cast<uint8_t>(ErrorCode::kCancelled);
    // Invariant 5: stopped by its cancel, or never taken by its owner: nothing moves now. Or
    // its transfer timed out and waited for the job to stop, or the job stopped at its
    // deadline (the transfer's) just before the transfer's own timeout: that is the error.
    const bool cancel_ended = t.cancelled && (stopped || refused);
    const bool time_ended = (t.timed_out && !t.cancelled) || job_timed_out;
    if (!outcome.ok() && (cancel_ended || time_ended)) {
      m_.finish_op(id, m_.stream_stopped(id, outcome.message));
    } else if (outcome.ok()) {
      ++m_.counters().stream_ops;
      m_.finish_op(id, std::move(outcome));
    } else {
      job_failed(id, std::move(outcome), refused);
    }
  }
  m_.buffer_table.buffer_done(local_id);  // invariant 1: the job no longer touches the local memory
}

void StreamPath::job_failed(OpId id, TransferOutcome outcome, bool refused) {
  const OpRecord& o = *m_.op_record(id);
  auto p = m_.peer_table.peers().find(o.peer);
  const bool down = p != m_.peer_table.peers().end() && !p->second.down_reason.empty();
  // Its link lost and being made again (manager invariant 13): ops in flight fail at once, as
  // the peer table failed the others (a refusal then is the dead link's, not the owner's).
  const bool lost = p != m_.peer_table.peers().end() && p->second.reconnecting;
  if (refused && !down && !lost) {
    // Invariant 2: the owner never took the request, so no byte moved: CAF chunks instead
    // (the op itself still holds the local buffer).
    ++m_.counters().stream_refused;
    return m_.chunk_path().take_over(id);
  }
  if (down) {
    outcome.code = static_cast<uint8_t>(ErrorCode::kPeerUnavailable);
    outcome.message += " (" + peer_down_text(p->second.name, p->second.down_reason) + ")";
  } else if (lost) {
    outcome = outcome_of(m_.peer_table.link_lost_error(p->second));
  }
  outcome.message = fallback_failed_text(o.op, outcome.message);
  m_.finish_op(id, std::move(outcome));
}

bool StreamPath::peer_down(OpId id, const char* why) {
  auto it = ops_.find(id);
  if (it == ops_.end() || !it->second.streaming)
    return false;
  if (m_.stream_client())
    (void)m_.stream_client()->cancel_queued(it->second.job_tag, why);
  return true;
}

bool StreamPath::deadline(OpId id, DeadlineStage stage) {
  auto it = ops_.find(id);
  if (it == ops_.end() || !it->second.streaming)
    return TransferPath::deadline(id, stage);
  // Invariant 1: a running job stops at this same deadline, a queued one is cancelled now;
  // either way job_ended finishes the op once the job no longer touches the memory. A cancel
  // asks the job's stop (invariant 5), which ends it queued or running.
  if (stage == DeadlineStage::kCancelled && it->second.stop) {
    it->second.stop->request();
    // Still waiting for a thread: it ends now, stopped (stream_client.h invariant 8).
    if (m_.stream_client())
      (void)m_.stream_client()->cancel_queued(it->second.job_tag,
                                              "cancelled while it waited for a stream thread");
  } else if (stage == DeadlineStage::kDue && m_.stream_client())
    (void)m_.stream_client()->cancel_queued(it->second.job_tag);
  return false;
}

}  // namespace caf_rdma::detail
