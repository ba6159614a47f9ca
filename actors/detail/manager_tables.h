// Plain data that the manager's front (actors/detail/manager_state.h), its parts
// (actors/manager/) and its paths (actors/transfer/) share: a buffer (kept by BufferTable), a
// transfer and its ops (kept by the front), a peer (kept by PeerTable). The rules that govern
// them are in manager_state.h and the files it names.
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
#include <utility>
#include <vector>

#include "actors/detail/manager_events.h"
#include "actors/direct_lane.h"
#include "actors/direct_registry.h"
#include "actors/peer_facade.h"
#include "actors/rdma_errors.h"
#include "actors/rdma_manager_actor.h"
#include "actors/stream_lane.h"
#include "actors/transfer/transfer_path.h"
#include "actors/transfer_checks.h"
#include "actors/transport/rdma_links.h"
#include "components/class_queue.h"
#include "components/completion_poller.h"
#include "components/device_monitor.h"
#include "components/nic.h"
#include "components/qp_endpoint.h"
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
  /// Its registrations on the manager's rails, rail k at k - 1 (manager/rails.h invariant 18):
  /// empty, or one per rail.
  std::vector<RdmaBuffer> rails;
  uint32_t in_use = 0;  ///< transfers, grants and fallback chunks in flight currently using it
  uint32_t grants = 0;  ///< stream grants outstanding on it (counted in in_use too)
  bool released = false;
  /// Set at its release: peers' stream transfers on it stop touching it after the call under way
  /// (manager invariant 2; components/stream_server.h invariant 14).
  std::shared_ptr<std::atomic<bool>> withdrawal = std::make_shared<std::atomic<bool>>(false);
  std::vector<caf::typed_response_promise<uint64_t>> release_waiters;
  caf::actor watcher;  ///< told of notify writes into it (manager/write_notices.h); none: null
  /// GPU memory: its export to peers of this host, made once (manager/gpu_exports.h
  /// invariant 1; null: none), and the peer managers that may have imported it (invariant 2).
  bool export_tried = false;
  std::shared_ptr<const GpuExport> gpu_export;
  std::vector<caf::actor> importers;
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
  bool notifying = false;  ///< its bytes moved; its notice is on its way (write_notices.h)
  /// A notify write: the receipt its notice claims at the owner (manager/write_receipts.h).
  uint64_t receipt = 0;
  /// What the reads and writes of its batch (a list's) move to its owner together, when the
  /// manager stripes: the striping rule's size for an op smaller than that (manager/rails.h
  /// invariant 19). 0: not in a batch, or nothing is striped here.
  uint64_t batch_bytes = 0;

  bool is_read() const { return caf_rdma::is_read(op); }
};

/// A request as its sender's cancel names it (actors/cancel_request.h invariant 1): the
/// sender, and the request id of CAF's message id.
using RequestKey = std::pair<caf::actor_addr, uint64_t>;

struct Transfer {
  bool batch = false;
  caf::typed_response_promise<TransferReply> single;
  caf::typed_response_promise<std::vector<TransferOutcome>> many;
  std::vector<OpRecord> ops;
  std::vector<TransferOutcome> outcomes;
  size_t remaining = 0;
  uint32_t timeout_ms = 0;
  std::chrono::steady_clock::time_point started;  ///< when it was asked (its ops' latency)
  std::chrono::steady_clock::time_point due;      ///< when it times out
  bool timed_out = false;  ///< its timeout passed, or it was cancelled: it ends early
  /// Its requester cancelled it (cancel_atom) before it ended: what ends early answers
  /// `cancelled` (manager invariant 24); timed_out is set too.
  bool cancelled = false;
  /// Its request as a cancel names it: sender and request id (a null sender: none).
  RequestKey asked_by;
  std::multimap<std::chrono::steady_clock::time_point, uint64_t>::iterator deadline;
};

struct Peer {
  caf::actor manager;
  std::string name;
  PeerQps qps;  ///< its RDMA state
  bool monitored = false;
  std::string down_reason;  ///< non-empty once the peer is gone
  /// Invariant 13: its link was lost (why) and is being made again; new ops wait in `parked`.
  bool reconnecting = false;
  std::string link_lost;
  std::vector<OpId> parked;  ///< ops waiting for the link
  bool no_stream = false;    ///< its owner answered a stream grant with port 0: use chunks
  /// An op below stream_min_bytes took its stream channel once, to learn its endpoint
  /// (actors/stream_endpoints.h): later small ones do so no more, learned or not (a stream
  /// port a firewall drops would time every small op out).
  bool endpoint_tried = false;
  /// Questions asked of it (ask_peer) and not yet answered: each fails with peer_unavailable
  /// when it goes down, not at its timeout.
  std::map<uint64_t, std::function<void(const caf::error&)>> questions;
  /// As requester (invariant 12): window charge of the fetches asked of it and not yet
  /// answered, and the fallback reads waiting to ask more (ChunkPath).
  uint64_t fetching = 0;
  ClassQueue<OpId> fetch_queue;
  /// Counts its lost links (invariant 13): `fetching` holds only fetches asked over the
  /// current one; answers to earlier ones (their requests' timeouts) release nothing.
  uint64_t link = 0;
};

/// At most this many direct lanes from one peer manager are accepted at once.
constexpr size_t kMaxLanesPerPeer = 256;

/// A stream grant this manager made as owner, until it is used or withdrawn.
struct GrantHold {
  uint64_t buffer = 0;  ///< held (counted in its in_use and grants)
  caf::node_id peer;    ///< whose node asked (counted in grants_per_peer_)
  /// A write grant: where its bytes land (a receipt once they all did: write_receipts.h).
  bool write = false;
  uint64_t offset = 0, length = 0;
  caf::actor requester;  ///< who asked (its manager's facade): a GPU export's importer
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
  uint64_t handshakes = 0, served_fallback_bytes = 0, stream_ops = 0, stream_refused = 0,
           stream_grants_asked = 0;
  uint64_t staged_chunks = 0, staged_overlapped = 0, packed_chunks = 0, packed_ops = 0,
           staged_pieces = 0;
  uint64_t links_lost = 0, reconnects = 0;
  uint64_t notices_sent = 0, notices_refused = 0, notified_writes = 0;
  uint64_t striped_ops = 0, stripe_slices = 0, stripe_failovers = 0, spread_ops = 0;
};

/// A failed request's or lower layer's error as a transfer outcome (CAF's request timeout is
/// `timeout`, an unreachable or gone receiver `peer_unavailable`).
TransferOutcome outcome_of(const caf::error& err);
TransferOutcome outcome_of(const Error& err);
/// The queue-pair info a peer sent in a handshake.
QpInfo from_msg(const QpInfoMsg& m);
/// How long a transfer's requests to peer managers may take: its timeout plus kRequestBackstop.
std::chrono::milliseconds request_timeout(const Transfer& t);

}  // namespace caf_rdma::detail
