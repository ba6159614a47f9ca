// The RdmaManagerActor interface: one manager per actor system (node). Actors send their
// requests to their own node's manager; the manager initiates one-sided RDMA (or, on the
// fallback path, moves the bytes over its stream channel, GPU memory through bounce buffers, or in
// CAF messages)
// and replies when the data is in place.
//
// The interface is three typed interfaces, one per audience, composed with `extend_with`:
//  - `local_requests_actor`: what the node's own actors send (applications, RdmaClient);
//  - `manager_questions_actor`: read-only questions anyone may ask;
//  - `peer_protocol_actor`: what peer managers send (through the facade); applications do not.
// actors/request_audience.h holds the table of every request's atom, name and audience, from
// which the facade's classification and the manager's local-only check are derived.
//
// Other nodes know a manager by the facade its node publishes (actors/peer_facade.h), which
// serves them the same interface: the peer protocol and the read-only questions go through to
// the manager, the requests of the node's own actors are refused.
//
// Every error reply is a caf::error of category "caf_rdma" whose code is an ErrorCode
// (`error_code(err)`) and whose message (`error_message(err)`) names what was wrong.
//
// Invariants:
//  1. Every atom of actors/rdma_atoms.h is in exactly one of the three interfaces, and the
//     table of actors/request_audience.h gives it that interface's audience (static_assert).
//  2. `rdma_manager_actor` has the same signatures as before the split (CAF compares the set of
//     signatures when a peer connects with `remote_actor<rdma_manager_actor>`).
#pragma once

#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <string>
#include <vector>

#include "actors/lane_grants.h"
#include "actors/rdma_atoms.h"
#include "actors/rdma_messages.h"

namespace caf_rdma {

/// The node's own actors only (see docs/security.md): requests that act on this
/// node's memory. From an actor of another node (or an anonymous sender) they fail with
/// permission_denied naming the request and the sender's node.
using local_requests_actor = caf::typed_actor<

    /// Registers [addr, addr + size) with `access` (BufferAccess) and returns its handle, which
    /// carries a fresh 128-bit secret: whoever holds the handle may access the buffer (within
    /// its access rights), nobody else. The memory must stay valid until the buffer is released.
    /// Errors: invalid_argument (null, zero size, addr + size overflows, bad access, or host
    /// memory not mapped with that access: checked in /proc/self/maps by a node without a
    /// device, naming the first bad byte), ibverbs_call (ibv_reg_mr, with errno: EFAULT for
    /// memory the device cannot pin).
    caf::replies_to<request_buffer_atom, uint64_t, uint64_t, uint8_t>::with<BufferHandle>,

    /// Releases buffer `id`: its region is deregistered (when no other buffer shares it); any
    /// later transfer naming it fails with `released`. Replies with the buffer's size once no
    /// transfer, grant or lane uses the memory any more. Errors: unknown_buffer, released.
    caf::replies_to<release_buffer_atom, uint64_t>::with<uint64_t>,

    /// Runs one read or write; `op.local` must be owned by this manager. The last argument is
    /// the timeout in milliseconds (cut to ManagerOptions::max_timeout). Replies when the bytes
    /// are in place, with the path used.
    /// Errors: unknown_buffer, released, out_of_bounds, size_mismatch, invalid_argument
    /// (zero length, read-only destination, local buffer owned elsewhere), permission_denied
    /// (the remote handle's secret is not its owner's), timeout, peer_unavailable (the owner is
    /// down or unreachable; names it), work_completion (ibverbs status string; when the NIC
    /// refused the remote access, the owner is asked why and its answer is the error: released,
    /// unknown_buffer, out_of_bounds), no_device (RDMA forced without a device), data_mismatch
    /// (verify mode: the two sides differ after the transfer). An op that failed only because
    /// its queue pair entered ERR for another op's error is retried once on a new queue pair.
    caf::replies_to<transfer_atom, TransferOp, uint32_t>::with<TransferReply>,

