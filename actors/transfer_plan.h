// TransferPlan: a list of ranges between one local and one remote buffer, validated once and
// posted any number of times (RdmaClient::prepare, RdmaClient::post): the unit of work for
// paged data (a KV cache's blocks, a parameter server's shards).
//
// Invariants:
//  1. A plan holds only ranges that passed checked_length (the one check every op passes:
//     kind, offsets and length inside both handles, a writable destination) and whose
//     destination ranges do not overlap: prepare refuses the whole list otherwise, naming
//     the first range at fault ("range i of n"), and nothing moves.
//  2. A plan is immutable and shares its ranges: copies are cheap, any number of threads may
//     post one at once (its destination is then theirs to share), and posting it again
//     validates nothing and allocates nothing per range.
//  3. A plan is checked against its handles, not against the owner: a released buffer, a
//     stale handle or a lost peer is found by post, which answers with the error a single
//     transfer would have given (released, unknown_buffer, peer_unavailable, ...).
//  4. ListOutcome::landed (rdma_messages.h) is exact from below: ranges [0, landed) are known
//     to be in place at their destination; the ranges after it may or may not have moved (a
//     failure mid-list: docs/guarantees.md, "Transfer lists").
//  5. One wording for what a list's errors name: list_range_name ("range i of n"),
//     list_timeout_error and zero_list_timeout_error.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "actors/rdma_messages.h"
#include "primitives/status.h"

namespace caf_rdma {

struct ListEntry;  // components/stream_protocol.h: a range as the stream channel's table holds it
class TransferPlan;
namespace detail {
/// The plan's ranges as the stream channel's table holds them (offset: the remote buffer's;
/// peer_offset: the local buffer's), for the paths that move them.
const std::vector<ListEntry>& plan_entries(const TransferPlan& plan);
/// The same table, shared with the plan (no copy): what a queue pair's list op holds.
std::shared_ptr<const std::vector<ListEntry>> plan_table(const TransferPlan& plan);
/// The most bytes any of the plan's batches moves (kListBatch ranges each, cut from its first
/// range): what the striping rule measures a list by (path_choice.h invariant 7).
uint64_t plan_batch_bytes(const TransferPlan& plan);
}  // namespace detail

/// How far a list went on a lane (StreamLane::post_list, DirectLane::post_list).
struct ListEnd {
  size_t done = 0;             ///< ranges before it landed
  std::optional<Error> error;  ///< the lane's error, which ends the list
};

/// "range i of n": how a list's errors name a range (invariant 5).
std::string list_range_name(uint64_t i, uint64_t n);
/// The error of a list of `n` ranges between its buffers (`read`: from `remote`, else into it)
/// whose time ran out once `landed` ranges had landed (invariant 5).
Error list_timeout_error(uint64_t n, bool read, const BufferHandle& remote, uint64_t landed);
/// The same, cancelled (CancelToken) once `landed` ranges had landed, nothing more landing
/// later; `more`: what the step that was stopped said ("" when none was running).
Error list_cancelled_error(uint64_t n, bool read, const BufferHandle& remote, uint64_t landed,
                           const std::string& more);

/// Milliseconds left of a list's `deadline` as a step of it takes them (0: none left, at most
/// UINT32_MAX).
uint32_t list_ms_left(std::chrono::steady_clock::time_point deadline);

/// The refusal of a list asked to move within no time (a timeout of 0 ms) (invariant 5).
Error zero_list_timeout_error();

/// Ranges a list moves per batch where it takes neither the stream lane nor the same-host
/// endpoint (a direct lane's chain, or the manager's batch).
constexpr size_t kListBatch = 1024;

/// `count` ranges of `length` bytes, the i-th at local_offset + i * local_stride and at
/// remote_offset + i * remote_stride (a stride of 0 repeats one place: refused for the
/// destination side, whose ranges would overlap).
struct Strided {
  uint64_t count = 0;
  uint64_t length = 0;
  uint64_t local_offset = 0;
  uint64_t local_stride = 0;
  uint64_t remote_offset = 0;
  uint64_t remote_stride = 0;
};

class TransferPlan {
public:
  /// Validates `ranges` (invariant 1) of a read (remote -> local) or write (local -> remote)
  /// between `local` and `remote`.
  static Result<TransferPlan> make(TransferKind kind, const BufferHandle& local,
                                   const BufferHandle& remote, std::vector<ListRange> ranges);
  /// The same for a strided list.
  static Result<TransferPlan> make(TransferKind kind, const BufferHandle& local,
                                   const BufferHandle& remote, const Strided& strided);

  TransferKind kind() const { return data_->kind; }
  bool is_read() const { return data_->kind == TransferKind::kRead; }
  const BufferHandle& local() const { return data_->local; }
  const BufferHandle& remote() const { return data_->remote; }
  size_t size() const;
  uint64_t bytes() const { return data_->bytes; }
  /// The longest range's length.
  uint64_t max_length() const { return data_->max_length; }
  /// Range i (i < size()).
  ListRange range(size_t i) const;
  /// Range i as one op (the single-op paths' form), of the plan's class.
  TransferOp op(size_t i) const;
  /// Its priority class (components/priority.h; bulk unless `as` said otherwise).
  Priority priority() const { return priority_; }
  /// The same plan (its ranges shared, nothing validated again) in class `p`:
  /// `client.post(plan.as(Priority::kLatency))`.
  TransferPlan as(Priority p) const {
    TransferPlan copy = *this;
    copy.priority_ = p;
    return copy;
  }

private:
  struct Data;  // transfer_plan.cc
  struct Head {
    TransferKind kind = TransferKind::kRead;
    BufferHandle local;
    BufferHandle remote;
    uint64_t bytes = 0;
    uint64_t max_length = 0;
  };
  explicit TransferPlan(std::shared_ptr<const Head> data) : data_(std::move(data)) {}
  friend const std::vector<ListEntry>& detail::plan_entries(const TransferPlan& plan);
  friend std::shared_ptr<const std::vector<ListEntry>> detail::plan_table(const TransferPlan& plan);
  friend uint64_t detail::plan_batch_bytes(const TransferPlan& plan);
  std::shared_ptr<const Head> data_;  ///< a Data
  Priority priority_ = Priority::kBulk;
};

}  // namespace caf_rdma
