// Internal state of an RdmaManagerActor (actors/rdma_manager_actor.cc builds the behavior).
//
// Invariants:
//  1. Buffer ids are never reused; a released id stays known as released.
//  2. A buffer released while transfers use it is refused to new transfers at once, and its
//     release reply (after which the caller may free the memory) waits until those transfers
//     have finished: no byte moves into memory the caller already freed. Stream grants on it
//     that no client claimed yet are withdrawn at the release (a holder cannot make it wait
//     up to max_timeout); claimed ones are transfers in flight and are waited for.
//  3. For each peer manager, this manager initiates at most one queue pair (created by one
//     handshake; concurrent first transfers wait for it) and accepts at most one from that peer
//     (a new handshake from the peer replaces it). Ops are only posted on initiated QPs.
//  4. A queue pair in ERR is dropped (destroyed, so the NIC stops) and the next transfer to that
//     peer makes a new one.
//  5. Every transfer gets exactly one reply: success, or an error naming what was wrong; its
//     timeout flushes the RDMA work still outstanding, and waits for its stream job to stop,
//     before the reply.
//  6. Requests that act on this node's memory (the kLocal rows of actors/request_audience.h:
//     local_requests_actor) are served only for actors of this node; peers
//     reach the peer protocol, where every access names a buffer by id *and* secret. The
//     manager's own handle never leaves the process: peers know it by its facade
//     (peer_facade.h), which owns its handles and carries every message to and from other
//     nodes (peer_request, peer_send), so no BASP frame can address the manager.
//  7. Everything a peer can make us hold is bounded: grant and wait timeouts (max_timeout),
//     grants per buffer and per peer, directory names and waiters, chunk sizes, and the fetch
//     answers on their way to it and the fetches it has waiting (invariant 12).
//  8. Device loss (manager_device.cc): when the DeviceMonitor says the device went away, every
//     queue pair, registration and bounce buffer on it is dropped before any reply, the RDMA
//     ops in flight fail at once (no_device, naming the device and why), and peers are told
//     (device_gone). Until the device is opened again (retried with backoff) transfers take the
//     fallback (auto) or fail naming why (rdma). Afterwards live host buffers are registered
//     again; their old handles carry the old incarnation and move through the owner, so a
//     stale remote key never reaches a NIC.
//  9. Staging: actors/transfer/staged_path.h (its invariants 1-4).
// 10. A fallback write that fails or times out with store chunks on their way is answered only
//     once each was answered or timed out: actors/transfer/chunk_path.h (invariant 1).
// 11. A stream job its owner refused before taking the request moved no byte, so its op moves
//     in CAF chunks instead: actors/transfer/stream_path.h (invariant 2).
// 12. Fetch windows (manager_windows.cc): as owner, the fetch answers served to a peer node
//     count against its window (peer_window_bytes) and the total (total_window_bytes), each
//     fetch at least kWindowMinCharge, from the copy until the peer proves it read them: the
//     owner sends the latest sender of its fetches a read_ack with a random token after the
//     answers (through the facade, so on the same connection, behind them), and only the
//     token's echo releases what was served before it. A fetch that would exceed either waits,
//     in arrival order per peer, and is served as the windows open, or fails at window_wait
//     with resource_exhausted naming the peer and the window; waiting fetches are charged the
//     same way against a window and the total of their own (beyond: refused at once). A window
//     is dropped without proof only when its node, once seen directly connected, no longer is
//     (the middleman's routing table, which no peer writes): the connection, and with it what
//     CAF still held for it, is gone. One fetch may exceed a window while nothing else is
//     charged to it (a chunk of up to kMaxChunkBytes). Windows of nodes not seen directly
//     connected (node ids a peer states for messages it routes) hold together at most a
//     kIndirectShare-th of the total, so ids a peer invents cannot take the rest from the
//     directly connected peers. As requester, the fetches asked of one
//     owner and not yet answered stay within peer_window_bytes the same way (more ops wait).
// 13. A lost link is not a dead peer (manager_peers.cc): when the proxy of a peer manager ends
//     with remote_link_unreachable, and its address is known (a handle's host:port) and the node
//     gave a connector (UseConnector), everything on its way over the link fails at once
//     (peer_unavailable naming the peer and the lost link), new ops wait (each until its own
//     timeout), and the address is connected again, at most kReconnectAttempts times. Only a
//     connect that reaches the same manager (same node id and actor id) makes the link again:
//     the waiting ops resume on it, and every later message goes to the new proxy (handles
//     keep naming the old one: peer_request and peer_send route by address). Nothing there,
//     no answer, or another node at that address (the peer restarted: a new manager) after the
//     last attempt declares the peer down for good. Any other end of a proxy (the peer's actor
//     or node gone) is down for good at once. A peer whose handshake reaches us over a new
//     link is taken back (its new proxy replaces the old one, accept_connect) only if the
//     middleman has a direct connection to its node: BASP lets a third node claim any node id
//     for what it routes, so a new proxy reached through another node proves nothing.
#pragma once

