// One try of a stream job on one connection: StreamClient::attempt, and its list and final-
// status steps (stream_client.h invariants 2-8, 10 and 11); the rest of StreamClient is
// stream_client.cc, its GPU to GPU copy stream_client_gpu_copy.cc.
#include <sys/socket.h>

#include <algorithm>
#include <limits>
#include <string>

#include "components/detail/stream_client_parts.h"
#include "components/stream_client.h"
#include "components/withdrawal.h"

namespace caf_rdma {

using detail::endpoint_of;
using detail::stopped_error;

Status StreamClient::attempt_list(Socket& s, const StreamJob& job, const StreamRequest& request,
                                  const std::string& endpoint, const Status& sent, Reach& reach,
                                  const std::function<Status(Status)>& fail) {
  // The first "go": the owner allowed the request and waits for its table (stream_protocol.h).
  Result<Status> go =
      sent.ok() ? read_status(s, job.deadline, "stream answer") : Result<Status>(sent.error());
  if (!go.ok())
    return fail(go.error());
  if (!go->ok()) {
    reach = Reach::kAnswered;  // refused before the table: nothing of it is on the connection
    (void)fail(Status{});
    return *go;
  }
  reach = Reach::kTaken;  // taken: not tried again (invariant 3), though no byte moved yet
  if (request.cross_memory) {
    // The owner copies once it has the table: from here a stop() shuts the sending side only.
    bool stopping = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping = stopping_;
      if (!stopping)
        copy_waits_.insert(s.fd());
    }
    if (stopping)
      return fail(stopped_error());
  }
  Status st = write_list_table(s, request, job.deadline);
  if (!st.ok())
    return fail(st);
  // The table's answer.
  Status answer;
  bool inband = true;
  if (request.cross_memory) {
    // Awaited past the deadline: the owner may be copying into the job's memory until it answers.
    auto a = read_cross_memory_answer(s, job.deadline + kEagerAnswerGrace, "stream answer");
    copy_answered(s.fd());
    if (!a.ok())
      return fail(a.error());
    inband = a->inband;
    answer = a->status;
    if (inband) {
      std::lock_guard<std::mutex> lock(mu_);
      inband_only_.insert(endpoint);  // the next requests ask for nothing it refuses
    }
  } else {
    auto a = read_status(s, job.deadline, "stream answer");
    if (!a.ok())
      return fail(a.error());
    answer = *a;
    inband = a->ok();
  }
  if (!inband) {
    // The owner's answer ends the request: copied, released in step (invariant 6), or failed.
    if (answer.ok() || ended_by_withdrawal(answer))
      give_back(endpoint, std::move(s));
    else
      (void)fail(Status{});
    return answer;
  }
  st = move_list(s, job);
  if (!st.ok())
    return fail(st);
  return final_status(s, job, endpoint, "stream end", fail);
}

Status StreamClient::final_status(Socket& s, const StreamJob& job, const std::string& endpoint,
                                  const char* what, const std::function<Status(Status)>& fail) {
  auto end = read_status(s, job.deadline, what);
  if (!end.ok())
    return fail(end.error());
  if (!end->ok() && !ended_by_withdrawal(*end))  // in step: invariant 6
    return fail(*end);
  give_back(endpoint, std::move(s));
  return *end;
}

