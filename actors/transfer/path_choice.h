// The one place that chooses how an op moves its bytes (ManagerState::start_op, and again when
// RDMA turns out to be unusable for it: ManagerState::reroute). Pure: it sees the facts the
// manager gathered, not the manager.
//
// Invariants:
//  1. RDMA is chosen only when both ends are on the same kind of fabric, the owner registered
//     its buffer on its NIC, this manager has a device with its port up and the local buffer is
//     registered on it (GPU memory the NIC could not register: rdma-staged).
//  2. Two ranges of this node that overlap are copied by their owner (memmove), never by RDMA:
//     the NIC gives overlapping bytes no order (transfer_checks.h, ranges_overlap).
//  3. With TransportMode::kRdma nothing takes the fallback: the choice is an error (no_device)
//     naming why RDMA cannot be used.
//  4. The fallback of an op between this node's own buffers is the local copy; of a remote op,
//     the stream channel (host memory straight, GPU memory through each side's bounce
//     buffers: components/stream_server.h invariant 19, stream_client.h invariant 10) when the
//     op is at least
//     stream_min_bytes (or, once per owner and link, its owner's stream endpoint is not known
//     here yet: the grant names it, actors/stream_endpoints.h) and the owner takes streams,
//     else CAF chunks. An atomic never takes the stream channel.
//  5. An atomic whose RDMA this manager's device cannot run (atomic_cap IBV_ATOMIC_NONE) takes
//     no path: the error (invalid_argument) names the device and atomic_cap. It does not fall
//     back, since the owner's CPU atomics are not atomic with other nodes' NIC atomics.
//  6. One brain for RdmaClient's lanes too (lane_path): a lane takes an op only on the path
//     choose_path gives it from what the two handles show, with the manager's own thresholds
//     (its stream lane carries its stream_min_bytes): a direct lane when both handles carry
//     RDMA (invariant 1; the lane's grant checks device, port, fabric and mode), the stream lane
//     under invariant 4's rule of size (stream_size_fits, the manager's rule too) for host
//     memory on both sides (GPU memory's stream transfers are the manager's, which stages them);
//     anything else (atomics, notify writes, GPU memory a NIC cannot register, an op below the
//     threshold) goes to the manager, which chooses with every fact it has. This node's own
//     buffers take its loopback lane (RDMA, as the manager's loopback queue pair), except two
//     ranges that overlap (invariant 2: the lane hands them to the manager). So an op of a given
//     size between two buffers takes the same path from a client's thread as from an actor.
//  7. Striping, one rule for the manager (manager/rails.h invariant 19) and RdmaClient's lanes
//     (an op the manager would stripe is not a lane's): an RDMA read or write is cut into slices
//     when it moves at least stripe_min_bytes, is no notify write (its fence orders one queue
//     pair only), is not between this node's own buffers, is of the bulk class (a latency or
//     background op runs whole on its class's queue pair: manager/rails.h invariant 26), and
//     both sides have rails or the manager stripes over several queue pairs of its one device
//     (stripe_qps > 1). A batch's (a transfer list's) reads and writes to one owner are
//     measured together: when what they move would be striped, the smaller ones go whole on
//     the striping queue pairs, spread (manager/rails.h invariant 19), and a client's list of
//     that size is the manager's, not a lane's (DirectLane::list_probe).
#pragma once

#include <string>
#include <string_view>

#include "actors/rdma_manager_actor.h"
#include "actors/rdma_messages.h"
#include "actors/transfer/transfer_path.h"
#include "primitives/status.h"

