// Every atom of the RdmaManagerActor interface (CAF 0.17: at most 10 characters), grouped by
// who sends it (actors/request_audience.h holds the table of each atom's name and audience).
//
// Invariants:
//  1. The C++ name is the request's name plus `_atom`, and the request's name is the one the
//     table gives (and errors show); the wire name in `caf::atom` may be shorter (10 characters).
//  2. Every atom here but write_notice_atom (which watchers receive) is in exactly one of the
//     manager's interfaces (static_assert in actors/request_audience.h).
#pragma once

#include <caf/atom.hpp>

namespace caf_rdma {

// -- the node's own actors (LocalRequests) -----------------------------------------------------

/// Register a buffer: (addr, size, access) -> BufferHandle.
using request_buffer_atom = caf::atom_constant<caf::atom("req_buf")>;
/// Release a buffer: (id) -> bytes released.
using release_buffer_atom = caf::atom_constant<caf::atom("rel_buf")>;
/// One read or write: (TransferOp, timeout ms) -> TransferReply.
using transfer_atom = caf::atom_constant<caf::atom("transfer")>;
/// Several reads/writes: (vector<TransferOp>, timeout ms) -> vector<TransferOutcome>.
using batch_atom = caf::atom_constant<caf::atom("batch")>;
/// A transfer list (TransferListMsg), moved by a worker of the manager's (list_worker.h).
using transfer_list_atom = caf::atom_constant<caf::atom("xfer_list")>;
/// Stop a transfer, batch or list the sender asked (its request id): (uint64_t), no answer; the
/// request's own answer says how it ended (actors/cancel_request.h).
using cancel_atom = caf::atom_constant<caf::atom("cancel")>;
/// Direct lanes: (remote handle, timeout ms) -> LaneGrant, a queue pair of its own to the
/// handle's owner for a thread of this process (RdmaClient).
using lane_open_atom = caf::atom_constant<caf::atom("lane_open")>;
/// Stream lanes: () -> StreamLaneGrant, the way of this process's RdmaClients straight to
/// owners' stream channels (actors/stream_lane.h).
using stream_lane_atom = caf::atom_constant<caf::atom("str_lane")>;
/// RdmaClient to its manager: ask the owner of a handle about a refused access (as
/// buf_check) or for its checksum of a range (as buf_sum), failing with peer_unavailable as soon
/// as the owner is known to be down.
using ask_check_atom = caf::atom_constant<caf::atom("ask_check")>;
using ask_sum_atom = caf::atom_constant<caf::atom("ask_sum")>;
/// Directory: (name, BufferHandle) -> bool; lets processes exchange handles by name.
using dir_put_atom = caf::atom_constant<caf::atom("dir_put")>;
/// Write notifications: (buffer id, watcher) -> bool; the watcher (an invalid actor: none)
/// receives a WriteNotice after each write into the buffer that asked for one.
using watch_writes_atom = caf::atom_constant<caf::atom("watch_wr")>;

// -- anyone: read-only questions (ManagerQuestions) --------------------------------------------

/// Directory: (name, wait ms) -> BufferHandle, waiting up to `wait ms` for the name to appear.
using dir_get_atom = caf::atom_constant<caf::atom("dir_get")>;
/// Why a peer manager is down: (peer) -> reason, "" while it is up.
using peer_state_atom = caf::atom_constant<caf::atom("peer_state")>;
/// Counters: () -> ManagerStats.
using stats_atom = caf::atom_constant<caf::atom("stats")>;

// -- peer managers, through the facade (PeerProtocol) ------------------------------------------

/// Manager-to-manager queue pair handshake: (QpInfoMsg) -> QpInfoMsg.
using qp_connect_atom = caf::atom_constant<caf::atom("qp_conn")>;
/// Fallback transport, owner side: (id, offset, length) -> bytes.
using fetch_atom = caf::atom_constant<caf::atom("fetch")>;
/// Fallback transport, owner to the sender of its fetches: (token) -> the same token, answered
/// once every message the owner sent before it was read (ManagerState invariant 12).
using read_ack_atom = caf::atom_constant<caf::atom("read_ack")>;
/// Fallback transport, owner side: (id, offset, bytes) -> bytes stored.
using store_atom = caf::atom_constant<caf::atom("store")>;
/// Fallback transport, owner side, a packed fetch: (id, ranges) -> their bytes, in order.
using fetch_list_atom = caf::atom_constant<caf::atom("fetch_ls")>;
/// Fallback transport, owner side, a packed store: (id, ranges, bytes) -> bytes stored.
using store_list_atom = caf::atom_constant<caf::atom("store_ls")>;
/// Fallback transport, owner side: (id, offset, length, kind, timeout ms) -> StreamGrantMsg.
using stream_grant_atom = caf::atom_constant<caf::atom("str_grant")>;
/// Close your imports of this GPU export (its owner released the buffer): (export handle) ->
/// imports closed (actors/manager/gpu_exports.h invariant 3).
using gpu_close_atom = caf::atom_constant<caf::atom("gpu_close")>;
/// Manager to manager: the initiator (the sender) closed a lane (lane id).
using lane_drop_atom = caf::atom_constant<caf::atom("lane_drop")>;
/// Manager to manager: the sender's RDMA device went away (why).
using device_gone_atom = caf::atom_constant<caf::atom("dev_gone")>;
/// Manager to manager: the owner's view of an access to one of its buffers (after the NIC
/// refused it): (id, offset, length, kind) -> TransferOutcome.
using buf_check_atom = caf::atom_constant<caf::atom("buf_check")>;
/// Fallback transport, owner side: an atomic on the 8-byte word at `offset` of the buffer:
/// (id, offset, kind, operand, compare) -> the word's old value.
using atomic_atom = caf::atom_constant<caf::atom("atomic")>;
/// Manager to manager (verify mode): the owner's checksum of a range of its buffer:
/// (id, offset, length) -> checksum.
using buf_sum_atom = caf::atom_constant<caf::atom("buf_sum")>;
/// Manager to manager, writer to owner, after a write that asked for a notification put its
/// bytes in place: (id, offset, length, tag, writer's name) -> notices of the writer's node
/// now waiting for the watcher.
using notice_atom = caf::atom_constant<caf::atom("notice")>;

// -- what a buffer's watcher receives (not a request to the manager) ---------------------------

/// (WriteNotice), as a request from its owner's manager: see WriteNotice.
using write_notice_atom = caf::atom_constant<caf::atom("wr_notice")>;

}  // namespace caf_rdma