#include <caf/all.hpp>

#include <atomic>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <unordered_map>
#include <vector>

#include "actors/detail/manager_events.h"
#include "actors/direct_registry.h"
#include "actors/peer_facade.h"
#include "actors/rdma_errors.h"
#include "actors/rdma_manager_actor.h"
#include "actors/transfer/chunk_path.h"
#include "actors/transfer/local_copy_path.h"
#include "actors/transfer/path_choice.h"
#include "actors/transfer/rdma_path.h"
#include "actors/transfer/staged_path.h"
#include "actors/transfer/stream_path.h"
#include "actors/transfer/transfer_path.h"
#include "actors/transfer_checks.h"
#include "components/completion_poller.h"
#include "components/device_monitor.h"
#include "components/rdma_domain.h"
#include "components/rdma_queue_pair.h"
#include "components/secure_random.h"
#include "components/stream_client.h"
#include "components/stream_server.h"

namespace caf_rdma::detail {

/// The host buffer of a local copy that involves GPU memory moves this much at a time.
constexpr uint64_t kLocalCopyChunk = 4 << 20;

/// Extra time CAF requests to peer managers get beyond their transfer's timeout.
constexpr std::chrono::seconds kRequestBackstop{1};

/// Invariant 13: connects to a peer whose link was lost, and the pause before each.
constexpr uint32_t kReconnectAttempts = 3;
constexpr std::chrono::milliseconds kReconnectPause[kReconnectAttempts] = {
    std::chrono::milliseconds(50), std::chrono::milliseconds(500), std::chrono::milliseconds(2000)};

struct LocalBuffer {
  uint64_t addr = 0;
  uint64_t size = 0;
  BufferAccess access = BufferAccess::kReadWrite;
  BufferMemory memory = BufferMemory::kHost;
  int gpu = -1;                           ///< CUDA device of GPU memory
  uint64_t secret_hi = 0, secret_lo = 0;  ///< the handle's secret (capability)
  RdmaBuffer rdma;                        ///< empty without a device
  uint32_t in_use = 0;  ///< transfers, grants and fallback chunks in flight currently using it
  uint32_t grants = 0;  ///< stream grants outstanding on it (counted in in_use too)
  bool released = false;
  std::vector<caf::typed_response_promise<uint64_t>> release_waiters;
};

/// One op of a transfer as the front sees it; what its path keeps for it lives in the path
/// (actors/transfer/*_path.h).
struct OpRecord {
  TransferOp op;
  uint64_t length = 0;
  PathKind path = PathKind::kNone;
  caf::actor_addr peer;      ///< the remote owner
  bool holds_local = false;  ///< counted in the local buffer's in_use
  bool done = false;

