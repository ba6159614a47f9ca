// StreamPath: the fallback's TCP stream channel, requester side: the op goes to the owner's
// stream server authorized by its handle, or with a token the owner granted for it
// (stream_grant), and this node's StreamClient moves the bytes between the local buffer and
// that server, straight from and into the buffers' memory (GPU memory through its threads'
// bounce buffers).
// The owner side (grants, the server) is actors/manager/stream_grants.h.
//
// Invariants:
//  1. A running stream job holds the local buffer (in_use) until it no longer touches its
//     memory; a transfer that timed out, or whose peer went down, is answered only then
//     (StreamDone), never while the job may still write into the buffer.
//  2. Manager invariant 11: a job its owner refused before taking the request moved no byte and
//     can move none later, so the op is moved in CAF chunks instead (ChunkPath::take_over),
//     unless its transfer timed out meanwhile or its peer is known to be down (or its link
//     lost). A job that failed after its owner took the request is not redone.
//  3. An owner without a stream channel (grant port 0), or with enough grants out
//     (resource_exhausted), gets chunks: the first from then on, the second for this op; a
//     grant of GPU memory answered port 0 (an owner that does not stage it on its stream
//     channel) for this op only.
//  4. An op whose owner's stream endpoint is known here (actors/stream_endpoints.h: learned
//     from that owner's earlier grant, never from the handle's fields) goes by handle, as
//     RdmaClient's stream lane does ("CRH1": the owner checks secret, bounds, access and
//     release itself), with no grant round trip over CAF; the first op to an owner, a notify
//     write (its owner must learn of it) and an op of GPU memory on either side (moved through
//     bounce buffers: stream_client.h invariant 10) ask for a grant, which teaches the endpoint.
//     What the owner does not take by handle (refused, or "ask its manager") moved no byte and
//     asks for a grant.
//  5. Manager invariant 24: every job has a stop of its op's own; a cancel asks it
//     (components/stream_client.h invariant 8), and the op answers `cancelled` once the job
//     ended stopped (or was never taken by its owner); a job its owner was not heard ending
//     answers that (peer_unavailable), never `cancelled`.
//  6. Classes and deadlines (components/stream_client.h invariant 9): the client runs the
//     manager's jobs by class, earliest deadline first within one; an op that cannot end by its
//     deadline behind the jobs queued ahead of it is refused before its owner is asked for a grant
//     (resource_exhausted, naming the estimate), and again if that changed by the time it was
//     granted; no byte moved.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "actors/rdma_messages.h"
#include "actors/transfer/transfer_path.h"
#include "components/stream_client.h"

namespace caf_rdma::detail {

class StreamPath final : public TransferPath {
public:
  using TransferPath::TransferPath;

  void start(OpId id) override;
  bool deadline(OpId id, DeadlineStage stage) override;
  void forget(OpId id) override { ops_.erase(id); }
  /// StreamDone: the op's job ended and no longer touches local buffer `local_id`.
  void job_ended(OpId id, uint64_t local_id, TransferOutcome outcome, bool refused);
  /// Its peer went down: a job still running keeps the op until it stops (invariant 1; a
  /// queued one is cancelled now). Returns whether the op waits for its job.
  bool peer_down(OpId id, const char* why);

private:
  struct StreamOp {
    uint64_t job_tag = 0;    ///< its StreamJob's tag (to cancel it while queued)
    bool streaming = false;  ///< its job runs (the reply waits for it to stop)
    bool by_handle = false;  ///< its job goes by handle (invariant 4)
    /// Its job's stop (invariant 5), kept alive by the job's end callback too.
    std::shared_ptr<StopSignal> stop;
  };

  /// Milliseconds its transfer has left (at least 1).
  uint32_t time_left(OpId id) const;
  /// Asks the owner for a grant; granted() runs the job.
  void ask_grant(OpId id);
  void granted(OpId id, const StreamGrantMsg& grant);
  /// Runs `job` (its endpoint and authorization filled in) for op `id`.
  void run(OpId id, StreamJob job);
  /// The job ended with an error: the op fails (naming why), or goes to chunks (invariant 2).
  void job_failed(OpId id, TransferOutcome outcome, bool refused);
  /// Invariant 6: the op is refused for its deadline (`why`), nothing moved.
  void refuse(OpId id, const Error& why);

  std::map<OpId, StreamOp> ops_;
  uint64_t next_job_tag_ = 1;
};

}  // namespace caf_rdma::detail
