// The front of an RdmaManagerActor (actors/rdma_manager_actor.cc builds the behavior): it keeps
// the requests, the transfers and one place that chooses each op's path
// (actors/transfer/path_choice.h); the paths (actors/transfer/) move the bytes, and the parts
// (actors/manager/) each do one job and keep its state (the buffers: BufferTable; the peers:
// PeerTable; the RDMA state: actors/transport/rdma_links.h). None is a friend: they reach the
// front, and each other, through public members only. Every op ends in one reply point
// (finish_op). Each part and path lists its own invariants; the manager's, numbered here,
// are cited by those files and by the tests under these numbers.
//
// Invariants (full text of 1-4, 8, 13 in the named files):
//  1. Buffer ids are never reused; a released id stays known as released (manager/buffer_table.h).
//  2. A buffer's release is answered once no byte moves into or out of it: this node's own
//     transfers on it finished, peers' transfers stopped (the release rule, the same on every
//     transport; manager/buffer_table.h).
//  3. At most one queue pair initiated and one accepted per peer manager; ops are posted only on
//     initiated QPs (manager/qp_handshakes.h).
//  4. A queue pair in ERR is dropped (destroyed, so the NIC stops); the next transfer makes a new
//     one (manager/qp_handshakes.h).
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
//  8. Device loss: everything on the device is dropped before any reply, RDMA ops in flight fail at
//     once, peers are told (manager/device_watch.h).
//  9. Staging: actors/transfer/staged_path.h (its invariants 1-4).
// 10. A fallback write or atomic whose deadline passes or which fails with requests on their
//     way is answered only once each was answered or timed out, by what came back (success,
//     timeout, or unknown: peer_unavailable): actors/transfer/chunk_path.h (invariant 1).
// 11. A stream job its owner refused before taking the request moved no byte, so its op moves
//     in CAF chunks instead: actors/transfer/stream_path.h (invariant 2).
// 12. Fetch windows: everything a peer node can make this owner hold in fetch answers it has
//     not proven it read is bounded (actors/manager/fetch_windows.h, its invariants 1-5); as
//     requester, the fetches asked of one owner stay within peer_window_bytes
//     (actors/transfer/chunk_path.h, invariant 2).
// 13. A lost link is not a dead peer: ops in flight fail, new ones wait, the address is connected
//     again (manager/link_recovery.h).
// 14. Atomics (fetch-add, compare-swap) are ops of their own kinds: checked as
//     actors/transfer_checks.h invariant 2 says, their old value lands in host memory, NIC
//     atomics only on a device with atomic_cap (path_choice.h invariant 5), never the stream
//     channel, never run twice (rdma_path.h invariant 5), never rerouted from RDMA to the
//     fallback (the error names why RDMA failed); the fallback's owner applies them with CPU
//     atomics (manager/buffer_table.h invariant 14).
// 15-17. Write notifications: a write's notice leaves once its bytes are in the owner's memory,
//     as the owner saw (a receipt: manager/write_receipts.h), at most once; the writer's reply
//     follows it; notices waiting for watchers are bounded (manager/write_notices.h).
// 18-21. Several devices: buffers are registered on every rail or none; a large op's slices
//     all complete before its reply, a failed rail's slice runs again on the primary device;
//     striping queue pairs are made on first use and dropped with the primary device or the
//     peer; a rail whose port goes down or whose device is lost fails over at once
//     (manager/rails.h).
// 22. Queue pairs accepted from peers are capped per peer node and in all
//     (manager/qp_handshakes.h).
// 23. A peer's store or atomic taken up past its arrival plus its requester's time left is
//     refused, not applied (manager/buffer_table.h).
// 24. Cancel (cancel_atom, actors/cancel_request.h): a transfer or batch is known by its
//     request's sender and request id until its reply, a list by the same name until its worker
//     ends. A cancelled transfer's open ops end as at its timeout (DeadlineStage::kCancelled):
//     nothing lands after the reply (invariants 5, 10, 16), and what ends early answers
//     `cancelled`, saying what is known to have landed. Two exceptions, where the op's own end
//     stands: an RDMA op on a queue pair that other transfers' ops use too (a flush would fail
//     or repeat theirs) ends by its own completion, and an op whose bytes all landed before it
//     could stop answers its success. Its timeout still applies after a cancel (kDue). A
//     cancelled list's worker starts no further step and cancels the one in flight.
// 25. Classes and deadlines order the waits: ops waiting for this manager's stream threads
//     (components/stream_client.h invariant 9), its bounce buffers (staged_path.h invariant 4)
//     or an owner's fetch window (chunk_path.h invariant 2) take them by priority class,
//     strict priority with aging (components/class_queue.h), earliest deadline first within a
//     class, equal deadlines in arrival order (enqueue_waiting); a stream op that cannot end by
//     its deadline behind what waits ahead of it is refused up front (stream_path.h invariant
//     6). Ops parked while a lost link is made again (manager/link_recovery.h invariant 13)
//     resume together, most urgent class first, each class by deadline.
// 26. Classes have queue pairs of their own: a latency or background RDMA op runs whole on its
//     class's queue pair to its peer, never behind bulk work, and carries its class's traffic
//     class and service level; only bulk ops are striped (manager/rails.h).
#pragma once

