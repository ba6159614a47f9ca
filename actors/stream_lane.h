// StreamLane: RdmaClient's way around its manager for transfers on the fallback: the calling
// thread moves the bytes over a pooled connection straight to the owner's stream channel, in
// one request authorized by the remote handle itself ("CRH1", components/stream_protocol.h):
// no grant asked over CAF first, no actor hop on either side. The owner's stream server checks
// the handle with `handle_authorizer` (secret, bounds, read-write, not released) and holds the
// buffer until the bytes moved or its release stopped them (the release rule:
// components/withdrawal.h).
//
// Invariants:
//  1. A stream lane moves only reads and writes between host memory of this node and host
//     memory of another node whose handle names its stream channel, and only when the two
//     handles do not both carry RDMA (those are RDMA's) and the op (a list: its bytes in all) is
//     at least its manager's stream_min_bytes: the manager's own rule, asked of the same
//     function (actors/transfer/path_choice.h invariant 6, lane_path); and only to the stream
//     endpoint the owner's own grant named (actors/stream_endpoints.h: the handle's fields never
//     choose where the secret goes; the first op to an owner goes through the manager, whose grant
//     teaches it); anything else (atomics, notify writes, GPU memory, this node's own buffers,
//     verify mode) goes through the manager.
//  2. Both buffers are held (DirectRegistry::acquire_host) while their bytes move (DirectRegistry
//     invariant 2): a release of the requester's buffer waits for the lane's op, as for the
//     manager's; the owner's release stops it after the call under way (stream_server.h invariant
//     14).
//  3. What the lane cannot decide (a local handle it does not know, or whose secret is not the
//     one registered; an owner that does not know the handle, or refuses the request before
//     taking it: StreamEnd::refused) goes to the manager, which answers with its own checks and
//     texts: the lane never invents an error the manager would word differently. Errors of
//     the checks both run (checked_length) and of the bytes on their way are the lane's.
//  4. Thread-safe: any number of clients' threads use one lane at once.
//  5. A list (transfer_plan.h) takes the lane under invariant 1's rule for its two handles and
//     moves in list requests ("CRL1"/"CML2", stream_protocol.h) of up to kMaxListRanges
//     ranges, each authorized by the handle for the span its ranges lie in; a request ends
//     before the next starts, so the ranges of the requests that ended well are those landed
//     (transfer_plan.h invariant 4).
//  6. A transfer or list with a stop signal (a CancelToken's) stops when asked: before a request
//     starts, or in the one running, whose connection the stream client shuts down and whose
//     owner it hears end its side (components/stream_client.h invariant 8). It answers
//     `cancelled` only then, when no byte of it moves any more; a request that ended well
//     before the stop stays landed (a list's `done`), one whose end could not be learnt
//     answers that error, never `cancelled`.
#pragma once

#include <caf/actor_addr.hpp>
#include <caf/allowed_unsafe_message_type.hpp>

#include <chrono>
#include <memory>
#include <optional>

#include "actors/direct_registry.h"
#include "actors/lane_grants.h"
#include "actors/rdma_messages.h"
#include "actors/stream_endpoints.h"
#include "actors/transfer_plan.h"
#include "components/stream_client.h"
#include "components/stream_server.h"

namespace caf_rdma {

class StreamLane {
public:
  StreamLane(std::shared_ptr<DirectRegistry> registry,
             std::shared_ptr<const StreamEndpoints> endpoints, std::shared_ptr<StreamClient> client,
             caf::actor_addr manager, uint64_t stream_min_bytes);

  /// Moves `op` within `timeout_ms`; nothing: the manager moves it (invariants 1 and 3).
  /// `stop`: null, or a CancelToken's signal (invariant 6).
  std::optional<Result<TransferReply>> transfer(const TransferOp& op, uint32_t timeout_ms,
                                                const StopSignal* stop = nullptr);

  /// Moves ranges [from, plan.size()) of `plan` by `deadline`, in list requests of up to
  /// kMaxListRanges ranges (invariant 5); nothing: the lane takes none of it (not carries(),
  /// no endpoint of the owner known yet, or a local handle it cannot hold), the manager moves
  /// them. Else how far it got: a request the owner
  /// refused before taking it (invariant 3) leaves the ranges from `done` on to the manager.
  std::optional<ListEnd> post_list(const TransferPlan& plan, size_t from,
                                   std::chrono::steady_clock::time_point deadline,
                                   const StopSignal* stop = nullptr);

  /// Invariant 1's rule for an op of `kind` (`notify`: a notify write) of `bytes` bytes
  /// between `local` and `remote` (a lane that knows the owner's endpoint takes it).
  bool carries(const BufferHandle& local, const BufferHandle& remote, uint8_t kind, bool notify,
               uint64_t bytes) const;
  /// Invariant 1's rule for a list: its two handles and its bytes in all.
  bool carries(const TransferPlan& plan) const;
  /// Whether a stream lane of any threshold could carry `plan` (its handles alone).
  static bool may_carry(const TransferPlan& plan);
  /// The threshold of its manager's it applies (ManagerOptions::stream_min_bytes).
  uint64_t stream_min_bytes() const { return stream_min_bytes_; }

private:
  /// The lane's hold on local buffer `local` (DirectRegistry::acquire_host), if its handle is
  /// the one registered; nothing otherwise (the manager names what is wrong).
  std::optional<DirectRegistry::Entry> hold(const BufferHandle& local);
  /// Ends this lane's use of local buffer `id` (a release may wait for it).
  void done_with(uint64_t id);
  /// Counts and records (telemetry) one op that ended with `st`, having moved `bytes`.
  void record(const TransferOp& op, const Status& st, uint64_t bytes,
              std::chrono::steady_clock::time_point started);

  std::shared_ptr<DirectRegistry> registry_;
  std::shared_ptr<const StreamEndpoints> endpoints_;
  std::shared_ptr<StreamClient> client_;
  caf::actor_addr manager_;
  const uint64_t stream_min_bytes_;
};

/// A stream job to `remote`'s owner authorized by the handle ("CRH1"): to `endpoint`, the one
/// the owner named in a grant (actors/stream_endpoints.h), with the handle's id and secret, at
/// `remote_offset`, for `timeout_ms`, of class `priority`. The caller fills in direction, memory,
/// length and deadline. The lane's and the manager's stream path's requests by handle.
StreamJob job_by_handle(const StreamEndpoint& endpoint, const BufferHandle& remote,
                        uint64_t remote_offset, uint32_t timeout_ms, Priority priority);

/// The owner's side: checks a request by handle against the buffers of `registry` and holds
/// the buffer until the stream server is done with it (a release stops it after the socket call
/// under way: components/stream_server.h invariant 14); the release waiting for that is told
/// through `manager` (LaneIdle). A request it cannot allow is refused with not_found, which sends
/// its client to the manager (invariant 3). `max_timeout` bounds how long one request may hold the
/// buffer (ManagerOptions::max_timeout).
StreamServer::Authorizer handle_authorizer(std::shared_ptr<DirectRegistry> registry,
                                           caf::actor_addr manager,
                                           std::chrono::milliseconds max_timeout);

}  // namespace caf_rdma
