// The owner's side of one claimed list request: StreamServer::serve_list (stream_server.h
// invariant 16), the ranges of one buffer moved in table order by cross-memory attach or
// in-band through a staging buffer.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "components/cross_memory.h"
#include "components/list_cursor.h"
#include "components/stream_server.h"
#include "components/withdrawable_move.h"
#include "components/withdrawal.h"

namespace caf_rdma {

bool StreamServer::serve_list(Connection& c, Grant& g) {
  const Socket& s = c.socket;
  const StreamRequest& req = c.request;
  const auto stall = limits_.stall_timeout;
  auto answer_by = [&] { return std::min(g.deadline, std::chrono::steady_clock::now() + stall); };
  const std::string subject = "buffer " + std::to_string(req.handle.id) + " (a list of " +
                              std::to_string(req.count) + " ranges)";
  uint64_t moved = 0;  // bytes of the list copied to or from the buffer
  bool gone = false;   // withdrawn: `done` ran, the memory is touched no more
  auto let_go = [&] {
    gone = true;
    g.done(req.token, released_midway_error(moved, req.total), moved);
  };
  // Moves `n` bytes of the staging (never the buffer) on the connection; the withdrawal is
  // looked at while the peer is waited for: once set, `done` runs at once and the call goes on,
  // touching the staging only (invariant 16). The rest of a stopped call gets a stall window
  // of its own: a trickling peer holds the worker (never the buffer) up to twice the limit.
  auto staged_io = [&](uint8_t* p, uint64_t n, bool sending, const std::string& what) -> Status {
    if (!gone && g.withdrawal) {
      auto k = move_until_stopped(s, p, n, sending, g.deadline, what, stall, *g.withdrawal);
      if (!k.ok())
        return k.error();
      if (*k == n)
        return {};
      let_go();
      p += *k;
      n -= *k;
    }
    return sending ? send_all(s, p, n, g.deadline, what, stall)
                   : recv_all(s, p, n, g.deadline, what, stall);
  };
  // Ends the request with `st` (not ok), whose answer may not be in step: the connection closes.
  auto fail = [&](const Status& st) {
    if (!gone)
      g.done(req.token, st, 0);
    return false;
  };
  // The first "go": the table may come (stream_protocol.h).
  Status st = write_status(s, Status{}, answer_by());
  if (!st.ok())
    return fail(st);
  std::vector<uint8_t> raw(list_table_bytes(req));
  st = staged_io(raw.data(), raw.size(), false, "stream list request's table");
  if (!st.ok())
    return fail(st);
  auto table = parse_list_table(raw.data(), req);
  if (!table.ok()) {
    (void)write_status(s, table.error(), answer_by());
    return fail(table.error());
  }
  if (!gone && withdrawn(g.withdrawal))
    let_go();
  if (gone)  // released before a byte moved: answered in step
    return write_status(s, released_midway_error(0, req.total), answer_by()).ok();
  if (std::chrono::steady_clock::now() >= g.deadline) {  // the table came too late
    const Error late(ErrorCode::kTimeout,
                     "stream list request for " + subject + ": its table came after its deadline");
    (void)write_status(s, late, answer_by());
    return fail(late);
  }
  const std::vector<ListEntry>& ranges = *table;
  const bool out = g.direction == StreamDirection::kOutOfOwner;
  // The owner's memory of a range.
  auto mine = [&](const ListEntry& e) { return g.addr + (e.offset - req.handle.offset); };
  if (req.cross_memory && limits_.cross_memory && !c.cma_refused) {
    std::vector<CopySpan> spans;
    spans.reserve(ranges.size());
    for (const ListEntry& e : ranges)
      spans.push_back(CopySpan{mine(e), req.peer_addr + e.peer_offset, e.length});
    bool refused = false;
    // cross_memory.h invariant 7: the requester waits in silence; a word or a hang-up from
    // it ends the copy.
    st = cross_memory_copy_list(
        c.peer_pid, spans.data(), spans.size(), out, g.deadline, subject, &refused, g.withdrawal,
        [&s] { return peer_spoke_or_hung_up(s); }, req.priority);
    if (!refused) {
      ++cross_memory_served_;
      g.done(req.token, st, st.ok() ? req.total : 0);  // the copy returned: memory untouched
      Status sent = write_status(s, st, std::chrono::steady_clock::now() + kEagerAnswerGrace);
      return sent.ok() && (st.ok() || ended_by_withdrawal(st));
    }
    c.cma_refused = true;  // remembered: no failed syscall per op on this connection
  }
  if (req.cross_memory)
    ++inband_served_;
  // The table's answer: the bytes follow.
  st = req.cross_memory ? write_inband_go(s, answer_by()) : write_status(s, Status{}, answer_by());
  if (!st.ok())
    return fail(st);
  const std::string what = std::string("stream list data ") + to_string(g.direction);
  ListCursor cursor(ranges.data(), ranges.size(), mine);
  if (s.tls() == nullptr) {
    // Plain TCP: the kernel gathers the ranges from the buffer (scatters them into it); the
    // withdrawal is looked at before every call and while the peer is waited for
    // (withdrawable_move.h invariant 1): once set, `done` runs and the rest moves without the
    // memory.
    std::vector<iovec> pieces;
    cursor.pieces(req.total, pieces);
    auto k = move_until_withdrawn(s, pieces.data(), pieces.size(), g.direction, g.deadline, stall,
                                  g.withdrawal, what);
    if (!k.ok())
      return fail(k.error());
    moved = *k;
    if (moved < req.total) {
      let_go();
      st = move_rest_without_memory(s, req.total - moved, g.direction, g.deadline, stall, what);
      if (!st.ok())
        return fail(st);
    }
  } else {
    // TLS: block by block through the staging buffer (records are sealed from one buffer);
    // each copy between the staging and the buffer comes after a look at the withdrawal.
    std::vector<uint8_t> staging(std::min<uint64_t>(req.total, kListStaging));
    for (uint64_t sent = 0; sent < req.total;) {
      const uint64_t n = std::min<uint64_t>(staging.size(), req.total - sent);
      if (!gone && withdrawn(g.withdrawal))
        let_go();
      // `moved` counts the bytes copied to or from the buffer (what a withdrawal reports).
      if (out) {
        if (gone) {
          std::memset(staging.data(), 0, n);
        } else {
          cursor.copy(staging.data(), n, true);
          moved += n;
        }
        st = staged_io(staging.data(), n, true, what);
      } else {
        st = staged_io(staging.data(), n, false, what);
        if (st.ok() && !gone && withdrawn(g.withdrawal))
          let_go();
        if (st.ok() && !gone) {
          cursor.copy(staging.data(), n, false);
          moved += n;
        }
      }
      if (!st.ok())
        return fail(st);
      sent += n;
    }
  }
  const Status end = gone ? Status(released_midway_error(moved, req.total)) : Status{};
  st = write_status(s, end, answer_by());
  if (!gone)
    g.done(req.token, st, st.ok() ? req.total : 0);
  return st.ok();  // a withdrawn list was answered in step: the connection serves on
}

}  // namespace caf_rdma
