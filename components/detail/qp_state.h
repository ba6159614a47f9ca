// QpState: what one RdmaQueuePair knows about its ops and its ibverbs queue pair, shared by the
// parts that accept ops (rdma_queue_pair.cc), post them (qp_posting), retire them
// (qp_completions) and wait for them (qp_blocking). Its public Stats and Limits:
// qp_endpoint.h.
//
// Invariants:
//  1. Every field after `mu` is read and written with `mu` held (`qp` is destroyed with
//     `poll_lock()` held too); the fields before it are set when the queue pair is created and
//     only read afterwards.
//  2. An accepted op is in `ops` from its acceptance until its callback is queued to run, which
//     happens exactly once; `pending` holds, in submission order, the accepted ops that still
//     have work requests to post.
//  3. `send_in_flight` and `recv_in_flight` hold one entry per posted work request not yet
//     retired, in posting order (an RC queue pair completes each queue in order).
//  4. Once `error` is set it stays set: a queue pair in ERR posts nothing more.
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "components/completion_router.h"
#include "components/detail/ring_queue.h"
#include "components/qp_endpoint.h"
#include "components/rdma_domain.h"
#include "components/rdma_op.h"
#include "components/work_request_plan.h"
#include "primitives/completion_queue.h"
#include "primitives/queue_pair.h"

namespace caf_rdma {

namespace detail {

/// An accepted op and how far it got.
struct QpOp {
  uint64_t id = 0;
  RdmaOp op;
  OpCallback done;
  std::vector<PlannedWorkRequest> wrs;  ///< empty for a list: its requests are cut as posted
  size_t wr_count = 0;  ///< work requests in all (a list's: counted when it is submitted)
  size_t posted = 0;    ///< work requests posted so far
  /// A list: where its next work request starts (range, bytes of it already posted), and
  /// how many of its requests retired without an error (RdmaQueuePair invariant 13).
  size_t list_at = 0;
  uint64_t list_within = 0;
  size_t retired_ok = 0;
  bool wr_failed = false;  ///< one of its requests completed with an error
  size_t in_flight = 0;    ///< posted and not yet retired
  bool aborted = false;    ///< no more of its work requests will be posted
  int atomic_slot = -1;    ///< atomics: the AtomicScratch word its result lands in
  uint64_t bytes = 0;      ///< recv: bytes received
  bool with_imm = false;   ///< recv: consumed by a WRITE WITH IMMEDIATE carrying `imm`
  uint32_t imm = 0;
  std::optional<Error> error;
  OpFault fault = OpFault::kNone;  ///< with `error`: what kind of failure
};

/// A posted work request: its id (without the receive bit) and its op.
struct PostedWr {
  uint64_t seq;
  uint64_t op_id;
};

/// Set in the ids of receive work requests (send and receive ids come from one counter).
constexpr uint64_t kRecvBit = uint64_t{1} << 63;

/// The most bytes one work request of a list carries: the QP's maximum message, and what one
/// SGE can say (2^31); and how many requests a range of `length` bytes is cut into (qp_posting.h
/// invariant 6).
inline uint64_t list_piece(uint64_t max_message) {
  return std::min<uint64_t>(max_message, uint64_t{1} << 31);
}
inline size_t list_requests(uint64_t length, uint64_t max_message) {
  const uint64_t piece = list_piece(max_message);
  return static_cast<size_t>(length / piece + (length % piece != 0 ? 1 : 0));
}

inline bool is_atomic(OpKind kind) {
  return kind == OpKind::kFetchAdd || kind == OpKind::kCompareSwap;
}

struct QpState {
  std::shared_ptr<RdmaDomain> domain;
  /// The shared completion queue (RdmaQueuePair invariant 10); null: `cq` is the QP's own.
  std::shared_ptr<CompletionRouter> router;
  std::shared_ptr<CompletionQueue> cq;
  /// "rxe0 QP 17": taken when the QP is made, so naming it needs no lock.
  std::string name;
  uint64_t max_message = 0;      ///< largest message per work request
  uint32_t signal_interval = 1;  ///< signal at least every this many send work requests
  /// Keeps polls of a CQ of its own out while the QP is destroyed (see `poll_lock`).
  std::mutex poll_mu;

  mutable std::mutex mu;
  std::unique_ptr<QueuePair> qp;
  QpLimits limits;  ///< `completion_entries` unused here: read from `cq`
  bool connected = false;
  bool error = false;
  std::string error_cause;
  uint32_t local_psn = 0;
  QpInfo remote;
  uint64_t next_op_id = 1;
  std::unordered_map<uint64_t, std::unique_ptr<QpOp>> ops;
  size_t receives = 0;  ///< of `ops`, receives (RdmaQueuePair invariant 12)
  std::deque<uint64_t> pending;
  RingQueue<PostedWr> send_in_flight;  ///< posted, oldest first (no allocation once warm)
  RingQueue<PostedWr> recv_in_flight;
  QpStats stats;

  /// The lock that keeps polls out while the QP is destroyed: the router's poll mutex on a
  /// shared CQ, `poll_mu` otherwise. Taken before `mu`.
  std::mutex& poll_lock() { return router ? router->poll_mutex() : poll_mu; }
};

}  // namespace detail
}  // namespace caf_rdma
