// The owner's side of one claimed stream transfer: StreamServer::serve, which moves the bytes
// of a claimed grant on its connection, by cross-memory attach or by its requester's GPU copy,
// and answers (stream_server.h, invariants 6, 9, 11, 13, 14, 19 and 20). The rest of the server
// (accepting, slots, claims, workers) is stream_server.cc.
#include <algorithm>
#include <string>
#include <vector>

#include "components/cpu_share.h"
#include "components/cross_memory.h"
#include "components/staged_cross_memory.h"
#include "components/stream_server.h"
#include "components/withdrawable_move.h"
#include "components/withdrawal.h"

namespace caf_rdma {

namespace {

/// Invariant 20: how long a requester's GPU copy of `bytes` may take, at kSlowestGpuCopy.
std::chrono::milliseconds gpu_copy_allowance(uint64_t bytes) {
  return std::chrono::milliseconds(1 + bytes / (StreamServer::kSlowestGpuCopy / 1000));
}

}  // namespace

bool StreamServer::serve(Connection& c) {
  const Socket& s = c.socket;
  const StreamRequest& req = c.request;
  const CpuShare::Scope share(req.priority);  // cpu_share.h invariant 1
  const Deadline io_limit =
      std::min(std::chrono::steady_clock::now() + std::chrono::seconds(5), c.grant.deadline);
  Grant g = std::move(c.grant);
  c.grant = Grant{};
  account(c, g);  // invariant 17
  Status verdict;
  if (req.direction != g.direction || req.length != g.length)
    verdict = Error(ErrorCode::kInvalidArgument,
                    "stream request " + std::string(to_string(req.direction)) + " of " +
                        std::to_string(req.length) + " bytes does not match its grant (" +
                        to_string(g.direction) + ", " + std::to_string(g.length) + " bytes)");
  else if ((req.cross_memory || req.gpu_copy) && !c.same_host)  // it may be another host's
    verdict = Error(ErrorCode::kInvalidArgument,
                    std::string(req.gpu_copy ? "GPU copy" : "cross-memory") +
                        " stream request on a TCP connection (only same-host connections may "
                        "ask for it)");
  else if (g.staged && (req.list || eager_write(req)))  // invariant 19: the CPU would touch it
    verdict = Error(ErrorCode::kInvalidArgument,
                    std::string(req.list ? "a list" : "an eager write") +
                        " stream request on GPU memory (it moves in-band through a bounce buffer "
                        "only)");
  else if (std::chrono::steady_clock::now() >= g.deadline)
    verdict = Error(ErrorCode::kTimeout,
                    "stream grant of " + std::to_string(g.length) +
                        " bytes was claimed after its deadline (the grant's, or the requester's "
                        "for a cross-memory copy)");
  if (verdict.ok() && g.staged)
    verdict = staged_ready(g.staged);  // invariant 19: refused in step, no byte moved
  if (!verdict.ok()) {
    g.done(req.token, verdict, 0);
    // An eager write's bytes sit unread on the connection, and a list's client waits for its
    // first "go" to send the table: neither can carry a next request.
    return write_status(s, verdict, io_limit).ok() && !eager_write(req) && !req.list;
  }
  if (req.list)
    return serve_list(c, g);
  Status st;
  bool answered = false;       // a cross-memory request's one answer was sent
  bool keep_on_error = false;  // failed, but answered in step (invariant 14): still usable
  bool done_early = false;     // `done` ran once the memory was no longer touched (invariant 14)
  bool go_sent = false;        // the requester's own "in-band go" stands for ours (invariant 20)
  if (req.gpu_copy && g.staged.exported && !withdrawn(g.withdrawal)) {
    // Invariant 20: the requester copies from its owner's export of the memory, GPU to GPU.
    GpuExport e{g.staged.exported->handle, g.staged.in_export};
    if (g.staged.handed_out)  // before `done`: the requester may import it from now on
      g.staged.handed_out->store(true, std::memory_order_release);
    st = write_gpu_copy_go(
        s, e, g.deadline,
        std::min(g.deadline, std::chrono::steady_clock::now() + limits_.stall_timeout));
    // The requester's copy touches the memory until its status: awaited past its deadline
    // (it starts none after it), by as long as the copy takes at kSlowestGpuCopy.
    auto word = st.ok() ? read_cross_memory_answer(
                              s, g.deadline + kEagerAnswerGrace + gpu_copy_allowance(g.length),
                              "the requester's GPU copy")
                        : Result<CrossMemoryAnswer>(st.error());
    if (!word.ok()) {
      st = word.error();
      answered = true;
    } else if (word->inband) {
      go_sent = true;  // it could not open the export: the bytes follow in-band
    } else {
      st = word->status;
      if (st.ok())
        ++gpu_copies_served_;
      Status sent = write_status(s, st, std::chrono::steady_clock::now() + kEagerAnswerGrace);
      keep_on_error = sent.ok();
      if (st.ok())
        st = sent;
      answered = true;
    }
  }
  // Invariant 19: GPU memory through this worker's staging buffer (staged_cross_memory.h).
  // A staging buffer that cannot be made sends the bytes in-band, this once.
  if (req.cross_memory && limits_.cross_memory && !c.cma_refused &&
      (!g.staged || staged_cross_ready(g.staged).ok())) {
    // Invariant 11: the owner copies, into or out of the SO_PEERCRED pid's memory only.
    const std::string subject = req.by_handle ? "buffer " + std::to_string(req.handle.id) +
                                                    " offset " + std::to_string(req.handle.offset)
                                              : "stream grant " + std::to_string(req.token);
    bool refused = false;
    // cross_memory.h invariant 7: the requester waits in silence; a word or a hang-up from
    // it ends the copy.
    const bool to_requester = g.direction == StreamDirection::kOutOfOwner;
    auto gone = [&s] { return peer_spoke_or_hung_up(s); };
    st = g.staged
             ? staged_cross_memory_copy(c.peer_pid, g.staged, reinterpret_cast<uint64_t>(g.addr),
                                        req.peer_addr, g.length, to_requester, g.deadline, subject,
                                        &refused, g.withdrawal, gone, req.priority)
             : cross_memory_copy(c.peer_pid, g.addr, req.peer_addr, g.length, to_requester,
                                 g.deadline, subject, &refused, g.withdrawal, gone, req.priority);
    if (refused) {
      c.cma_refused = true;  // remembered: no failed syscall per op on this connection
      st = Status{};
    } else {
      ++cross_memory_served_;
      // The copy returned: the answer (the requester waits for it past its deadline).
      Status sent = write_status(s, st, std::chrono::steady_clock::now() + kEagerAnswerGrace);
      keep_on_error = sent.ok() && ended_by_withdrawal(st);
      if (st.ok())
        st = sent;
      answered = true;
    }
  }
  // Invariant 13: no wait for the peer lasts longer than the stall limit.
  const auto stall = limits_.stall_timeout;
  auto answer_by = [&] { return std::min(g.deadline, std::chrono::steady_clock::now() + stall); };
  // Invariant 14: the bytes until withdrawn, then the final status; a withdrawn transfer lets
  // its release go (`done`) before the rest crosses the wire without the memory.
  // Invariant 19: GPU memory the same way, through this worker's bounce buffer; a failed GPU
  // copy ends it in step as a release does, with the copy's error.
  auto in_band = [&]() -> Status {
    const std::string what = std::string("stream data ") + to_string(g.direction);
    StagedMove moved;
    if (g.staged) {
      CAF_RDMA_ASSIGN_OR_RETURN(
          moved, move_staged(s, g.staged, reinterpret_cast<uint64_t>(g.addr), g.length,
                             g.direction == StreamDirection::kOutOfOwner, g.deadline, what, stall,
                             g.withdrawal.get()));
    } else {
      CAF_RDMA_ASSIGN_OR_RETURN(
          moved.wire, move_until_withdrawn(s, g.addr, g.length, g.direction, g.deadline, stall,
                                           g.withdrawal, what));
      moved.memory = moved.wire;
    }
    if (moved.copy.ok() && moved.memory == g.length)
      return write_status(s, Status{}, answer_by());  // sent once the memory is not touched
    Status ended =
        moved.copy.ok() ? Status(released_midway_error(moved.memory, g.length)) : moved.copy;
    g.done(req.token, ended, moved.memory);
    done_early = true;
    Status rest =
        move_rest_without_memory(s, g.length - moved.wire, g.direction, g.deadline, stall, what);
    if (rest.ok())
      rest = write_status(s, ended, answer_by());
    keep_on_error = rest.ok();
    return rest.ok() ? ended : rest;
  };
  if (answered) {
    // Done above.
  } else if (go_sent || eager_write(req)) {
    // No "go" of ours: the requester's "in-band go" stood for it (invariant 20), or an eager
    // write's bytes follow its request (stream_protocol.h).
    st = in_band();
  } else if (req.by_handle && !req.cross_memory && g.length <= kEagerBytes && !g.staged) {
    // A small read by handle: go, the bytes and the final status in one send (invariant 14:
    // zeros and `released` once withdrawn).
    const bool gone = withdrawn(g.withdrawal);
    const Status end = gone ? Status(released_midway_error(0, g.length)) : Status{};
    std::vector<uint8_t> out;
    out.reserve(g.length + 16);
    append_status(out, Status{});
    if (gone)
      out.resize(out.size() + g.length, 0);
    else
      out.insert(out.end(), g.addr, g.addr + g.length);
    append_status(out, end);
    st = send_all(s, out.data(), out.size(), g.deadline, "stream data out of the owner", stall);
    keep_on_error = gone && st.ok();
    if (st.ok())
      st = end;
  } else {
    // "go" (for a cross-memory request the kernel or the owner refused: "in-band go").
    const bool one_answer = req.cross_memory || req.gpu_copy;
    if (one_answer)
      ++inband_served_;
    st = one_answer ? write_inband_go(s, answer_by()) : write_status(s, Status{}, answer_by());
    if (st.ok())
      st = in_band();
  }
  // The memory is not touched after this point: the owner may release it.
  if (!done_early)
    g.done(req.token, st, st.ok() ? g.length : 0);
  return st.ok() || keep_on_error;
}

}  // namespace caf_rdma