  bool is_read() const { return caf_rdma::is_read(op); }
};

struct Transfer {
  bool batch = false;
  caf::typed_response_promise<TransferReply> single;
  caf::typed_response_promise<std::vector<TransferOutcome>> many;
  std::vector<OpRecord> ops;
  std::vector<TransferOutcome> outcomes;
  size_t remaining = 0;
  uint32_t timeout_ms = 0;
  std::chrono::steady_clock::time_point due;  ///< when it times out
  bool timed_out = false;
  std::multimap<std::chrono::steady_clock::time_point, uint64_t>::iterator deadline;
};

struct Peer {
  caf::actor manager;
  std::string name;
  std::shared_ptr<RdmaQueuePair> initiated;
  std::shared_ptr<RdmaQueuePair> accepted;
  bool handshaking = false;
  std::vector<OpId> waiting;  ///< ops waiting for the QP
  bool monitored = false;
  std::string down_reason;  ///< non-empty once the peer is gone
  /// Invariant 13: its link was lost (why) and is being made again; new ops wait in `parked`.
  bool reconnecting = false;
  std::string link_lost;
  std::vector<OpId> parked;  ///< ops waiting for the link
  bool no_stream = false;    ///< its owner answered a stream grant with port 0: use chunks
  std::map<uint64_t, std::shared_ptr<RdmaQueuePair>> lanes;  ///< accepted direct lanes, by id
  /// Questions asked of it (ask_peer) and not yet answered: each fails with peer_unavailable
  /// when it goes down, not at its timeout.
  std::map<uint64_t, std::function<void(const caf::error&)>> questions;
  /// As requester (invariant 12): window charge of the fetches asked of it and not yet
  /// answered, and the fallback reads waiting to ask more (ChunkPath).
  uint64_t fetching = 0;
  std::deque<OpId> fetch_queue;
  /// Counts its lost links (invariant 13): `fetching` holds only fetches asked over the
  /// current one; answers to earlier ones (their requests' timeouts) release nothing.
  uint64_t link = 0;
};

/// A fetch beyond its peer's window (or the total), waiting for it to open (invariant 12).
struct WaitingFetch {
  BufferRef ref;
  uint64_t offset = 0;
  uint64_t length = 0;
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

/// A direct lane this manager opened (the lane itself belongs to its client).
struct LaneRecord {
  caf::actor_addr owner;            ///< peer key, or our own address for a loopback lane
  std::weak_ptr<RdmaQueuePair> qp;  ///< aborted when the owner goes down
  std::weak_ptr<DirectLane> lane;   ///< retired when our device goes (DirectLane invariant 5)
};

/// At most this many direct lanes from one peer manager are accepted at once.
constexpr size_t kMaxLanesPerPeer = 256;

/// A stream grant this manager made as owner, until it is used or withdrawn.
struct GrantHold {
  uint64_t buffer = 0;  ///< held (counted in its in_use and grants)
  caf::node_id peer;    ///< whose node asked (counted in grants_per_peer_)
};

/// A directory entry and the (local) actor that put it, for diagnostics.
struct DirEntry {
  BufferHandle handle;
  caf::actor_addr putter;
};

struct DirWaiter {
  uint64_t id;
  caf::typed_response_promise<BufferHandle> rp;
  caf::node_id node;     // the requester's node: waits are capped per other node
  bool counted = false;  // counted in dir_waiters_per_node_ (a request from another node)
};

struct Counters {
  uint64_t rdma_ops = 0, rdma_bytes = 0, fallback_ops = 0, fallback_bytes = 0, errors = 0;
  uint64_t handshakes = 0, served_fallback_bytes = 0, stream_ops = 0, stream_refused = 0;
  uint64_t staged_chunks = 0, staged_overlapped = 0;
  uint64_t links_lost = 0, reconnects = 0;
};

/// A failed request's or lower layer's error as a transfer outcome (CAF's request timeout is
/// `timeout`, an unreachable or gone receiver `peer_unavailable`).
TransferOutcome outcome_of(const caf::error& err);
TransferOutcome outcome_of(const Error& err);
/// The queue-pair info a peer sent in a handshake.
QpInfo from_msg(const QpInfoMsg& m);
/// How long a transfer's requests to peer managers may take: its timeout plus kRequestBackstop.
std::chrono::milliseconds request_timeout(const Transfer& t);

class ManagerState {
public:
  static inline const char* name = "rdma_manager";

  using Self = manager_impl_actor::stateful_pointer<ManagerState>;

  void init(Self self, ManagerOptions options, std::shared_ptr<RdmaDomain> domain,
            std::string no_rdma_reason);
  ~ManagerState();