    /// Runs several transfers together; one outcome per op, in order.
    caf::replies_to<batch_atom, std::vector<TransferOp>,
                    uint32_t>::with<std::vector<TransferOutcome>>,

    /// Moves a transfer list (actors/transfer_plan.h) within the timeout (ms), as
    /// RdmaClient::post does: ranges validated first (refused whole, naming the range), then
    /// the stream lane, or batches; the outcome says which ranges landed. Run by a worker
    /// thread of its own (actors/list_worker.h), so the manager goes on serving meanwhile.
    caf::replies_to<transfer_list_atom, TransferListMsg, uint32_t>::with<ListOutcome>,

    /// Stops the transfer, batch or list its sender asked under that request id (the 60 bits of
    /// CAF's message id: actors/cancel_request.h says how to send it). No answer of its own:
    /// the request's answer says how it ended, `cancelled` or what it did before the cancel
    /// reached it (docs/guarantees.md, "Cancel"). Unknown or ended requests: nothing happens.
    /// Asked as a request, it answers nothing (an empty message), or permission_denied from an
    /// actor of another node.
    caf::reacts_to<cancel_atom, uint64_t>,

    /// A direct lane to the owner of `remote` (same process only: the grant holds the lane):
    /// a queue pair of its own, connected within the timeout (ms), that the calling thread
    /// drives itself (RdmaClient does). Errors: no_device (no RDMA here, fallback mode, the
    /// owner has no RDMA or is on another fabric), timeout, peer_unavailable,
    /// resource_exhausted (the owner has too many lanes from us).
    caf::replies_to<lane_open_atom, BufferHandle, uint32_t, uint8_t>::with<LaneGrant>,

    /// The stream lane of this process (same process only: the grant holds it), by which
    /// RdmaClient moves fallback reads and writes between host memory straight over owners'
    /// stream channels; a null lane where this manager has no stream channel or verifies
    /// every transfer.
    caf::replies_to<stream_lane_atom>::with<StreamLaneGrant>,

    /// RdmaClient to its manager (after the NIC failed a direct lane's op): the owner of
    /// `remote` answers as for buf_check, within the last argument's milliseconds (what is left
    /// of the op's time, as the manager's own RDMA path asks within its op's); peer_unavailable
    /// naming the owner as soon as it is known to be down (not at the timeout).
    caf::replies_to<ask_check_atom, BufferHandle, uint64_t, uint64_t, uint8_t,
                    uint32_t>::with<TransferOutcome>,

    /// RdmaClient to its manager (verify mode, after a direct lane's op): the owner of `remote`
    /// answers as for buf_sum; peer_unavailable as for ask_check.
    caf::replies_to<ask_sum_atom, BufferHandle, uint64_t, uint64_t>::with<uint64_t>,

    /// Directory: stores a handle under a name (replacing one stored before), so other
    /// processes can find it; whoever can ask this manager can then use the handle: publish
    /// only what they may use. The directory belongs to this node: only its actors put names.
    /// Errors: invalid_argument (empty name, longer than kMaxDirectoryName),
    /// resource_exhausted (kMaxDirectoryEntries names).
    caf::replies_to<dir_put_atom, std::string, BufferHandle>::with<bool>,

    /// Write notifications: after each write into buffer `id` (owned here) that asks for one
    /// (TransferOp::notify), on any path, `watcher` receives `(write_notice_atom, WriteNotice)`
    /// once the bytes are in place; an invalid actor stops them (so does the release). One
    /// watcher per buffer: a second call replaces the first. Errors: unknown_buffer, released,
    /// invalid_argument (a buffer of another node).
    caf::replies_to<watch_writes_atom, uint64_t, caf::actor>::with<bool>>;

/// Anyone (local actors and peer nodes): read-only questions.
using manager_questions_actor = caf::typed_actor<

    /// Directory: the handle stored under `name`, waiting up to the given milliseconds (cut to
    /// max_timeout) for it to appear. Errors: timeout, resource_exhausted (kMaxDirectoryWaiters
    /// waiting, or kMaxDirectoryWaitersPerNode from the requester's node).
    caf::replies_to<dir_get_atom, std::string, uint32_t>::with<BufferHandle>,

