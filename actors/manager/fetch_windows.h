// FetchWindows: the owner side of fetch windows. A fetch answer is a copy of the owner's
// memory that CAF keeps in the connection's write buffer until the peer reads it, so a peer
// that asks and never reads would make the owner hold every byte it asked for. (The requester
// side, the fetches asked of one owner, is actors/transfer/chunk_path.h, invariant 2.)
//
// Invariants (manager invariant 12):
//  1. The fetch answers served to a peer node count against its window (peer_window_bytes)
//     and the total (total_window_bytes), each fetch at least kWindowMinCharge, from the copy
//     until the peer proves it read them: the owner sends the latest sender of its fetches a
//     read_ack with a random token after the answers (through the facade, so on the same
//     connection, behind them), and only the token's echo releases what was served before it.
//  2. A fetch that would exceed either waits, in arrival order per peer, and is served as the
//     windows open, or fails at window_wait with resource_exhausted naming the peer and the
//     window; waiting fetches are charged the same way against a window and the total of
//     their own (beyond: refused at once). One fetch may exceed a window while nothing else is
//     charged to it (a chunk of up to kMaxChunkBytes).
//  3. A window is dropped without proof only when its node, once seen directly connected, no
//     longer is (the middleman's routing table, which no peer writes): the connection, and
//     with it what CAF still held for it, is gone.
//  4. Windows of nodes not seen directly connected (node ids a peer states for messages it
//     routes) hold, and wait for, together at most a kIndirectShare-th of the total, so ids a
//     peer invents cannot take the rest from the directly connected peers.
//  5. Fetches from this node's own actors are served at once: no connection holds the answer.
#pragma once

#include <caf/all.hpp>

#include <chrono>
#include <deque>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "actors/manager/manager_part.h"
#include "actors/rdma_messages.h"

namespace caf_rdma::detail {

/// A fetch beyond its peer's window (or the total), waiting for it to open (invariant 12).
struct WaitingFetch {
  BufferRef ref;
  std::vector<PackedRange> ranges;  ///< one for a plain fetch
  uint64_t length = 0;              ///< the ranges' total
  caf::typed_response_promise<ByteChunk> rp;
  std::chrono::steady_clock::time_point due;
};

/// What one peer node holds of this owner: fetch answers served to it and not yet proven read,
/// and its fetches waiting (invariant 12).
struct PeerWindow {
  uint64_t served = 0;  ///< window charge of every answer served since the window opened
  uint64_t proven = 0;  ///< of which the peer proved it read this much (<= served)
  uint64_t marked = 0;  ///< `served` when the last read_ack was sent
  uint64_t waiting_charge = 0;
  std::deque<WaitingFetch> waiting;
  std::map<uint64_t, uint64_t> acks;  ///< read_acks on their way: token -> `served` then
  caf::actor to;                      ///< the latest sender of its fetches
  caf::actor answered_by;             ///< the last actor that answered a read_ack
  std::set<caf::actor_addr> watched;  ///< senders monitored (a down makes us check the node)
  bool direct = false;                ///< its node was seen with a direct connection to ours
  bool indirect = false;      ///< the middleman said its node is not directly connected (never was)
  bool checking = false;      ///< a question to the middleman about it is on its way
  bool expiry_armed = false;  ///< a WindowExpire for its oldest waiting fetch is due
  bool retry_armed = false;   ///< a WindowRetry is due
  uint32_t failures = 0;      ///< read_acks failed in a row (the retry backs off)

  uint64_t held() const { return served - proven; }
};

class FetchWindows : public ManagerPart {
public:
  using ManagerPart::ManagerPart;

  /// A peer's fetch: served now, or waiting for its window (invariants 1, 2, 5).
  caf::result<ByteChunk> fetch(const BufferRef& ref, uint64_t offset, uint64_t length);
  /// A peer's packed fetch (fetch_list): as a fetch of the ranges' total, every range checked
  /// first (BufferTable::owner_ranges).
  caf::result<ByteChunk> fetch(const BufferRef& ref, std::vector<PackedRange> ranges);
  /// WindowExpire: the oldest fetches waiting for `node`'s window that reached their deadline
  /// fail.
  void window_expire(const caf::node_id& node);
  /// WindowRetry: asks `node` again to prove it read what it was sent, if that is still open.
  void window_retry(const caf::node_id& node);
  /// A monitored sender of fetches went down: check whether its node is still connected.
  void window_sender_down(const caf::actor_addr& who);
  /// What all windows hold (ManagerStats::window_bytes) and how many fetches wait.
  uint64_t held() const { return windows_held_; }
  size_t fetches_waiting() const { return fetches_waiting_; }

private:
  /// What the windows of nodes not seen directly connected may hold, and wait for, together.
  uint64_t indirect_share() const;
  /// A waiting fetch of `w` charged `charge` no longer waits.
  void unwait(PeerWindow& w, uint64_t charge);
  /// Refuses the newest waiting fetches of `node` (just found not directly connected) that the
  /// indirect share cannot hold.
  void trim_indirect_waiting(const caf::node_id& node, PeerWindow& w);
  /// Serves a fetch now (deliver, then the read_ack behind it), or an error.
  void serve_fetch(const caf::node_id& node, const BufferRef& ref,
                   const std::vector<PackedRange>& ranges, uint64_t length,
                   caf::typed_response_promise<ByteChunk> rp);
  /// Whether a fetch of `charge` fits `w`'s window and the total now.
  bool window_fits(const PeerWindow& w, uint64_t charge) const;
  /// Sends `node` a read_ack covering what was served to it, if one is due (or `force`).
  void send_read_ack(const caf::node_id& node, bool force);
  void read_ack_answered(const caf::node_id& node, uint64_t token, uint64_t echoed,
                         const caf::actor& to);
  void read_ack_failed(const caf::node_id& node, uint64_t token);
  /// Asks the middleman whether `node` still has a direct connection to ours: gone after one
  /// was seen drops its window (invariant 3).
  void check_window_node(const caf::node_id& node);
  /// Serves waiting fetches, peer by peer, while the windows let them.
  void open_windows();
  /// Arms the WindowExpire of `node`'s oldest waiting fetch (once).
  void arm_window_expiry(const caf::node_id& node, PeerWindow& w);
  /// Fails `w`'s waiting fetches with `err` and forgets its window.
  void drop_window(const caf::node_id& node, const caf::error& err);
  /// Forgets `node`'s window once nothing is held, waiting or asked.
  void maybe_forget_window(const caf::node_id& node);
  /// Monitors the sender of a fetch (once per actor) so that its connection's end is seen.
  void watch_sender(const caf::actor& sender);
  std::string window_error(const caf::node_id& node, const char* what) const;
  /// Gives the heap's free pages back to the system once the windows are empty after a burst.
  void trim_after_burst();

  std::map<caf::node_id, PeerWindow> windows_;
  uint64_t windows_held_ = 0;  ///< what all windows hold
  /// What windows of nodes not seen directly connected hold (invariant 4).
  uint64_t indirect_held_ = 0;
  /// Of windows_waiting_, what waits in windows of nodes not seen directly connected.
  uint64_t indirect_waiting_ = 0;
  uint64_t windows_waiting_ = 0;  ///< charge of all waiting fetches
  size_t fetches_waiting_ = 0;
  uint64_t served_at_trim_ = 0;  ///< served_fallback_bytes at the last trim
  /// Senders of fetches monitored (until their down), other than peer managers.
  std::set<caf::actor_addr> watched_;
};

}  // namespace caf_rdma::detail