  // -- buffers (manager_buffers.cc) --
  caf::result<BufferHandle> request_buffer(uint64_t addr, uint64_t size, uint8_t access);
  caf::result<uint64_t> release_buffer(uint64_t id);
  /// A peer's fetch: served now, or waiting for its window (manager_windows.cc).
  caf::result<ByteChunk> fetch(const BufferRef& ref, uint64_t offset, uint64_t length);
  /// A copy of [offset, offset + length) of the buffer for a fetch answer, after the owner's
  /// checks.
  Result<ByteChunk> fetch_chunk(const BufferRef& ref, uint64_t offset, uint64_t length);
  caf::result<uint64_t> store(const BufferRef& ref, uint64_t offset, const ByteChunk& bytes);
  /// The owner's view of a peer's access (after its NIC refused one): ok, or why not.
  TransferOutcome check_access(const BufferRef& ref, uint64_t offset, uint64_t length,
                               uint8_t kind);
  /// Verify mode: range_checksum of a range of the buffer.
  caf::result<uint64_t> checksum(const BufferRef& ref, uint64_t offset, uint64_t length);
  /// Ok when the current message comes from an actor of this node; else permission_denied
  /// naming `request` and the sender.
  Status local_only(const char* request) const;
  /// A timeout given by a caller or peer, cut to options_.max_timeout.
  uint32_t capped(uint32_t timeout_ms) const;
  /// The live local buffer named by a handle, or an error naming what is wrong.
  Result<LocalBuffer*> local_buffer(const BufferHandle& h, const char* role);
  /// Buffer by id for owner-side checks (fetch, store, local copies).
  Result<LocalBuffer*> owned_buffer(uint64_t id, const char* role);
  /// Owner-side checks of a peer's access (fetch, store, stream grants): the buffer is live,
  /// the secret is its own, it is writable for a write, and [offset, offset + length) fits it.
  Result<LocalBuffer*> owner_access(const BufferRef& ref, uint64_t offset, uint64_t length,
                                    bool write);
  /// A zero-copy store chunk's hold on local buffer `id` ended (ChunkSent).
  void chunk_sent(uint64_t id) { buffer_done(id); }
  void buffer_done(uint64_t id);
  /// A direct lane's last use of released buffer `id` ended.
  void lane_idle(uint64_t id);
  ManagerStats stats() const;

  // -- fetch windows (manager_windows.cc, invariant 12) --
  /// What the windows of nodes not seen directly connected may hold, and wait for, together.
  uint64_t indirect_share() const;
  /// A waiting fetch of `w` charged `charge` no longer waits.
  void unwait(PeerWindow& w, uint64_t charge);
  /// Refuses the newest waiting fetches of `node` (just found not directly connected) that the
  /// indirect share cannot hold.
  void trim_indirect_waiting(const caf::node_id& node, PeerWindow& w);
  /// The oldest fetches waiting for `node`'s window that reached their deadline fail.
  void window_expire(const caf::node_id& node);
  /// Asks `node` again to prove it read what it was sent, if that is still open.
  void window_retry(const caf::node_id& node);
  /// The name given by its node once it listens (first call only; SetName is an internal event).
  void set_name(std::string name) {
    if (named_ || name.empty())
      return;
    named_ = true;
    options_.name = std::move(name);
    caf::anon_send(facade_, FacadeName{options_.name});
  }
  /// The actor published in this manager's place (actors/peer_facade.h): peers see only it.
  const caf::actor& facade() const { return facade_; }

  // -- transfers (manager_transfers.cc) --
  caf::result<TransferReply> transfer(TransferOp op, uint32_t timeout_ms);
  caf::result<std::vector<TransferOutcome>> batch(std::vector<TransferOp> ops, uint32_t timeout_ms);
  /// OpDone: a completion of op `id` (of its chunk `chunk`) came back from the NIC.
  void op_done(OpId id, TransferOutcome outcome, OpFault fault, uint32_t chunk);
  /// StreamDone: the stream job of op `id` ended (StreamPath::job_ended).
  void stream_done(OpId id, uint64_t local_id, TransferOutcome outcome, bool refused);
  /// Transfer `ticket` passed `stage`: each of its open ops' paths ends it (or flushes).
  void op_timeout(uint64_t ticket, DeadlineStage stage);
  /// A deadline sweep scheduled for `at` (steady clock, ns): times out every transfer due.
  void deadline_tick(int64_t at);

  // -- stream channel of the fallback (manager_streams.cc) --
  caf::result<StreamGrantMsg> stream_grant(const BufferRef& ref, uint64_t offset, uint64_t length,
                                           uint8_t kind, uint32_t timeout_ms);
  void stream_served(uint64_t token, uint64_t bytes);
  void stream_expire(uint64_t token);
  /// Ends grant `token`'s hold on its buffer (once).
  void end_grant(uint64_t token);
  /// Withdraws the grants on local buffer `buffer` that no client claimed yet (at its release).
  void revoke_unclaimed_grants(uint64_t buffer);

