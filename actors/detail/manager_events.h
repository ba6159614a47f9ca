// Internal events of an RdmaManagerActor: what its own threads (completion poller, stream
// channel, direct lanes), its timers and its node tell it.
//
// Invariants:
//  1. Each event is a type of its own, allowed as an *unsafe* (non-serializable) message type and
//     never registered with `add_message_types`: it can only be sent from inside the manager's
//     process. A peer cannot send one (its node cannot serialize it, and ours could not
//     deserialize it), whatever it knows of the manager's address.
//  2. None of them is in the public interface (`rdma_manager_actor`); they form
//     `manager_events_actor`, which the manager's own handle type (`manager_impl_actor`) adds.
//  3. A hold is named by what created it (transfer ticket, grant token), never by a bare buffer
//     id: an event can end only the hold it was made for, once.
#pragma once

#include <caf/actor_addr.hpp>
#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/io/middleman_actor.hpp>
#include <caf/node_id.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <chrono>
#include <cstdint>
#include <string>

#include "actors/rdma_manager_interface.h"
#include "actors/rdma_messages.h"

namespace caf_rdma::detail {

/// Completion poller (or inline poll) -> manager: op `index` of transfer `ticket` completed.
/// `fault` is the OpFault of a failed op (retry on a new QP, or ask the owner).
struct OpDone {
  uint64_t ticket = 0;
  uint32_t index = 0;
  uint8_t path = 0;  ///< the PathKind of the path that posted it (it takes the completion)
  TransferOutcome outcome;
  uint8_t fault = 0;
  uint32_t chunk = 0;  ///< of an rdma-staged op: which chunk completed
};

/// Poller -> manager: what follows notify write `index` of transfer `ticket` on its queue pair
/// (its write with immediate, or for our own buffer its fence READ) completed
/// (actors/manager/write_notices.h, invariant 15).
struct FenceDone {
  uint64_t ticket = 0;
  uint32_t index = 0;
  TransferOutcome outcome;
};

/// Poller -> manager: a receive posted for write receipts (manager/write_receipts.h
/// invariant 4) on the queue pair accepted from a peer of node `node` took the immediate `imm`.
struct ReceiptLanded {
  std::string node;
  uint32_t imm = 0;
};

/// Timer: notice `waiter`'s wait for its write's receipt is over (write_receipts.h invariant 2).
struct ReceiptDue {
  uint64_t waiter = 0;
};

/// Timer: transfer `ticket` passed a deadline: `stage` is a DeadlineStage
/// (actors/transfer/transfer_path.h): kDrainOverdue, the flush after its timeout overran.
struct OpTimeout {
  uint64_t ticket = 0;
  uint32_t stage = 0;
};

/// Timer: sweep of the transfers' deadlines scheduled for `at` (steady clock, ns).
struct OpTick {
  int64_t at = 0;
};

/// Stream client thread -> manager: the stream job of op `index` of transfer `ticket` ended and
/// no longer touches local buffer `local_id`; `refused`: its owner never took the request, so
/// no byte moved (StreamEnd::refused).
struct StreamDone {
  uint64_t ticket = 0;
  uint32_t index = 0;
  uint64_t local_id = 0;
  TransferOutcome outcome;
  bool refused = false;
};

/// Stream server thread -> manager: grant `token` was used; `bytes` moved (0 on failure).
struct StreamServed {
  uint64_t token = 0;
  uint64_t bytes = 0;
  /// Its requester was handed the buffer's GPU export (manager/gpu_exports.h invariant 2).
  bool exported = false;
};

/// Timer: grant `token` reached its deadline; withdraw it if nobody claimed it.
struct StreamExpire {
  uint64_t token = 0;
};

/// A fallback store chunk that pointed into local buffer `id` was destroyed (serialized and
/// sent, or dropped): the buffer's memory is no longer referenced by it.
struct ChunkSent {
  uint64_t id = 0;
};

/// DirectLane -> manager: direct lane `id` of this manager is gone.
struct LaneClosed {
  uint64_t id = 0;
};

/// DirectLane -> manager: a lane ended its last use of released buffer `id`.
struct LaneIdle {
  uint64_t id = 0;
};

/// Timer: directory wait `id` for `key` expired.
struct DirTimeout {
  std::string key;
  uint64_t id = 0;
};

/// RdmaNode -> its manager, once, right after publishing it on a port the OS picked: the name
/// (host:port) it gives in handles and errors. Later ones are ignored.
struct SetName {
  std::string name;
};

/// RdmaNode -> its manager, once at start: which actor to publish (the manager's facade).
struct GetFacade {};

/// RdmaNode -> its manager, once at start: the middleman actor that connects to other nodes
/// (CAF's, or the TLS one) and how long a connect may take, for reconnecting lost links
/// (ManagerState invariant 13). Without it a lost link leaves its peer down.
struct UseConnector {
  caf::io::middleman_actor connector;
  std::chrono::milliseconds timeout{0};
};

/// Timer: attempt `attempt` (from 1) to make the lost link to peer manager `key` again.
struct Reconnect {
  caf::actor_addr key;
  uint32_t attempt = 0;
};

/// DeviceMonitor thread -> manager: something happened to the RDMA device of domain
/// `incarnation` (events of a domain already replaced are ignored).
struct DeviceChanged {
  uint64_t incarnation = 0;
  uint8_t kind = 0;  ///< DeviceEventKind
  uint8_t port = 0;
  std::string what;
};

/// Timer: try to open the RDMA device again after it went away.
struct ReopenDevice {
  uint32_t attempt = 0;
};

/// Manager -> itself: a bounce buffer was freed outside release_slot; hand free ones to waiters.
struct StagingFreed {};

/// Timer: the oldest fetch waiting for peer `node`'s window may have reached its deadline.
struct WindowExpire {
  caf::node_id node;
};

/// Timer: ask peer `node` again to prove it read what it was sent (its last read_ack failed
/// while its connection stayed up).
struct WindowRetry {
  caf::node_id node;
};

/// Timer: the grace after a registrant's end (RegistrantWatch invariant 2) is over: report its
/// buffers still registered (`batch` names them).
struct OrphanCheck {
  uint64_t batch = 0;
};

/// The facade -> manager, in place of the trailing `left_ms` of a peer's store or atomic: when
/// the request reached this node (the facade took it) and the time its requester had left
/// then. The manager applies it only until `arrival + min(left_ms, max_timeout)`
/// (actors/transfer/chunk_path.h invariant 1).
struct OwnerDue {
  std::chrono::steady_clock::time_point arrival;
  uint32_t left_ms = 0;
};

/// The internal events, as the manager's fourth interface (audience: its own process only).
using manager_events_actor = caf::typed_actor<
    caf::reacts_to<OpDone>, caf::reacts_to<FenceDone>, caf::reacts_to<ReceiptLanded>,
    caf::reacts_to<ReceiptDue>, caf::reacts_to<OpTimeout>, caf::reacts_to<OpTick>,
    caf::reacts_to<StreamDone>, caf::reacts_to<StreamServed>, caf::reacts_to<StreamExpire>,
    caf::reacts_to<ChunkSent>, caf::reacts_to<LaneClosed>, caf::reacts_to<LaneIdle>,
    caf::reacts_to<DirTimeout>, caf::reacts_to<SetName>, caf::reacts_to<DeviceChanged>,
    caf::reacts_to<ReopenDevice>, caf::reacts_to<StagingFreed>, caf::reacts_to<WindowExpire>,
    caf::reacts_to<WindowRetry>, caf::reacts_to<UseConnector>, caf::reacts_to<Reconnect>,
    caf::reacts_to<OrphanCheck>, caf::replies_to<GetFacade>::with<caf::actor>,
    caf::replies_to<store_atom, BufferRef, uint64_t, ByteChunk, uint64_t, OwnerDue>::with<uint64_t>,
    caf::replies_to<store_list_atom, BufferRef, std::vector<PackedRange>, ByteChunk,
                    OwnerDue>::with<uint64_t>,
    caf::replies_to<atomic_atom, BufferRef, uint64_t, uint8_t, uint64_t, uint64_t,
                    OwnerDue>::with<uint64_t>>;

/// The manager's own handle type: the public interface plus its internal events.
using manager_impl_actor = rdma_manager_actor::extend_with<manager_events_actor>;

}  // namespace caf_rdma::detail

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(caf_rdma::detail::OpDone)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(caf_rdma::detail::FenceDone)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(caf_rdma::detail::ReceiptLanded)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(caf_rdma::detail::ReceiptDue)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(caf_rdma::detail::OpTimeout)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(caf_rdma::detail::OpTick)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(caf_rdma::detail::StreamDone)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(caf_rdma::detail::StreamServed)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(caf_rdma::detail::StreamExpire)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(caf_rdma::detail::ChunkSent)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(caf_rdma::detail::LaneClosed)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(caf_rdma::detail::LaneIdle)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(caf_rdma::detail::DirTimeout)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(caf_rdma::detail::SetName)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(caf_rdma::detail::DeviceChanged)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(caf_rdma::detail::ReopenDevice)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(caf_rdma::detail::StagingFreed)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(caf_rdma::detail::GetFacade)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(caf_rdma::detail::WindowExpire)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(caf_rdma::detail::WindowRetry)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(caf_rdma::detail::OrphanCheck)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(caf_rdma::detail::UseConnector)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(caf_rdma::detail::Reconnect)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(caf_rdma::detail::OwnerDue)