#include <algorithm>

#include "actors/detail/manager_tables.h"
#include "actors/manager/buffer_table.h"
#include "actors/manager/device_watch.h"
#include "actors/manager/directory.h"
#include "actors/manager/fetch_windows.h"
#include "actors/manager/gpu_exports.h"
#include "actors/manager/lane_table.h"
#include "actors/manager/link_recovery.h"
#include "actors/manager/peer_table.h"
#include "actors/manager/qp_handshakes.h"
#include "actors/manager/rails.h"
#include "actors/manager/registrant_watch.h"
#include "actors/manager/served_ledger.h"
#include "actors/manager/stream_grants.h"
#include "actors/manager/telemetry.h"
#include "actors/manager/write_notices.h"
#include "actors/manager/write_receipts.h"
#include "actors/stream_endpoints.h"
#include "actors/transfer/chunk_path.h"
#include "actors/transfer/local_copy_path.h"
#include "actors/transfer/path_choice.h"
#include "actors/transfer/rdma_path.h"
#include "actors/transfer/staged_path.h"
#include "actors/transfer/stream_path.h"
#include "actors/transfer/transfer_path.h"

namespace caf_rdma::detail {

class ManagerState {
public:
  static inline const char* name = "rdma_manager";

  using Self = manager_impl_actor::stateful_pointer<ManagerState>;

  void init(Self self, ManagerOptions options, std::shared_ptr<Nic> domain,
            std::vector<std::shared_ptr<Nic>> rails, std::string no_rdma_reason);
  /// The node's start line (info; a warning when a named device was not used): transport,
  /// device, port, GID and MTU, or why there is no RDMA; the stream channel's address.
  void say_started() const;
  ~ManagerState();

  // -- requests (rdma_manager_actor.cc) --
  /// Ok when the current message comes from an actor of this node; else permission_denied
  /// naming `request` and the sender.
  Status local_only(const char* request) const;
  /// A timeout given by a caller or peer, cut to options_.max_timeout.
  uint32_t capped(uint32_t timeout_ms) const;
  ManagerStats stats() const;