  // -- peers and queue pairs (manager_peers.cc) --
  caf::result<QpInfoMsg> accept_connect(const QpInfoMsg& remote);
  caf::result<std::string> peer_state(const caf::actor& peer) const;
  /// For a client of this process (RdmaClient's lanes): asks the owner of `remote` about an
  /// access its NIC refused (buf_check) or for its checksum of a range (verify mode). Fails
  /// with peer_unavailable naming the owner as soon as it is known to be down.
  caf::result<TransferOutcome> ask_owner_check(const BufferHandle& remote, uint64_t offset,
                                               uint64_t length, uint8_t kind);
  caf::result<uint64_t> ask_owner_checksum(const BufferHandle& remote, uint64_t offset,
                                           uint64_t length);

  // -- direct lanes (manager_lanes.cc) --
  caf::result<LaneGrant> open_lane(BufferHandle remote, uint32_t timeout_ms);
  void close_lane(uint64_t lane);
  /// The sender (a peer manager) closed its lane `lane`.
  void drop_lane(uint64_t lane);

  // -- the device (manager_device.cc, invariant 8) --
  /// Starts the monitor of `domain_`.
  void watch_device();
  void device_changed(const DeviceChanged& e);
  /// Invariant 8: drops everything on the device, fails the RDMA ops in flight, tells peers.
  void lose_device(const std::string& what);
  void reopen_device(uint32_t attempt);
  /// StagingFreed: free bounce buffers go to the ops waiting for one.
  void staging_freed() { staged_.slots_freed(); }
  /// A peer manager (the sender) lost its device: abort our connections to it.
  void peer_device_gone(const std::string& what);
  /// Aborts (their ops fail now, naming `reason`) the queue pairs and direct lanes between us
  /// and `peer`'s manager, or, with none, all of them and the loopback queue pair.
  void abort_connections(const std::string& reason, const caf::actor_addr* peer = nullptr);
  void on_down(const caf::down_msg& msg);
  /// The middleman actor to reconnect lost links with (invariant 13).
  void use_connector(caf::io::middleman_actor connector, std::chrono::milliseconds timeout) {
    connector_ = std::move(connector);
    connect_timeout_ = timeout;
  }
  /// Attempt `attempt` to make the lost link to peer `key` again (invariant 13).
  void reconnect(const caf::actor_addr& key, uint32_t attempt);

  // -- directory (rdma_manager_actor.cc) --
  caf::result<bool> dir_put(std::string key, BufferHandle h);
  caf::result<BufferHandle> dir_get(const std::string& key, uint32_t wait_ms);
  void dir_timeout(const std::string& key, uint64_t id);
  void forget_dir_waiter(const DirWaiter& w);

private:
  uint64_t new_transfer(Transfer t);
  /// Makes sure a deadline sweep runs no later than `deadline` + kDeadlineSlack.
  void arm_deadline_tick(std::chrono::steady_clock::time_point deadline);
  // The paths (actors/transfer/) are this state's parts: they use its tables and its reply
  // point, and nothing else does.
  friend class TransferPath;
  friend class NicPath;
  friend class RdmaPath;
  friend class StagedPath;
  friend class ChunkPath;
  friend class StreamPath;
  friend class LocalCopyPath;

