// The RdmaManagerActor interface: one manager per actor system (node). Actors send their
// requests to their own node's manager; the manager initiates one-sided RDMA (or, on the
// fallback path, moves the bytes in CAF messages, or over its stream channel for large host
// transfers) and replies when the data is in place.
//
// Every error reply is a caf::error of category "caf_rdma" whose code is an ErrorCode
// (`error_code(err)`) and whose message (`error_message(err)`) names what was wrong.
#pragma once

#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <string>
#include <vector>

#include "actors/direct_lane.h"
#include "actors/rdma_atoms.h"
#include "actors/rdma_messages.h"

namespace caf_rdma {

using rdma_manager_actor = caf::typed_actor<
    /// Registers [addr, addr + size) with `access` (BufferAccess) and returns its handle.
    /// The memory must stay valid until the buffer is released. Errors: invalid_argument (null,
    /// zero size, bad access), ibverbs_call (ibv_reg_mr, with errno).
    caf::replies_to<request_buffer_atom, uint64_t, uint64_t, uint8_t>::with<BufferHandle>,

    /// Releases buffer `id`: its region is deregistered (when no other buffer shares it); any
    /// later transfer naming it fails with `released`. Replies with the buffer's size.
    /// Errors: unknown_buffer, released.
    caf::replies_to<release_buffer_atom, uint64_t>::with<uint64_t>,

    /// Runs one read or write; `op.local` must be owned by this manager. The last argument is
    /// the timeout in milliseconds. Replies when the bytes are in place, with the path used.
    /// Errors: unknown_buffer, released, out_of_bounds, size_mismatch, invalid_argument
    /// (zero length, read-only destination, local buffer owned elsewhere), timeout,
    /// peer_unavailable (the owner is down or unreachable; names it), work_completion
    /// (ibverbs status string; when the NIC refused the remote access, the owner is asked why
    /// and its answer is the error: released, unknown_buffer, out_of_bounds), no_device (RDMA
    /// forced without a device), data_mismatch (verify mode: the two sides differ after the
    /// transfer). An op that failed only because its queue pair entered ERR for another op's
    /// error is retried once on a new queue pair.
    caf::replies_to<transfer_atom, TransferOp, uint32_t>::with<TransferReply>,

    /// Runs several transfers together; one outcome per op, in order.
    caf::replies_to<batch_atom, std::vector<TransferOp>,
                    uint32_t>::with<std::vector<TransferOutcome>>,

    /// Manager to manager: creates (or replaces) the queue pair for the sender's manager,
    /// connects it to the sender's info and replies with ours.
    caf::replies_to<qp_connect_atom, QpInfoMsg>::with<QpInfoMsg>,

    /// Manager to manager (fallback transport): the owner reads `length` bytes at `offset` of
    /// buffer `id`. Errors as for transfers, checked by the owner.
    caf::replies_to<fetch_atom, uint64_t, uint64_t, uint64_t>::with<ByteChunk>,

    /// Manager to manager (fallback transport): the owner writes the bytes at `offset` of buffer
    /// `id` (which must be read-write). Replies with the number of bytes stored.
    caf::replies_to<store_atom, uint64_t, uint64_t, ByteChunk>::with<uint64_t>,

    /// Manager to manager (fallback transport, transfers of at least `stream_min_bytes`): the
    /// owner checks `length` bytes at `offset` of buffer `id` for a read (kind 0) or write (1),
    /// holds the buffer, and grants one stream transfer of them within `timeout ms`. Errors as
    /// for fetch/store.
    caf::replies_to<stream_grant_atom, uint64_t, uint64_t, uint64_t, uint8_t,
                    uint32_t>::with<StreamGrantMsg>,

    /// A direct lane to the owner of `remote` (same process only: the grant holds the lane):
    /// a queue pair of its own, connected within the timeout (ms), that the calling thread
    /// drives itself (RdmaClient does). Errors: no_device (no RDMA here, fallback mode, the
    /// owner has no RDMA or is on another fabric), timeout, peer_unavailable,
    /// resource_exhausted (the owner has too many lanes from us).
    caf::replies_to<lane_open_atom, BufferHandle, uint32_t>::with<LaneGrant>,