  // -- the manager's parts (actors/manager/): each does one job and keeps its state; the
  //    behaviour and the other parts reach them here. Declared first, they are destroyed
  //    last: what their state holds may own only by shared ownership (a buffer's memory
  //    region keeps its protection domain), never point into the members below.
  BufferTable buffer_table{*this};
  PeerTable peer_table{*this};
  QpHandshakes handshakes{*this};
  LinkRecovery links{*this};
  StreamGrants grants{*this};
  GpuExports exports{*this};  ///< same-host GPU copies' exports and imports
  LaneTable lanes{*this};
  DeviceWatch device{*this};
  Directory directory{*this};
  FetchWindows windows{*this};         ///< the owner side of fetch windows (invariant 12)
  RegistrantWatch registrants{*this};  ///< leak accounting: who holds each live buffer
  WriteNotices notices{*this};         ///< write notifications (invariants 15-17)
  WriteReceipts receipts{*this};       ///< the writes notices claim (invariant 15)
  Rails rails{*this};                  ///< devices after the primary, striping (18-21)

  /// The name given by its node once it listens (first call only; SetName is an internal event).
  void set_name(std::string name) {
    if (named_ || name.empty())
      return;
    named_ = true;
    options_.name = std::move(name);
    caf::anon_send(facade_, FacadeName{options_.name});
    if (options_.named_later)
      say_started();
  }
  /// This process's stream lane (null: none).
  const std::shared_ptr<StreamLane>& stream_lane() const { return stream_lane_; }
  /// Transfer lists' workers running now (actors/list_worker.h invariant 1).
  const std::shared_ptr<std::atomic<size_t>>& list_workers() const { return list_workers_; }
  /// The actor published in this manager's place (actors/peer_facade.h): peers see only it.
  const caf::actor& facade() const { return facade_; }

  // -- transfers (manager_transfers.cc) --
  caf::result<TransferReply> transfer(TransferOp op, uint32_t timeout_ms);
  /// cancel_atom from `sender`: stops what it asked under `request`, if it still runs
  /// (invariant 24).
  void cancel(const caf::actor_addr& sender, uint64_t request);
  /// A transfer list about to be delegated to its worker: the stop its cancel asks
  /// (invariant 24), shared with the worker.
  std::shared_ptr<StopSignal> list_stop();
  caf::result<std::vector<TransferOutcome>> batch(std::vector<TransferOp> ops, uint32_t timeout_ms);
  /// The RDMA path an OpDone names, the one that posted the op: it takes the completion
  /// (actors/transfer/rdma_path.h, invariant 8).
  RdmaPath& posted_by(uint8_t path) {
    return static_cast<PathKind>(path) == PathKind::kRdmaStaged ? staged_ : rdma_;
  }
  /// StreamDone: the stream job of op `id` ended (StreamPath::job_ended).
  void stream_done(OpId id, uint64_t local_id, TransferOutcome outcome, bool refused);
  /// Transfer `ticket` passed `stage`: each of its open ops' paths ends it (or flushes).
  void op_timeout(uint64_t ticket, DeadlineStage stage);
  /// A deadline sweep scheduled for `at` (steady clock, ns): times out every transfer due.
  void deadline_tick(int64_t at);

  /// StagingFreed: free bounce buffers go to the ops waiting for one.
  void staging_freed() { staged_.slots_freed(); }

