// The owner's side of one claimed list request: StreamServer::serve_list (stream_server.h
// invariant 16), the ranges of one buffer moved in table order by cross-memory attach or
// in-band through a staging buffer.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "components/cross_memory.h"
#include "components/stream_server.h"
#include "components/withdrawal.h"

namespace caf_rdma {

bool StreamServer::serve_list(Connection& c, Grant& g) {
  const Socket& s = c.socket;
  const StreamRequest& req = c.request;
  const auto stall = limits_.stall_timeout;
  auto answer_by = [&] { return std::min(g.deadline, std::chrono::steady_clock::now() + stall); };
  const std::string subject = "buffer " + std::to_string(req.handle.id) + " (a list of " +
                              std::to_string(req.count) + " ranges)";
  auto table = read_list_table(s, req, g.deadline, stall);
  if (!table.ok()) {
    g.done(req.token, table.error(), 0);
    (void)write_status(s, table.error(), answer_by());
    return false;  // what follows the table is not known: the connection is out of step
  }
  const std::vector<ListEntry>& ranges = *table;
  const bool out = g.direction == StreamDirection::kOutOfOwner;
  // The owner's memory of range i.
  auto mine = [&](const ListEntry& e) { return g.addr + (e.offset - req.handle.offset); };
  if (req.cross_memory && limits_.cross_memory && !c.cma_refused) {
    std::vector<CopySpan> spans;
    spans.reserve(ranges.size());
    for (const ListEntry& e : ranges)
      spans.push_back(CopySpan{mine(e), req.peer_addr + e.peer_offset, e.length});
    bool refused = false;
    Status st = cross_memory_copy_list(c.peer_pid, spans.data(), spans.size(), out, g.deadline,
                                       subject, &refused, g.withdrawal);
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
  Status st =
      req.cross_memory ? write_inband_go(s, answer_by()) : write_status(s, Status{}, answer_by());
  if (!st.ok()) {
    g.done(req.token, st, 0);
    return false;
  }
  // In-band: block by block through the staging buffer, each copy to or from the buffer after
  // a look at the withdrawal (invariant 16).
  std::vector<uint8_t> staging(std::min<uint64_t>(req.total, kListStaging));
  const std::string what = std::string("stream list data ") + to_string(g.direction);
  size_t index = 0;
  uint64_t into = 0;  // bytes of ranges[index] behind
  uint64_t moved = 0;
  bool gone = false;
  // Copies `n` bytes of the list from the cursor between the buffer and the staging.
  auto copy_block = [&](uint64_t n) {
    uint64_t at = 0;
    while (at < n) {
      const ListEntry& e = ranges[index];
      const uint64_t k = std::min(e.length - into, n - at);
      if (out)
        std::memcpy(staging.data() + at, mine(e) + into, k);
      else
        std::memcpy(mine(e) + into, staging.data() + at, k);
      at += k;
      into += k;
      if (into == e.length) {
        ++index;
        into = 0;
      }
    }
  };
  auto let_go = [&] {
    gone = true;
    g.done(req.token, released_midway_error(moved, req.total), moved);
  };
  while (moved < req.total) {
    const uint64_t n = std::min<uint64_t>(staging.size(), req.total - moved);
    if (!gone && withdrawn(g.withdrawal))
      let_go();
    if (out) {
      if (gone)
        std::memset(staging.data(), 0, n);
      else
        copy_block(n);
      st = send_all(s, staging.data(), n, g.deadline, what, stall);
    } else {
      st = recv_all(s, staging.data(), n, g.deadline, what, stall);
      if (st.ok() && !gone && withdrawn(g.withdrawal))
        let_go();
      if (st.ok() && !gone)
        copy_block(n);
    }
    if (!st.ok())
      break;
    if (!gone)
      moved += n;
  }
  if (st.ok()) {
    const Status end = gone ? Status(released_midway_error(moved, req.total)) : Status{};
    st = write_status(s, end, answer_by());
    if (!gone)
      g.done(req.token, st, st.ok() ? req.total : 0);
    return st.ok();  // a withdrawn list was answered in step: the connection serves on
  }
  if (!gone)
    g.done(req.token, st, 0);
  return false;
}

}  // namespace caf_rdma