  /// Checks op `id`, chooses its path (path_choice.h) and starts it there.
  void start_op(OpId id);
  /// What choose_path needs to know of op `o` with local buffer `local`.
  PathFacts path_facts(const OpRecord& o, const LocalBuffer& local) const;
  TransferPath& path(PathKind kind);
  /// The RDMA path of that kind (null for the others).
  NicPath* nic_path(PathKind kind);
  /// The one reply point: ends op `id` with `outcome` (its path forgets it), and replies once
  /// every op of its transfer ended (invariant 5).
  void finish_op(OpId id, TransferOutcome outcome);
  void fail_op(OpId id, const caf::error& err);
  void maybe_reply(uint64_t ticket);
  /// The open op `id` (null once it ended or its transfer is gone).
  OpRecord* op_record(OpId id);
  /// The timeout of op `id`'s transfer as its outcome, with `more` said after it.
  TransferOutcome timed_out(OpId id, const std::string& more) const;
  /// An RDMA op that cannot use RDMA after all (the device went away, the owner has none, or
  /// was reopened since its handle was made): through the owner (fallback), or, where the
  /// fallback is forbidden or impossible, an error saying `why`.
  void reroute(OpId id, const std::string& why);
  /// The peer of remote op `id`, if the op may go to it now; else the op failed (peer down)
  /// or waits for its lost link (parked, invariant 13), and this is null.
  Peer* reachable_peer(OpId id);
  /// Restarts op `id` on its path once its lost link came back.
  void resume_op(OpId id);
  /// The actor clock's time (the test coordinator's in deterministic tests).
  std::chrono::steady_clock::time_point now() const { return self_->clock().now(); }
  /// Drops `qp` (of peer `key`'s, or the loopback QP) so the NIC stops using it.
  void drop_qp_of(const caf::actor_addr& key, const std::shared_ptr<RdmaQueuePair>& qp);
  Peer& peer_for(const caf::actor& manager, const std::string& name);
  void handshake(const caf::actor_addr& key);
  void drop_qp(Peer& peer, const std::shared_ptr<RdmaQueuePair>& qp);
  Result<std::shared_ptr<RdmaQueuePair>> loopback_qp();
  /// Options of a new queue pair on domain_ whose completions go to the device's shared
  /// completion queue (one poll per sweep for all peers; made here with the first). Direct
  /// lanes' own QPs, polled by their client's threads, keep a CQ of their own.
  Result<RdmaQueuePair::Options> shared_qp_options();
  void fail_waiting(Peer& peer, const caf::error& err);
  /// The error of every operation on a peer that is down.
  caf::error peer_down_error(const Peer& p) const;
  /// The error of what cannot wait for a lost link to be made again (questions, lanes).
  caf::error link_lost_error(const Peer& p) const;
  /// Fails everything open with peer `key` with `err` and drops its queue pairs and lanes: it
  /// went down, or the link that carried all that was lost.
  void cut_off(const caf::actor_addr& key, Peer& p, const caf::error& err);
  /// Whether a lost link to `p` can be made again (invariant 13).
  bool may_reconnect(const Peer& p) const;
  /// The answer to attempt `attempt` was not the link: try again, or declare `key` down (why).
  void reconnect_failed(const caf::actor_addr& key, uint32_t attempt, const std::string& why);
  /// Ends a reconnect: the peer is down for good (why), its waiting ops fail.
  void give_up(const caf::actor_addr& key, Peer& p, const std::string& why);
  /// The peer's manager is reachable through `proxy` (a new link): later messages go there,
  /// and ops waiting for the link resume.
  void adopt(Peer& p, const caf::actor& proxy);
  /// The rest of a queue-pair handshake from `p` (accept_connect), once it is taken for `p`.
  Result<QpInfoMsg> finish_accept(Peer& p, const QpInfoMsg& remote);
  /// Sends a request to peer manager `peer` (named `name`) and calls `ok` with its answer or
  /// `fail` with its error, exactly once: with peer_unavailable at once if the peer is down or
  /// goes down before it answers, with the request's error at `timeout`.
  template <class T, class... Ts>
  void ask_peer(const caf::actor& peer, const std::string& name, std::chrono::milliseconds timeout,
                std::function<void(T&)> ok, std::function<void(const caf::error&)> fail,
                Ts&&... xs) {
    Peer& p = peer_for(peer, name);
    if (!p.down_reason.empty())
      return fail(peer_down_error(p));
    if (p.reconnecting)
      return fail(link_lost_error(p));
    const uint64_t q = next_question_++;
    p.questions.emplace(q, std::move(fail));
    auto key = peer.address();
    peer_request(p.manager, timeout, std::forward<Ts>(xs)...)
        .then(
            [this, key, q, ok](T& answer) {
              if (take_question(key, q))
                ok(answer);
            },
            [this, key, q](caf::error& err) {
              if (auto f = take_question(key, q))
                f(err);
            });
  }
  /// A request to peer manager `dest`, sent by the facade in its own name (the manager's
  /// handle never leaves the process); its answer or error comes back as a request's would.
  template <class... Ts>
  auto peer_request(const caf::actor& dest, std::chrono::milliseconds timeout, Ts&&... xs) {
    return self_->request(
        facade_, timeout,
        PeerCall{route(dest), timeout, caf::make_message(std::forward<Ts>(xs)...), true});
  }
  /// A message to peer manager `dest`, sent by the facade (after every earlier peer message).
  template <class... Ts>
  void peer_send(const caf::actor& dest, Ts&&... xs) {
    caf::anon_send(facade_, PeerCall{route(dest), std::chrono::milliseconds(0),
                                     caf::make_message(std::forward<Ts>(xs)...), false});
  }
  /// Where messages to peer manager `dest` go: its current proxy (a reconnect replaces the one
  /// handles carry, invariant 13), or `dest` itself when it is no known peer.
  const caf::actor& route(const caf::actor& dest) const {
    auto it = peers_.find(dest.address());
    return it != peers_.end() && it->second.manager ? it->second.manager : dest;
  }
  /// Whether `owner` (a handle's) is this manager, as peers know it: its facade.
  bool owns(const caf::actor& owner) const { return owner && owner.address() == facade_.address(); }
  /// Asks the owner of `remote` (a peer manager) with `xs` and relays its answer or error (as
  /// ask_peer: peer_unavailable at once if it is or goes down).
  template <class T, class... Ts>
  caf::result<T> relay_to_owner(const BufferHandle& remote, Ts&&... xs) {
    auto rp = self_->make_response_promise<T>();
    ask_peer<T>(
        remote.owner, remote.owner_name, options_.handshake_timeout,
        [rp](T& x) mutable { rp.deliver(std::move(x)); },
        [rp](const caf::error& e) mutable { rp.deliver(e); }, std::forward<Ts>(xs)...);
    return rp;
  }
  caf::error no_owner_error(const BufferHandle& remote) const;
  /// The fail callback of question `q` to peer `key`, removed; empty if already answered.
  std::function<void(const caf::error&)> take_question(const caf::actor_addr& key, uint64_t q);
  QpInfoMsg to_msg(const QpInfo& info, uint64_t lane = 0) const;
  // fetch windows, owner side (manager_windows.cc)
  /// Serves a fetch now (deliver, then the read_ack behind it), or an error.
  void serve_fetch(const caf::node_id& node, const BufferRef& ref, uint64_t offset, uint64_t length,
                   caf::typed_response_promise<ByteChunk> rp);
  /// Whether a fetch of `charge` fits `w`'s window and the total now.
  bool window_fits(const PeerWindow& w, uint64_t charge) const;
  /// Sends `node` a read_ack covering what was served to it, if one is due (or `force`).
  void send_read_ack(const caf::node_id& node, bool force);
  void read_ack_answered(const caf::node_id& node, uint64_t token, uint64_t echoed,
                         const caf::actor& to);
  void read_ack_failed(const caf::node_id& node, uint64_t token);
  /// Asks the middleman whether `node` still has a direct connection to ours: gone after one
  /// was seen drops its window (its waiting fetches fail with peer_unavailable).
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
  /// A monitored sender of fetches went down: check whether its node is still connected.
  void window_sender_down(const caf::actor_addr& who);
  std::string window_error(const caf::node_id& node, const char* what) const;
  /// Gives the heap's free pages back to the system once the windows are empty after a burst.
  void trim_after_burst();
  /// range_checksum of [offset, offset + n) of a local buffer (host or GPU memory).
  Result<uint64_t> local_checksum(const LocalBuffer& b, uint64_t offset, uint64_t n) const;
  /// Copies between a local buffer (host or GPU memory) and host memory.
  Status copy_out(const LocalBuffer& b, uint64_t offset, void* dst, uint64_t n) const;
  Status copy_in(const LocalBuffer& b, uint64_t offset, const void* src, uint64_t n) const;
  std::string peer_name(const caf::actor_addr& key) const;