namespace caf_rdma::detail {

/// What the manager knows about one op when it chooses its path. The texts are views of the
/// manager's own strings (no copy per op): valid while the choice is made.
struct PathFacts {
  TransportMode mode = TransportMode::kAuto;
  bool same_node = false;             ///< the remote buffer is this manager's own
  bool ranges_overlap = false;        ///< same node, and the two ranges share a byte
  bool has_device = false;            ///< this manager has an RDMA device
  std::string_view no_device_reason;  ///< why not (without one)
  std::string_view port_down;         ///< non-empty while its port is down: why
  bool local_registered = false;      ///< the local buffer is on the NIC (or staged GPU memory)
  bool local_staged = false;          ///< local GPU memory the NIC cannot register
  bool remote_registered = false;     ///< the owner registered the remote buffer on its NIC
  bool remote_staged = false;         ///< remote GPU memory its owner's NIC cannot register
  bool same_fabric = false;           ///< both NICs RoCE, or both InfiniBand
  bool stream_fits = false;           ///< the stream channel could take it (invariant 4)
  std::string_view device;            ///< this manager's device (with one)
  bool device_atomics = false;        ///< its atomic_cap is not IBV_ATOMIC_NONE (invariant 5)
  /// Set when RDMA was chosen but cannot be used after all (rerouting): why.
  std::string_view rdma_lost;
};

/// A path, or (path == kNone) the error saying why none may take the op.
struct PathChoice {
  PathKind path = PathKind::kNone;
  ErrorCode code = ErrorCode::kNoDevice;  ///< the error's code (when path is kNone)
  std::string why;  ///< the error's message; for a path, why not RDMA (empty when RDMA)
};

/// The facts of a remote buffer and of this manager's device (what choose_path needs beyond the
/// op's local side): the front's path_facts and the direct lanes (LaneTable) both use it.
/// `port_ethernet` is the local port's link layer (ignored without a device).
PathFacts device_facts(const TransferOp& op, TransportMode mode, bool has_device,
                       std::string_view no_device_reason, std::string_view port_down,
                       bool port_ethernet);

/// Invariant 4's rule of size, the manager's and its stream lane's: the stream channel takes a
/// fallback op or list of `bytes` when it is at least `stream_min_bytes` (0: never).
bool stream_size_fits(uint64_t bytes, uint64_t stream_min_bytes);

/// What the two handles of an op show (invariant 6): all a lane may choose by.
struct LaneFacts {
  uint8_t kind = 0;
  bool notify = false;         ///< a notify write
  bool owners_known = false;   ///< both handles name their owner
  bool same_node = false;      ///< ... and it is one node
  bool local_rdma = false;     ///< the local handle carries an RDMA registration
  bool remote_rdma = false;    ///< the remote one does
  bool local_host = false;     ///< the local buffer is host memory
  bool local_staged = false;   ///< local GPU memory the NIC cannot register (rdma-staged)
  bool remote_host = false;    ///< the remote one is
  bool remote_staged = false;  ///< remote GPU memory its owner's NIC cannot register
  bool remote_stream = false;  ///< the remote handle names its owner's stream channel
  uint64_t bytes = 0;
  uint64_t stream_min_bytes = 0;  ///< the stream lane's manager's; 0: no stream lane
};

/// The facts of an op of `kind` (`notify`: a notify write) of `bytes` bytes between `local` and
/// `remote`, with a stream lane of `stream_min_bytes` (0: none).
LaneFacts lane_facts(const BufferHandle& local, const BufferHandle& remote, uint8_t kind,
                     bool notify, uint64_t bytes, uint64_t stream_min_bytes);

/// Which of RdmaClient's lanes may move the op (invariant 6): kRdma (a direct lane), kStream
/// (the stream lane) or kNone (the manager chooses).
PathKind lane_path(const LaneFacts& facts);

/// What invariant 7 decides by.
struct StripeFacts {
  uint64_t bytes = 0;             ///< what the op moves
  uint64_t stripe_min_bytes = 0;  ///< the manager's (ManagerOptions::stripe_min_bytes); 0: never
  bool notify = false;            ///< a notify write
  bool same_node = false;         ///< between this node's own buffers
  size_t rails = 0;               ///< rails both sides have
  bool several_qps = false;       ///< the manager's stripe_qps > 1
  bool bulk = true;               ///< a bulk-class op (only those are striped)
};

/// StripeFacts::rails from the count of each side's rail registrations (a handle's `rails`, or
/// the owner's LocalBuffer's): a buffer is on every rail of its manager or on none
/// (manager/rails.h invariant 18), so each count is its manager's rails or 0, and the rails
/// both sides have are the smaller. The manager (Rails::stripes) and RdmaClient's lanes count so.
size_t shared_rails(size_t local_rails, size_t remote_rails);

/// Invariant 7: whether the op is cut into slices.
bool striped(const StripeFacts& facts);

/// Invariant 7: whether `op`'s bytes count toward what its batch moves to its owner together
/// (a bulk read or write of an explicit length, no notify write); the manager (Rails) and
/// RdmaClient's lanes count so.
bool counts_together(const TransferOp& op);

/// Chooses the path of `op` (invariants 1-5).
PathChoice choose_path(const TransferOp& op, const PathFacts& facts);

/// Why RDMA cannot move `op` (empty when it can): the first of invariant 1's conditions that
/// fails, in words.
std::string why_not_rdma(const TransferOp& op, const PathFacts& facts);

}  // namespace caf_rdma::detail