    /// Why the peer manager is down ("" while it is up or unknown); while a lost link to it
    /// is being made again, "link lost (...); reconnecting" (ManagerState invariant 13).
    caf::replies_to<peer_state_atom, caf::actor>::with<std::string>,

    /// Counters of this manager; asked by another node, without `registrants` (which names
    /// this node's actors).
    caf::replies_to<stats_atom>::with<ManagerStats>>;

/// The peer protocol (manager to manager, through the facades; applications do not send
/// these). Every access names its buffer with a BufferRef (id and the handle's secret), checked
/// by the owner in constant time; a wrong secret is permission_denied. Requests come sealed
/// with a PeerNonce, which the facade strips (actors/peer_facade.h invariant 6).
using peer_protocol_actor = caf::typed_actor<

    /// Creates (or replaces) the queue pair for the sender's manager (the actor that sent the
    /// request, not one named in the message), connects it to the sender's info and replies
    /// with ours.
    caf::replies_to<qp_connect_atom, QpInfoMsg>::with<QpInfoMsg>,

    /// Fallback transport: the owner reads `length` bytes (at most kMaxChunkBytes) at `offset`
    /// of the buffer. Errors as for transfers, checked by the owner. The answers the owner
    /// served a peer node count against that peer's window (ManagerOptions::peer_window_bytes)
    /// and the owner's total (total_window_bytes) until the peer answered a read_ack sent after
    /// them; a fetch beyond waits, in order, up to window_wait. Errors also: resource_exhausted
    /// naming the peer and the window (it waited window_wait, or the peer already has a window's
    /// worth of fetches waiting), peer_unavailable (the peer's connection closed while it
    /// waited).
    caf::replies_to<fetch_atom, BufferRef, uint64_t, uint64_t>::with<ByteChunk>,

    /// Fallback transport, sent by the owner of a buffer to whoever fetched from it, after the
    /// answers: echo `token`. The answer can only come once everything the owner sent before
    /// it was read, which proves those answers no longer sit in the owner's memory.
    caf::replies_to<read_ack_atom, uint64_t>::with<uint64_t>,

    /// Fallback transport: the owner writes the bytes at `offset` of the buffer (which must be
    /// read-write). Replies with the number of bytes stored. `receipt` not 0: a chunk of a
    /// notify write whose notice will claim `receipt` (actors/manager/write_receipts.h): the
    /// owner records what of it landed. `left_ms`: the writer's time left when it sent the
    /// chunk (cut to max_timeout); an owner that takes the chunk up later than that after it
    /// reached the owner's node stores nothing and answers `timeout` (the writer may have
    /// answered already: actors/transfer/chunk_path.h invariant 1).
    caf::replies_to<store_atom, BufferRef, uint64_t, ByteChunk, uint64_t, uint32_t>::with<uint64_t>,

    /// Fallback transport, packed (actors/transfer/chunk_path.h invariant 5): the owner reads
    /// `ranges` of the buffer (1 to kMaxPackedRanges, at most kMaxChunkBytes in all) and answers
    /// their bytes one after the other. Every range is checked before any byte is copied: one
    /// bad range refuses the whole request, naming it. Windows as for fetch (charged the total).
    caf::replies_to<fetch_list_atom, BufferRef, std::vector<PackedRange>>::with<ByteChunk>,

    /// Fallback transport, packed: the owner writes `bytes` into `ranges` of the buffer, the
    /// first range's length of them into the first range and so on (their lengths add up to the
    /// chunk's size). All ranges are checked first, and a late request is refused whole, as for
    /// store: into host memory every range is stored or none (into GPU memory a failed copy
    /// says how many bytes landed before it; requesters pack no writes to GPU memory). Replies
    /// with the number of bytes stored.
    caf::replies_to<store_list_atom, BufferRef, std::vector<PackedRange>, ByteChunk,
                    uint32_t>::with<uint64_t>,