  // -- what the parts (actors/manager/) and the paths (actors/transfer/) ask of the front ----
  // No part is a friend: each keeps its own state (the peers: PeerTable; the buffers:
  // BufferTable; the RDMA state: nic()), and asks the front only for what follows: its
  // context, the objects it shares with its threads, the transfers and the one reply point.
  Self self() const { return self_; }
  const ManagerOptions& options() const { return options_; }
  Counters& counters() { return counters_; }
  const Counters& counters() const { return counters_; }
  /// The RDMA state (actors/transport/rdma_links.h).
  RdmaLinks& nic() { return nic_; }
  const RdmaLinks& nic() const { return nic_; }
  StreamServer* stream_server() const { return stream_server_.get(); }  ///< null: none
  const std::shared_ptr<StreamClient>& stream_client() const { return stream_client_; }
  const std::shared_ptr<DirectRegistry>& registry() const { return registry_; }
  const std::shared_ptr<StreamEndpoints>& stream_endpoints() const { return stream_endpoints_; }
  const std::shared_ptr<ServedLedger>& served() const { return served_; }
  RdmaPath& rdma_path() { return rdma_; }
  StagedPath& staged_path() { return staged_; }
  ChunkPath& chunk_path() { return chunks_; }
  StreamPath& stream_path() { return stream_; }
  /// The live transfers, by ticket.
  std::unordered_map<uint64_t, Transfer>& transfers() { return transfers_; }
  /// The transfer of op `id` (live: its op is open).
  Transfer& transfer_of(OpId id) { return transfers_.at(id.ticket); }
  const Transfer& transfer_of(OpId id) const { return transfers_.at(id.ticket); }
  /// The RDMA path of that kind (null for the others).
  RdmaPath* rdma_path(PathKind kind);
  /// Invariant 25: puts open op `id` into `queue` by its class and its transfer's deadline.
  /// The queue holds live ops only (a path's `forget` takes its op out).
  void enqueue_waiting(ClassQueue<OpId>& queue, OpId id) const {
    queue.set_aging(options_.priority_aging);
    queue.push(priority_of(transfers_.at(id.ticket).ops.at(id.index).op),
               transfers_.at(id.ticket).due, id, now());  // the actor's clock, as `due`'s
  }
  // -- the one reply point (reply_point.cc) --
  /// Ends op `id` with `outcome` (its path forgets it), and replies once every op of its
  /// transfer ended (invariant 5).
  void finish_op(OpId id, TransferOutcome outcome);
  void fail_op(OpId id, const caf::error& err);
  /// The open op `id` (null once it ended or its transfer is gone).
  OpRecord* op_record(OpId id);
  /// Why op `id` ends early, as its outcome: its transfer's timeout, or its cancel
  /// (invariant 24), with `more` said after it. `flushed`: ended by its queue pair's flush;
  /// `stream_stopped`: its stream job stopped (`why`: how it ended, for a cancel).
  TransferOutcome timed_out(OpId id, const std::string& more) const;
  TransferOutcome flushed(OpId id) const;
  TransferOutcome stream_stopped(OpId id, const std::string& why) const;
  /// An RDMA op that cannot use RDMA after all (the device went away, the owner has none, or
  /// was reopened since its handle was made): through the owner (fallback), or, where the
  /// fallback is forbidden or impossible, an error saying `why`.
  void reroute(OpId id, const std::string& why);
  /// Restarts op `id` on its path once its lost link came back.
  void resume_op(OpId id);
  /// The actor clock's time (the test coordinator's in deterministic tests).
  std::chrono::steady_clock::time_point now() const { return self_->clock().now(); }

private:
  uint64_t new_transfer(Transfer t);
  /// The current message as a cancel names it (a null sender: not a request). Asked before a
  /// response promise is made: CAF 0.17's promise takes the message's sender.
  RequestKey current_request() const;
  /// Replies to transfer `ticket` once every op of it ended.
  void maybe_reply(uint64_t ticket);
  /// Makes sure a deadline sweep runs no later than `deadline` + kDeadlineSlack.
  void arm_deadline_tick(std::chrono::steady_clock::time_point deadline);

  /// Checks op `id`, chooses its path (path_choice.h) and starts it there.
  void start_op(OpId id);
  /// What choose_path needs to know of op `o` with local buffer `local`.
  PathFacts path_facts(const OpRecord& o, const LocalBuffer& local) const;
  TransferPath& path(PathKind kind);

