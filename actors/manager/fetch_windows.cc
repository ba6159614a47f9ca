// FetchWindows: the owner side of fetch windows (see fetch_windows.h).
#include "actors/manager/fetch_windows.h"

#include <caf/io/middleman.hpp>

#ifdef __GLIBC__
#include <malloc.h>
#endif

#include <algorithm>

#include "actors/detail/manager_state.h"
#include "actors/manager/direct_link.h"

namespace caf_rdma::detail {

namespace {

/// The first read_ack retry after a failed one; each further failure doubles it (up to
/// max_timeout), so a peer that never reads gets a few small messages, not a stream of them.
constexpr std::chrono::milliseconds kReadAckRetry{1000};

/// Why a fetch of a node not directly connected cannot wait.
constexpr const char* kIndirectFull =
    "cannot wait: the fetches of nodes not directly connected already wait their share of "
    "total_window_bytes (a kIndirectShare-th)";

uint64_t charge_of(uint64_t length) {
  return std::max(length, kWindowMinCharge);
}

}  // namespace

caf::result<ByteChunk> FetchWindows::fetch(const BufferRef& ref, uint64_t offset, uint64_t length) {
  // The buffer's own refusal first (a range past its end is out_of_bounds whatever its size).
  if (auto b = m_.buffer_table.owner_access(ref, offset, length, false); !b.ok())
    return to_caf_error(b.error());
  if (length > kMaxChunkBytes)
    return make_rdma_error(ErrorCode::kInvalidArgument,
                           "fetch of " + std::to_string(length) + " bytes of buffer " +
                               std::to_string(ref.id) + " of " + m_.options().name +
                               ": a chunk has at most kMaxChunkBytes (" +
                               std::to_string(kMaxChunkBytes) + ")");
  return fetch(ref, std::vector<PackedRange>{PackedRange{offset, length}});
}

caf::result<ByteChunk> FetchWindows::fetch(const BufferRef& ref, std::vector<PackedRange> ranges) {
  // Checked now (a bad request is refused at once) and again when it is served.
  uint64_t length = 0;
  if (auto b = m_.buffer_table.owner_ranges(ref, ranges, false, &length); !b.ok())
    return to_caf_error(b.error());
  const auto& sender = m_.self()->current_sender();
  if (!sender || sender->node() == m_.self()->node()) {
    // This node's own actors: no connection holds the answer.
    auto c = m_.buffer_table.fetch_chunk(ref, ranges, m_.buffer_table.requester());
    if (!c.ok())
      return to_caf_error(c.error());
    return std::move(*c);
  }
  const caf::node_id node = sender->node();
  auto [it, fresh] = windows_.try_emplace(node);
  PeerWindow& w = it->second;
  w.to = caf::actor_cast<caf::actor>(sender);
  watch_sender(w.to);
  if (fresh)
    check_window_node(node);  // is it directly connected? (to know when it no longer is)
  const uint64_t charge = charge_of(length);
  if (w.waiting.empty() && window_fits(w, charge)) {
    auto rp = m_.self()->make_response_promise<ByteChunk>();
    serve_fetch(node, ref, ranges, length, rp);
    maybe_forget_window(node);
    return rp;
  }
  // Waiting fetches are bounded like answers: a window's worth per peer, the total in all.
  // Nodes not directly connected wait within their share of the total (the directly connected
  // ones, within the rest); a node not known yet either way waits until the middleman said
  // (then what its share cannot hold is refused: trim_indirect_waiting).
  const bool peer_full =
      w.waiting_charge > 0 && w.waiting_charge + charge > m_.options().peer_window_bytes;
  const uint64_t direct_waiting = windows_waiting_ - indirect_waiting_;
  const bool total_full =
      w.direct
          ? direct_waiting > 0 && direct_waiting + charge > m_.options().total_window_bytes
          : w.indirect && indirect_waiting_ > 0 && indirect_waiting_ + charge > indirect_share();
  if (peer_full || total_full) {
    auto err = make_rdma_error(
        ErrorCode::kResourceExhausted,
        "fetch of " + std::to_string(length) + " bytes of buffer " + std::to_string(ref.id) +
            " refused: " +
            (peer_full ? window_error(node, "already has a window's worth of fetches waiting")
                       : window_error(node, w.direct ? "cannot wait: total_window_bytes of "
                                                       "fetches from all peers already wait"
                                                     : kIndirectFull)));
    maybe_forget_window(node);
    return err;
  }
  auto rp = m_.self()->make_response_promise<ByteChunk>();
  auto wait = std::min(m_.options().window_wait, m_.options().max_timeout);
  w.waiting.push_back(WaitingFetch{ref, std::move(ranges), length, rp, m_.now() + wait});
  w.waiting_charge += charge;
  windows_waiting_ += charge;
  if (!w.direct)
    indirect_waiting_ += charge;
  ++fetches_waiting_;
  arm_window_expiry(node, w);
  return rp;
}

bool FetchWindows::window_fits(const PeerWindow& w, uint64_t charge) const {
  // One fetch may exceed a window nothing else is charged to (chunks up to kMaxChunkBytes).
  const bool peer_ok = w.held() == 0 || w.held() + charge <= m_.options().peer_window_bytes;
  const bool total_ok =
      windows_held_ == 0 || windows_held_ + charge <= m_.options().total_window_bytes;
  // Nodes not (yet) seen directly connected share a part of the total: a peer can state any
  // number of node ids through its connection, and their windows are released by proof only.
  const bool indirect_ok =
      w.direct || indirect_held_ == 0 || indirect_held_ + charge <= indirect_share();
  return peer_ok && total_ok && indirect_ok;
}

void FetchWindows::serve_fetch(const caf::node_id& node, const BufferRef& ref,
                               const std::vector<PackedRange>& ranges, uint64_t length,
                               caf::typed_response_promise<ByteChunk> rp) {
  // Checked again: the buffer may have been released while the fetch waited.
  auto c = m_.buffer_table.fetch_chunk(ref, ranges, m_.buffer_table.requester(&node));
  if (!c.ok()) {
    rp.deliver(to_caf_error(c.error()));
    return;
  }
  PeerWindow& w = windows_.at(node);
  const uint64_t charge = charge_of(length);
  w.served += charge;
  windows_held_ += charge;
  if (!w.direct)
    indirect_held_ += charge;
  // The answer goes to the facade first, the read_ack after it: the facade sends both in that
  // order on the peer's connection.
  rp.deliver(std::move(*c));
  send_read_ack(node, false);
}

void FetchWindows::send_read_ack(const caf::node_id& node, bool force) {
  auto it = windows_.find(node);
  if (it == windows_.end())
    return;
  PeerWindow& w = it->second;
  if (w.held() == 0 || (!force && w.served == w.marked))
    return;
  // One read_ack on its way, and one more per quarter window served since the last: the
  // window opens while the peer reads it, not only once it read all of it.
  if (!force && !w.acks.empty() && w.served - w.marked < m_.options().peer_window_bytes / 4)
    return;
  caf::actor to = w.answered_by ? w.answered_by : w.to;
  if (!to)
    return;
  uint64_t token = 0;
  secure_random(&token, sizeof(token));
  w.acks.emplace(token, w.served);
  w.marked = w.served;
  auto wait = std::min(m_.options().window_wait, m_.options().max_timeout);
  m_.peer_table.peer_request(to, wait, read_ack_atom::value, token)
      .then(
          [this, node, token, to](uint64_t echoed) { read_ack_answered(node, token, echoed, to); },
          [this, node, token, to](caf::error&) {
            auto it = windows_.find(node);
            if (it != windows_.end() && it->second.answered_by == to)
              it->second.answered_by = nullptr;  // it may be gone: the latest sender next
            read_ack_failed(node, token);
          });
}

void FetchWindows::read_ack_answered(const caf::node_id& node, uint64_t token, uint64_t echoed,
                                     const caf::actor& to) {
  auto it = windows_.find(node);
  if (it == windows_.end())
    return;
  PeerWindow& w = it->second;
  auto a = w.acks.find(token);
  if (a == w.acks.end())
    return;
  if (echoed != token)  // not its echo: proves nothing
    return read_ack_failed(node, token);
  // Everything sent before it was read, the earlier read_acks' shares too.
  const uint64_t mark = a->second;
  for (auto i = w.acks.begin(); i != w.acks.end();)
    i = i->second <= mark ? w.acks.erase(i) : std::next(i);
  if (mark > w.proven) {
    windows_held_ -= mark - w.proven;
    if (!w.direct)
      indirect_held_ -= mark - w.proven;
    w.proven = mark;
  }
  w.answered_by = to;
  w.failures = 0;
  send_read_ack(node, false);  // what was served after it
  open_windows();
  trim_after_burst();
}

void FetchWindows::trim_after_burst() {
  // Once every answer of a burst was read: CAF's write buffers grew by doubling and left the
  // smaller blocks in glibc's arenas; give their pages back (glibc cannot shrink a thread
  // arena's top this way: up to about a window stays there). At most once per window's worth
  // of bytes served.
  if (windows_held_ != 0 || fetches_waiting_ != 0 ||
      m_.counters().served_fallback_bytes - served_at_trim_ < m_.options().peer_window_bytes)
    return;
  served_at_trim_ = m_.counters().served_fallback_bytes;
#ifdef __GLIBC__
  malloc_trim(0);
#endif
}

void FetchWindows::read_ack_failed(const caf::node_id& node, uint64_t token) {
  auto it = windows_.find(node);
  if (it == windows_.end() || it->second.acks.erase(token) == 0)
    return;
  PeerWindow& w = it->second;
  // No proof: its bytes stay charged. Its connection may be gone (then so is what CAF held for
  // it), or it does not read: ask the middleman, and ask the peer again later.
  check_window_node(node);
  if (w.acks.empty() && !w.retry_armed) {
    w.retry_armed = true;
    const std::chrono::milliseconds delay(std::min<int64_t>(
        m_.options().max_timeout.count(), kReadAckRetry.count() << std::min(w.failures, 20u)));
    ++w.failures;
    m_.self()->delayed_send(m_.self(), delay, WindowRetry{node});
  }
}

void FetchWindows::window_retry(const caf::node_id& node) {
  auto it = windows_.find(node);
  if (it == windows_.end())
    return;
  it->second.retry_armed = false;
  if (it->second.acks.empty())
    send_read_ack(node, true);
  maybe_forget_window(node);
}

void FetchWindows::check_window_node(const caf::node_id& node) {
  auto it = windows_.find(node);
  if (it == windows_.end() || it->second.checking || !m_.self()->system().has_middleman())
    return;
  it->second.checking = true;
  ask_direct_link(m_.self(), node, [this, node](caf::expected<bool> connected) {
    auto it = windows_.find(node);
    if (it == windows_.end())
      return;
    PeerWindow& w = it->second;
    w.checking = false;
    if (!connected)
      return;  // no answer: asked again at its next fetch
    if (*connected) {
      if (!w.direct) {
        // What it holds and waits for counts as a directly connected node's from now on.
        indirect_held_ -= w.held();
        indirect_waiting_ -= w.waiting_charge;
        w.direct = true;
        w.indirect = false;
        open_windows();
        return;
      }
    } else if (!w.direct && !w.indirect) {
      w.indirect = true;
      trim_indirect_waiting(node, w);
    } else if (w.direct) {
      // Seen connected, now not: CAF dropped the connection and what it held for it. (A node
      // never seen directly connected, reached through another, is released by proof only.)
      return drop_window(node, make_rdma_error(ErrorCode::kPeerUnavailable,
                                               window_error(node, "closed its connection")));
    }
    maybe_forget_window(node);
  });
}

void FetchWindows::watch_sender(const caf::actor& sender) {
  // Once per proxy (a monitor of a proxy is a monitor at the peer too): its down, when its
  // connection closes, makes us ask the middleman. Peer managers are monitored already.
  const caf::actor_addr addr = sender.address();
  auto p = m_.peer_table.peers().find(addr);
  if ((p == m_.peer_table.peers().end() || !p->second.monitored) && watched_.insert(addr).second)
    m_.self()->monitor(sender);
}

void FetchWindows::window_sender_down(const caf::actor_addr& who) {
  watched_.erase(who);
  // A peer can kill a proxy of its own (a BASP down message), not a connection: the middleman
  // says whether the node is gone.
  if (windows_.count(who.node()) != 0)
    check_window_node(who.node());
}

uint64_t FetchWindows::indirect_share() const {
  return m_.options().total_window_bytes / kIndirectShare;
}

void FetchWindows::unwait(PeerWindow& w, uint64_t charge) {
  w.waiting_charge -= charge;
  windows_waiting_ -= charge;
  if (!w.direct)
    indirect_waiting_ -= charge;
  --fetches_waiting_;
}

void FetchWindows::trim_indirect_waiting(const caf::node_id& node, PeerWindow& w) {
  // Its fetches waited while it was not known either way: what the share of the nodes not
  // directly connected cannot hold is refused now, the newest first.
  while (indirect_waiting_ > indirect_share() && !w.waiting.empty()) {
    WaitingFetch f = std::move(w.waiting.back());
    w.waiting.pop_back();
    unwait(w, charge_of(f.length));
    f.rp.deliver(make_rdma_error(ErrorCode::kResourceExhausted,
                                 "fetch of " + std::to_string(f.length) + " bytes of buffer " +
                                     std::to_string(f.ref.id) +
                                     " refused: " + window_error(node, kIndirectFull)));
  }
  open_windows();
}

void FetchWindows::open_windows() {
  // Round by round, one fetch per peer each: peers share the total fairly.
  for (bool progress = true; progress;) {
    progress = false;
    for (auto& [node, w] : windows_) {
      if (w.waiting.empty())
        continue;
      const uint64_t charge = charge_of(w.waiting.front().length);
      if (!window_fits(w, charge))
        continue;
      WaitingFetch f = std::move(w.waiting.front());
      w.waiting.pop_front();
      unwait(w, charge);
      serve_fetch(node, f.ref, f.ranges, f.length, f.rp);
      progress = true;
    }
  }
  for (auto it = windows_.begin(); it != windows_.end();) {
    auto next = std::next(it);
    maybe_forget_window(it->first);
    it = next;
  }
}

void FetchWindows::arm_window_expiry(const caf::node_id& node, PeerWindow& w) {
  if (w.expiry_armed || w.waiting.empty())
    return;
  w.expiry_armed = true;
  // Every fetch of a peer waits as long: the oldest is due first.
  auto left =
      std::max(std::chrono::steady_clock::duration::zero(), w.waiting.front().due - m_.now());
  m_.self()->delayed_send(
      m_.self(),
      std::chrono::duration_cast<std::chrono::milliseconds>(left) + std::chrono::milliseconds(1),
      WindowExpire{node});
}

void FetchWindows::window_expire(const caf::node_id& node) {
  auto it = windows_.find(node);
  if (it == windows_.end())
    return;
  PeerWindow& w = it->second;
  w.expiry_armed = false;
  const auto now = m_.now();
  const auto waited = std::min(m_.options().window_wait, m_.options().max_timeout);
  while (!w.waiting.empty() && w.waiting.front().due <= now) {
    WaitingFetch f = std::move(w.waiting.front());
    w.waiting.pop_front();
    unwait(w, charge_of(f.length));
    f.rp.deliver(make_rdma_error(
        ErrorCode::kResourceExhausted,
        "fetch of " + std::to_string(f.length) + " bytes of buffer " + std::to_string(f.ref.id) +
            " waited " + std::to_string(waited.count()) +
            " ms: " + window_error(node, "has not proven it read what it was sent")));
  }
  arm_window_expiry(node, w);
  maybe_forget_window(node);
}

void FetchWindows::drop_window(const caf::node_id& node, const caf::error& err) {
  auto it = windows_.find(node);
  if (it == windows_.end())
    return;
  PeerWindow w = std::move(it->second);
  windows_.erase(it);
  windows_held_ -= w.held();
  if (!w.direct)
    indirect_held_ -= w.held();
  windows_waiting_ -= w.waiting_charge;
  if (!w.direct)
    indirect_waiting_ -= w.waiting_charge;
  fetches_waiting_ -= w.waiting.size();
  for (auto& f : w.waiting)
    f.rp.deliver(err);
  open_windows();  // the total has room again
  trim_after_burst();
}

void FetchWindows::maybe_forget_window(const caf::node_id& node) {
  auto it = windows_.find(node);
  if (it != windows_.end() && it->second.held() == 0 && it->second.waiting.empty())
    windows_.erase(it);  // late answers and timers find nothing and do nothing
}

std::string FetchWindows::window_error(const caf::node_id& node, const char* what) const {
  auto it = windows_.find(node);
  const uint64_t held = it == windows_.end() ? 0 : it->second.held();
  return "peer node " + caf::to_string(node) + " " + what + " (" + m_.options().name + " holds " +
         std::to_string(held) + " bytes of answers not yet proven read by it, peer_window_bytes " +
         std::to_string(m_.options().peer_window_bytes) + "; " + std::to_string(windows_held_) +
         " for all peers, total_window_bytes " + std::to_string(m_.options().total_window_bytes) +
         ")";
}

}  // namespace caf_rdma::detail