    /// Fallback transport (transfers of at least `stream_min_bytes`): the owner checks `length`
    /// bytes at `offset` of the buffer for a read (kind 0) or write (1), holds the buffer, and
    /// grants one stream transfer of them within `timeout ms` (cut to max_timeout). Errors as
    /// for fetch/store; resource_exhausted when the buffer or the peer has too many grants.
    caf::replies_to<stream_grant_atom, BufferRef, uint64_t, uint64_t, uint8_t,
                    uint32_t>::with<StreamGrantMsg>,

    /// The owner of a GPU buffer the sender's host shares released it: close this node's imports
    /// of its export (the handle's bytes), waiting a moment for copies that hold one; replies
    /// with how many it closed (actors/manager/gpu_exports.h invariant 3).
    caf::replies_to<gpu_close_atom, std::string>::with<uint64_t>,

    /// The initiator (the sender) closed its direct lane `id`; drop our side.
    caf::reacts_to<lane_drop_atom, uint64_t>,

    /// The sender's RDMA device went away (why): the queue pairs and direct lanes between us
    /// are dead; ours are aborted at once (ops on them fail now, not after the ACK timeout).
    /// It affects nothing but the sender's own connections.
    caf::reacts_to<device_gone_atom, std::string>,

    /// Would the owner allow a `kind` (TransferKind) access to [offset, offset + length) of the
    /// buffer? Asked after the NIC refused one (remote access error), so the requester can
    /// report `released`, `unknown_buffer`, `out_of_bounds` or `invalid_argument` (read-only)
    /// naming the buffer instead of the bare work-completion status. Success: the owner sees
    /// nothing wrong.
    caf::replies_to<buf_check_atom, BufferRef, uint64_t, uint64_t, uint8_t>::with<TransferOutcome>,

    /// Verify mode: the owner's checksum (`range_checksum`) of [offset, offset + length) of the
    /// buffer. Errors as for fetch.
    caf::replies_to<buf_sum_atom, BufferRef, uint64_t, uint64_t>::with<uint64_t>,

    /// Fallback transport: the owner applies an atomic of `kind` (TransferKind: fetch-add with
    /// `operand` as the addend, or compare-swap of `operand` for `compare`) to the 8-byte word
    /// at `offset` of the buffer (read-write, host memory, the word 8-byte aligned) with one
    /// CPU atomic, and replies with the word's old value. Errors as for store (`left_ms` as
    /// there: a late atomic is not applied and answers `timeout`); invalid_argument for a
    /// misaligned word, GPU memory or a kind that is not an atomic.
    caf::replies_to<atomic_atom, BufferRef, uint64_t, uint8_t, uint64_t, uint64_t,
                    uint32_t>::with<uint64_t>,

    /// Write notifications, writer to owner, once a write that asked for one (TransferOp::notify)
    /// put its bytes in place: the owner checks the access as for a store of
    /// [offset, offset + length), claims the write's `receipt`, its own record that the write
    /// landed (actors/manager/write_receipts.h: the stream grant's token, the receipt its
    /// chunks carried, or the immediate of its RDMA WRITE WITH IMMEDIATE), sends its watcher the
    /// WriteNotice (`tag`, the sender's node, `writer` as the sender names itself) and replies
    /// with the notices of the sender's node that wait for the watcher's answer. Errors as for
    /// store; invalid_argument (nobody watches the buffer), permission_denied (no such receipt
    /// of the sender's node, or not for that range), resource_exhausted (kMaxPendingNotices
    /// from the sender's node, or kMaxPendingNoticesTotal, waiting for watchers or receipts).
    caf::replies_to<notice_atom, BufferRef, uint64_t, uint64_t, uint64_t, uint64_t,
                    std::string>::with<uint64_t>>;

/// The manager, as its node's actors know it (RdmaNode::manager) and as peers know its facade.
using rdma_manager_actor =
    local_requests_actor::extend_with<manager_questions_actor, peer_protocol_actor>;

}  // namespace caf_rdma