  Self self_ = nullptr;
  /// Published in the manager's place; every message to or from another node passes it.
  caf::actor facade_;
  /// What the facade dropped (ManagerStats::facade_dropped, forged_answers).
  std::shared_ptr<FacadeCounters> facade_counters_ = std::make_shared<FacadeCounters>();
  ManagerOptions options_;
  bool named_ = false;  ///< set_name was taken
  /// The RDMA state: device, rails, poller, queue pairs of handshakes, lanes
  /// (actors/transport/rdma_links.h).
  RdmaLinks nic_;
  std::unique_ptr<StreamServer> stream_server_;  ///< null: no stream channel here
  /// Shared with the stream lane (stream_lane_), which runs its jobs on clients' threads.
  std::shared_ptr<StreamClient> stream_client_;
  std::shared_ptr<StreamLane> stream_lane_;  ///< null: none (no stream channel, verify mode)
  std::shared_ptr<std::atomic<size_t>> list_workers_ = std::make_shared<std::atomic<size_t>>(0);
  uint64_t next_ticket_ = 1;
  // The paths (actors/transfer/), each keeping its own per-op state.
  LocalCopyPath local_copy_{*this};
  RdmaPath rdma_{*this};
  StagedPath staged_{*this};
  ChunkPath chunks_{*this};
  StreamPath stream_{*this};
  std::unordered_map<uint64_t, Transfer> transfers_;
  /// Invariant 24: the live transfers by their request, and the running lists' stops (each
  /// shared with its worker: dropped once only this map holds it).
  std::map<RequestKey, uint64_t> requests_;
  std::map<RequestKey, std::shared_ptr<StopSignal>> list_stops_;
  /// Deadlines of live transfers. One timer message serves many transfers (no timer per
  /// transfer: scheduling one wakes CAF's clock thread, which costs the latency path).
  std::multimap<std::chrono::steady_clock::time_point, uint64_t> deadlines_;
  std::chrono::steady_clock::time_point next_tick_ = std::chrono::steady_clock::time_point::max();
  Counters counters_;
  /// Per op: bytes, ops, errors, latencies by peer, path and kind (fed by finish_op).
  Telemetry telemetry_;
  /// As owner: the requests of peers served, by requester, path and kind (shared with the stream
  /// server's workers, which record theirs).
  std::shared_ptr<ServedLedger> served_ = std::make_shared<ServedLedger>();
  /// Local buffers direct lanes may use (shared with the lanes).
  std::shared_ptr<DirectRegistry> registry_ = std::make_shared<DirectRegistry>();
  /// Owners' stream endpoints as their grants named them (shared with the stream lane).
  std::shared_ptr<StreamEndpoints> stream_endpoints_ = std::make_shared<StreamEndpoints>();
};

// -- PeerTable's templates (they need the whole ManagerState) --------------------------------

template <class... Ts>
auto PeerTable::peer_request(const caf::actor& dest, std::chrono::milliseconds timeout,
                             Ts&&... xs) {
  return m_.self()->request(
      m_.facade(), timeout,
      PeerCall{route(dest), timeout, caf::make_message(std::forward<Ts>(xs)...), true});
}

template <class... Ts>
void PeerTable::peer_send(const caf::actor& dest, Ts&&... xs) {
  caf::anon_send(m_.facade(), PeerCall{route(dest), std::chrono::milliseconds(0),
                                       caf::make_message(std::forward<Ts>(xs)...), false});
}

template <class T, class... Ts>
void PeerTable::ask_peer(const caf::actor& peer, const std::string& name,
                         std::chrono::milliseconds timeout, std::function<void(T&)> ok,
                         std::function<void(const caf::error&)> fail, Ts&&... xs) {
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

template <class T, class... Ts>
caf::result<T> PeerTable::relay_to_owner(const BufferHandle& remote,
                                         std::chrono::milliseconds timeout, Ts&&... xs) {
  auto rp = m_.self()->make_response_promise<T>();
  ask_peer<T>(
      remote.owner, remote.owner_name, timeout, [rp](T& x) mutable { rp.deliver(std::move(x)); },
      [rp](const caf::error& e) mutable { rp.deliver(e); }, std::forward<Ts>(xs)...);
  return rp;
}

}  // namespace caf_rdma::detail