Status StreamClient::attempt(const StreamJob& job, bool fresh, bool local, Reach& reach) {
  reach = Reach::kNoAnswer;
  std::string endpoint = endpoint_of(job, local);
  bool pooled = false;
  CAF_RDMA_ASSIGN_OR_RETURN(Socket s, take_connection(job, fresh, local, pooled));
  bool eager_sent = false;   // an eager write's request left, its bytes behind it
  bool copy_failed = false;  // a GPU copy failed, the connection healthy (invariant 10)
  auto fail = [&](Status st) {
    const bool stopped = stop_requested(job.stop);
    if ((stopped || copy_failed) && job.direction == StreamDirection::kIntoOwner &&
        (reach == Reach::kTaken || eager_sent)) {
      // Invariants 8 and 10: the owner's worker may still be storing bytes that were on their
      // way; its hang-up says it ended (shut here too: the stop may not have reached wake()
      // yet).
      ::shutdown(s.fd(), SHUT_WR);
      Status ended = await_hang_up(s, job.deadline + kEagerAnswerGrace,
                                   stopped ? "stopped stream write" : "stream write ended early");
      if (!ended.ok()) {
        reach = Reach::kUnsettled;
        st = Error(ErrorCode::kPeerUnavailable,
                   (stopped ? std::string("stopped") : st.error().message()) +
                       ", but its owner did not end it in time: bytes of it already sent may "
                       "still be stored (" +
                       ended.error().message() + ")");
      }
    }
    std::lock_guard<std::mutex> lock(mu_);
    forget_busy_locked(s.fd());
    if (pooled && !stopped && !copy_failed)
      idle_.erase(endpoint);  // the others may be just as dead
    return st;
  };
  // The job's bytes on the connection: straight from or into its memory, or through this
  // thread's bounce buffer (invariant 10).
  auto move_bytes = [&s, &job, &copy_failed](bool sending) -> Status {
    if (!job.staged)
      return sending ? send_all(s, job.addr, job.length, job.deadline, "stream data")
                     : recv_all(s, job.addr, job.length, job.deadline, "stream data");
    // A failed GPU copy ends the job with the copy's error, its connection dropped (out of
    // step); a write's owner is first heard ending (fail above).
    auto moved = move_staged(s, job.staged, reinterpret_cast<uint64_t>(job.addr), job.length,
                             sending, job.deadline, "stream data", {}, nullptr);
    if (!moved.ok())
      return moved.error();
    copy_failed = !moved->copy.ok();
    return moved->copy;
  };
  StreamRequest request{job.direction, job.token, job.length};
  request.by_handle = job.by_handle;
  request.handle = job.handle;
  request.priority = job.priority;
  if (job.count > 0) {
    request.list = true;
    request.count = job.count;
    request.total = job.total;
    request.entries = job.entries;
  }
  if (local && !job.staged && (request.list ? job.total : job.length) > kEagerBytes) {
    // Invariant 5: the owner copies (unless it said its kernel refuses), its GPU memory through
    // its staging buffer (stream_server.h invariant 19).
    std::lock_guard<std::mutex> lock(mu_);
    request.cross_memory = inband_only_.count(endpoint) == 0;
    // From its sending to its answer (stop()); a list's, from its table on (attempt_list).
    if (request.cross_memory && !request.list)
      copy_waits_.insert(s.fd());
    request.peer_addr = reinterpret_cast<uint64_t>(job.addr);
    // The owner's copy ends by this job's deadline (stream_protocol.h): the answer is awaited
    // kEagerAnswerGrace past it, never a copy.
    request.peer_deadline_ns = steady_ns(job.deadline);
  }
  if (local && job.staged && job.owner_gpu) {
    // Invariant 11: GPU to GPU, this side copies from an export of the owner's memory.
    std::lock_guard<std::mutex> lock(mu_);
    request.gpu_copy = no_gpu_copy_.count(endpoint) == 0;
    request.peer_deadline_ns = steady_ns(job.deadline);
    // From its sending to the word after its copy: never shut (the owner would let its memory
    // go at the hang-up while this side may still copy).
    if (request.gpu_copy)
      gpu_copying_.insert(s.fd());
  }
  if (request.by_handle) {
    // The time this attempt has left (a retry has less than the first).
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        job.deadline - std::chrono::steady_clock::now());
    request.handle.timeout_ms = static_cast<uint32_t>(
        std::clamp<int64_t>(left.count(), 1, std::numeric_limits<uint32_t>::max()));
  }
  Status st = write_request(s, request, job.deadline);
  if (request.list)
    return attempt_list(s, job, request, endpoint, st, reach, fail);
  if (eager_write(request)) {
    // The bytes right after the request (stream_protocol.h); the one answer says how it ended.
    const bool asked = st.ok();
    eager_sent = asked;
    if (st.ok())
      st = move_bytes(true);
    // Sent the request but not all its bytes: the owner may have refused it and closed the
    // connection between our two sends (its answer then waits on the socket, unread).
    Result<Status> end = asked ? read_status(s, job.deadline + kEagerAnswerGrace, "stream answer")
                               : Result<Status>(st.error());
    if (end.ok() && end->ok() && !st.ok())
      end = Result<Status>(st.error());  // a success that cannot be: the bytes did not all go
    if (!end.ok())
      return fail(end.error());  // no answer: it may be tried again (a write, idempotent)
    if (!end->ok()) {
      reach = Reach::kAnswered;                  // refused: the owner stored nothing
      if (st.ok() && ended_by_withdrawal(*end))  // in step: invariant 6
        give_back(endpoint, std::move(s));
      else
        (void)fail(Status{});
      return *end;
    }
    reach = Reach::kTaken;
    give_back(endpoint, std::move(s));
    return {};
  }
  if (request.cross_memory || request.gpu_copy) {
    // One answer: the owner copied (or failed, or refused), or "in-band go" (stream_protocol.h);
    // for a GPU copy request, the export to copy from (invariant 11).
    // Awaited past the deadline: the owner may be copying into job.addr until it answers.
    auto answer = st.ok() ? read_cross_memory_answer(s, job.deadline + kEagerAnswerGrace,
                                                     "stream answer", request.gpu_copy)
                          : Result<CrossMemoryAnswer>(st.error());
    copy_answered(s.fd(), /*copying=*/answer.ok() && answer->gpu_copy);
    if (!answer.ok())
      return fail(answer.error());
    bool inband = answer->inband;
    if (answer->gpu_copy) {
      reach = Reach::kTaken;  // the owner may be touched from here
      Status copied = copy_from_export(s, job, endpoint, *answer, inband);
      if (inband && !copied.ok())
        return fail(copied);
      if (!inband)
        return copied.ok() ? final_status(s, job, endpoint, "stream end", fail) : fail(copied);
    } else if (!answer->inband) {
      if (ended_by_withdrawal(answer->status)) {  // in step: invariant 6
        reach = Reach::kTaken;                    // its owner's release stopped the copy part-way
        give_back(endpoint, std::move(s));
        return answer->status;
      }
      if (!answer->status.ok()) {
        reach = Reach::kAnswered;
        (void)fail(Status{});
        if (request.gpu_copy && is_unknown_request(answer->status)) {
          // Invariant 11: an owner of an older release; its grant is unclaimed: plainly now.
          {
            std::lock_guard<std::mutex> lock(mu_);
            no_gpu_copy_.insert(endpoint);
          }
          return attempt(job, /*fresh=*/true, local, reach);
        }
        return answer->status;
      }
      reach = Reach::kTaken;
      give_back(endpoint, std::move(s));
      return {};
    }
    if (request.cross_memory && !job.owner_gpu) {
      // The next requests ask for nothing it refuses; an owner of an older release answers so
      // for GPU memory alone (invariant 5).
      std::lock_guard<std::mutex> lock(mu_);
      inband_only_.insert(endpoint);
    }
  } else {
    Result<Status> go =
        st.ok() ? read_status(s, job.deadline, "stream answer") : Result<Status>(st.error());
    if (!go.ok())
      return fail(go.error());
    if (!go->ok()) {
      // The owner refused (and closes the connection when the request named no grant).
      reach = Reach::kAnswered;
      (void)fail(Status{});
      return *go;
    }
  }
  reach = Reach::kTaken;  // from here bytes move (invariant 2)
  const bool into_owner = job.direction == StreamDirection::kIntoOwner;
  st = move_bytes(into_owner);
  if (!st.ok())
    return fail(st);
  return final_status(s, job, endpoint, into_owner ? "stream confirmation" : "stream end", fail);
}

}  // namespace caf_rdma