    /// Manager to manager: the initiator closed its direct lane `id`; drop our side.
    caf::reacts_to<lane_drop_atom, uint64_t, caf::actor>,

    /// Manager to manager (and RdmaClient to an owner): would the owner allow a `kind`
    /// (TransferKind) access to [offset, offset + length) of its buffer `id`? Asked after the NIC
    /// refused one (remote access error), so the requester can report `released`,
    /// `unknown_buffer`, `out_of_bounds` or `invalid_argument` (read-only) naming the buffer
    /// instead of the bare work-completion status. Success: the owner sees nothing wrong.
    caf::replies_to<buf_check_atom, uint64_t, uint64_t, uint64_t, uint8_t>::with<TransferOutcome>,

    /// Manager to manager (verify mode): the owner's checksum (`range_checksum`) of
    /// [offset, offset + length) of its buffer `id`. Errors as for fetch.
    caf::replies_to<checksum_atom, uint64_t, uint64_t, uint64_t>::with<uint64_t>,

    /// RdmaClient to its manager (after a direct lane's op): the owner of `remote` answers as
    /// for buf_check / buf_sum; peer_unavailable naming the owner as soon as it is known to be
    /// down (not at the timeout).
    caf::replies_to<ask_check_atom, BufferHandle, uint64_t, uint64_t,
                    uint8_t>::with<TransferOutcome>,
    caf::replies_to<ask_sum_atom, BufferHandle, uint64_t, uint64_t>::with<uint64_t>,

    /// Why the peer manager is down ("" while it is up or unknown).
    caf::replies_to<peer_state_atom, caf::actor>::with<std::string>,

    /// RdmaNode to its manager, once, before anyone can know its port: the name (host:port) it
    /// gives in handles and errors. Ignored after the first.
    caf::reacts_to<set_name_atom, std::string>,

    /// Counters of this manager.
    caf::replies_to<stats_atom>::with<ManagerStats>,

    /// Directory: stores a handle under a name (overwrites), so other processes can find it.
    caf::replies_to<dir_put_atom, std::string, BufferHandle>::with<bool>,

    /// Directory: the handle stored under `name`, waiting up to the given milliseconds for it to
    /// appear. Errors: timeout.
    caf::replies_to<dir_get_atom, std::string, uint32_t>::with<BufferHandle>,

    /// Internal (completion poller -> manager): op `index` of transfer `ticket` completed.
    /// The last value is the OpFault of a failed op (retry on a new QP, or ask the owner).
    caf::reacts_to<op_done_atom, uint64_t, uint32_t, TransferOutcome, uint8_t>,

    /// Internal: transfer `ticket` hit its drain deadline after a timeout (stage 1).
    caf::reacts_to<op_timeout_atom, uint64_t, uint32_t>,

    /// Internal: sweep of the transfers' deadlines scheduled for the given steady-clock time.
    caf::reacts_to<op_tick_atom, int64_t>,

    /// Internal: the stream transfer of op `index` of transfer `ticket` (local buffer id) ended.
    caf::reacts_to<stream_done_atom, uint64_t, uint32_t, uint64_t, TransferOutcome>,

    /// Internal: a stream grant on buffer `id` was used; the bytes moved (0 on failure).
    caf::reacts_to<stream_served_atom, uint64_t, uint64_t>,

    /// Internal: stream grant `token` on buffer `id` reached its deadline.
    caf::reacts_to<stream_expire_atom, uint64_t, uint64_t>,

    /// Internal: direct lane `id` of this manager is gone.
    caf::reacts_to<lane_close_atom, uint64_t>,

    /// Internal: a direct lane ended its last use of released buffer `id`.
    caf::reacts_to<lane_idle_atom, uint64_t>,

    /// Internal: a directory wait expired.
    caf::reacts_to<dir_timeout_atom, std::string, uint64_t>>;

}  // namespace caf_rdma