  /// Finishes the release of `id` once no transfer and no direct lane uses it.
  void maybe_finish_release(uint64_t id);
  Result<QpInfoMsg> accept_lane(Peer& peer, const QpInfoMsg& remote);
  /// Tells a peer manager to drop its side of our direct lane `lane`.
  void send_lane_drop(const caf::actor& peer, uint64_t lane);
  /// Keeps `qp` while its handshake is in flight (`opening_`); the number to take it back with.
  uint64_t hold_opening(std::shared_ptr<RdmaQueuePair> qp);
  /// The QP held under `n`, no longer held; null when a device loss dropped it meanwhile.
  std::shared_ptr<RdmaQueuePair> take_opening(uint64_t n);

  Self self_ = nullptr;
  /// Published in the manager's place; every message to or from another node passes it.
  caf::actor facade_;
  /// What the facade dropped (ManagerStats::facade_dropped, forged_answers).
  std::shared_ptr<FacadeCounters> facade_counters_ = std::make_shared<FacadeCounters>();
  ManagerOptions options_;
  bool named_ = false;  ///< set_name was taken
  std::shared_ptr<RdmaDomain> domain_;
  std::string no_rdma_reason_;
  std::unique_ptr<DeviceMonitor> monitor_;  ///< watches domain_ (null without one)
  /// Queue pairs of handshakes in flight (the managers' QPs and direct lanes), by a number of
  /// their own: the answer's callback holds only that number, so dropping these on a device
  /// loss lets the device go at once (a late answer finds nothing and is ignored).
  std::map<uint64_t, std::shared_ptr<RdmaQueuePair>> opening_;
  uint64_t next_opening_ = 1;
  std::string port_down_;  ///< non-empty while our port is down: why
  uint64_t device_losses_ = 0, device_reopens_ = 0;
  std::unique_ptr<CompletionPoller> poller_;
  /// The shared completion queue of domain_'s queue pairs (made with the first; dropped with
  /// the device: its QPs keep it alive until they go).
  std::shared_ptr<CompletionRouter> completions_;
  /// While a batch starts its ops: RDMA ops are queued on their QPs (listed here) and posted
  /// together afterwards, one chain of work requests per QP.
  bool batching_ = false;
  std::vector<std::shared_ptr<RdmaQueuePair>> queued_on_;
  std::unique_ptr<StreamServer> stream_server_;  ///< null: no stream channel here
  std::unique_ptr<StreamClient> stream_client_;
  std::shared_ptr<RdmaQueuePair> loopback_;
  uint64_t next_buffer_id_ = 1;
  std::unordered_map<uint64_t, LocalBuffer> buffers_;
  /// GPUs whose memory the NIC could not register (staged instead): said once each, with why.
  std::set<int> staged_gpus_;
  uint64_t next_ticket_ = 1;
  // The paths (actors/transfer/), each keeping its own per-op state.
  LocalCopyPath local_copy_{*this};
  RdmaPath rdma_{*this};
  StagedPath staged_{*this};
  ChunkPath chunks_{*this};
  StreamPath stream_{*this};
  std::unordered_map<uint64_t, Transfer> transfers_;
  /// Deadlines of live transfers. One timer message serves many transfers (no timer per
  /// transfer: scheduling one wakes CAF's clock thread, which costs the latency path).
  std::multimap<std::chrono::steady_clock::time_point, uint64_t> deadlines_;
  std::chrono::steady_clock::time_point next_tick_ = std::chrono::steady_clock::time_point::max();
  std::map<caf::actor_addr, Peer> peers_;
  std::map<std::string, DirEntry> directory_;
  /// Stream grants made as owner, by token.
  std::unordered_map<uint64_t, GrantHold> grants_;
  std::map<caf::node_id, uint32_t> grants_per_peer_;
  /// Fetch windows of peer nodes (invariant 12), their total charge held, and waiting.
  std::map<caf::node_id, PeerWindow> windows_;
  uint64_t windows_held_ = 0;
  /// What windows of nodes not seen directly connected hold (at most a kIndirectShare-th of
  /// total_window_bytes, invariant 12).
  uint64_t indirect_held_ = 0;
  /// Of windows_waiting_, what waits in windows of nodes not seen directly connected.
  uint64_t indirect_waiting_ = 0;
  uint64_t windows_waiting_ = 0;  ///< charge of all waiting fetches
  size_t fetches_waiting_ = 0;
  uint64_t served_at_trim_ = 0;  ///< counters_.served_fallback_bytes at the last trim
  /// Senders of fetches this manager monitors (until their down), other than peer managers.
  std::set<caf::actor_addr> watched_;
  size_t dir_waiter_count_ = 0;
  std::map<caf::node_id, size_t> dir_waiters_per_node_;
  std::map<std::string, std::vector<DirWaiter>> dir_waiters_;
  uint64_t next_dir_waiter_ = 1;
  Counters counters_;
  /// Invariant 13: the node's middleman actor (connect_atom) and its connect timeout; null: a
  /// lost link leaves its peer down.
  caf::io::middleman_actor connector_;
  std::chrono::milliseconds connect_timeout_{0};
  /// Local buffers direct lanes may use (shared with the lanes).
  std::shared_ptr<DirectRegistry> registry_ = std::make_shared<DirectRegistry>();
  uint64_t next_lane_ = 1;
  uint64_t next_question_ = 1;
  /// Direct lanes this manager opened and that are still alive, by lane id.
  std::map<uint64_t, LaneRecord> lanes_;
};

}  // namespace caf_rdma::detail
