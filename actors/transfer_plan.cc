// TransferPlan (see transfer_plan.h).
#include "actors/transfer_plan.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "actors/transfer_checks.h"
#include "components/stream_protocol.h"

namespace caf_rdma {

struct TransferPlan::Data : TransferPlan::Head {
  std::vector<ListEntry> entries;
  uint64_t batch_bytes = 0;  ///< detail::plan_batch_bytes
};

uint64_t detail::plan_batch_bytes(const TransferPlan& plan) {
  return static_cast<const TransferPlan::Data&>(*plan.data_).batch_bytes;
}

const std::vector<ListEntry>& detail::plan_entries(const TransferPlan& plan) {
  return static_cast<const TransferPlan::Data&>(*plan.data_).entries;
}

std::shared_ptr<const std::vector<ListEntry>> detail::plan_table(const TransferPlan& plan) {
  const auto& data = static_cast<const TransferPlan::Data&>(*plan.data_);
  return std::shared_ptr<const std::vector<ListEntry>>(plan.data_, &data.entries);
}

size_t TransferPlan::size() const {
  return detail::plan_entries(*this).size();
}

ListRange TransferPlan::range(size_t i) const {
  const ListEntry& e = detail::plan_entries(*this)[i];
  return ListRange{e.peer_offset, e.offset, e.length};
}

std::string list_range_name(uint64_t i, uint64_t n) {
  return "range " + std::to_string(i) + " of " + std::to_string(n);
}

uint32_t list_ms_left(std::chrono::steady_clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                        deadline - std::chrono::steady_clock::now())
                        .count();
  return static_cast<uint32_t>(std::clamp<int64_t>(left, 0, std::numeric_limits<uint32_t>::max()));
}

Error zero_list_timeout_error() {
  return Error(ErrorCode::kInvalidArgument, "transfer list timeout must be > 0 ms");
}

Error list_timeout_error(uint64_t n, bool read, const BufferHandle& remote, uint64_t landed) {
  return Error(ErrorCode::kTimeout, "a list of " + std::to_string(n) + " ranges " +
                                        (read ? "from " : "into ") + describe(remote) +
                                        ": its time ran out after " + std::to_string(landed) +
                                        " ranges had landed");
}

Error list_cancelled_error(uint64_t n, bool read, const BufferHandle& remote, uint64_t landed,
                           const std::string& more) {
  return Error(ErrorCode::kCancelled, "a list of " + std::to_string(n) + " ranges " +
                                          (read ? "from " : "into ") + describe(remote) +
                                          ": cancelled after " + std::to_string(landed) +
                                          " ranges had landed; none lands later" +
                                          (more.empty() ? "" : " (" + more + ")"));
}

TransferOp TransferPlan::op(size_t i) const {
  const ListEntry& e = detail::plan_entries(*this)[i];
  TransferOp op;
  op.kind = wire_kind(data_->kind);
  op.local = data_->local;
  op.local_offset = e.peer_offset;
  op.remote = data_->remote;
  op.remote_offset = e.offset;
  op.length = e.length;
  op.priority = static_cast<uint8_t>(priority_);
  return op;
}

Result<TransferPlan> TransferPlan::make(TransferKind kind, const BufferHandle& local,
                                        const BufferHandle& remote, std::vector<ListRange> ranges) {
  if (kind != TransferKind::kRead && kind != TransferKind::kWrite)
    return Error(ErrorCode::kInvalidArgument,
                 "a transfer list moves reads or writes, not atomics (kind " +
                     std::to_string(static_cast<int>(kind)) + ")");
  if (ranges.empty())
    return Error(ErrorCode::kInvalidArgument, "a transfer list of no ranges between " +
                                                  describe(local) + " and " + describe(remote));
  auto data = std::make_shared<Data>();
  data->kind = kind;
  data->local = local;
  data->remote = remote;
  data->entries.reserve(ranges.size());
  // Invariant 1: the one check of every op, range by range (a scratch op: no copy of the
  // handles per range).
  TransferOp scratch;
  scratch.kind = wire_kind(kind);
  scratch.local = local;
  scratch.remote = remote;
  const auto access = static_cast<BufferAccess>(local.access);
  uint64_t window = 0;  // the bytes of the batch range i is in, up to it
  for (size_t i = 0; i < ranges.size(); ++i) {
    const ListRange& r = ranges[i];
    if (r.length == 0 || r.length == kWholeSpan)
      return Error(ErrorCode::kInvalidArgument,
                   list_range_name(i, ranges.size()) + " has length " +
                       (r.length == 0 ? std::string("0") : std::string("kWholeSpan")) +
                       ": a list's ranges name their length");
    scratch.local_offset = r.local_offset;
    scratch.remote_offset = r.remote_offset;
    scratch.length = r.length;
    auto length = checked_length(scratch, local.size, access);
    if (!length.ok())
      return length.error().with_context(list_range_name(i, ranges.size()));
    data->entries.push_back(ListEntry{r.remote_offset, r.local_offset, r.length});
    data->bytes += r.length;
    data->max_length = std::max(data->max_length, r.length);
    window = i % kListBatch == 0 ? r.length : window + r.length;
    data->batch_bytes = std::max(data->batch_bytes, window);
  }
  // Invariant 1: destinations do not overlap (sorted by where they start; a list whose
  // destinations come in order, as a paged copy into one region's does, needs no sort).
  const bool read = kind == TransferKind::kRead;
  auto dest = [&](size_t i) { return read ? ranges[i].local_offset : ranges[i].remote_offset; };
  auto overlap = [&](size_t a, size_t b) {
    return Error(ErrorCode::kInvalidArgument,
                 list_range_name(std::max(a, b), ranges.size()) + " overlaps " +
                     list_range_name(std::min(a, b), ranges.size()) + " at its destination (" +
                     (read ? "local" : "remote") + " offset " + std::to_string(dest(b)) +
                     "): a list's destination ranges must not overlap");
  };
  size_t in_order = 1;
  while (in_order < ranges.size() && dest(in_order - 1) <= dest(in_order))
    ++in_order;
  if (in_order == ranges.size()) {
    for (size_t k = 1; k < ranges.size(); ++k)
      if (dest(k - 1) + ranges[k - 1].length > dest(k))
        return overlap(k - 1, k);
    return TransferPlan(std::move(data));
  }
  std::vector<std::pair<uint64_t, size_t>> starts(ranges.size());
  for (size_t i = 0; i < ranges.size(); ++i)
    starts[i] = {dest(i), i};
  std::sort(starts.begin(), starts.end());
  for (size_t k = 1; k < starts.size(); ++k) {
    const size_t a = starts[k - 1].second;
    const size_t b = starts[k].second;
    if (starts[k - 1].first + ranges[a].length > starts[k].first)
      return overlap(a, b);
  }
  return TransferPlan(std::move(data));
}

Result<TransferPlan> TransferPlan::make(TransferKind kind, const BufferHandle& local,
                                        const BufferHandle& remote, const Strided& s) {
  std::vector<ListRange> ranges;
  if (s.count == 0)
    return Error(ErrorCode::kInvalidArgument, "a strided list of no ranges between " +
                                                  describe(local) + " and " + describe(remote));
  auto wraps = [&](uint64_t offset, uint64_t stride) {
    return stride != 0 && s.count - 1 > (~uint64_t{0} - offset) / stride;
  };
  if (wraps(s.local_offset, s.local_stride) || wraps(s.remote_offset, s.remote_stride))
    return Error(ErrorCode::kOutOfBounds, "a strided list of " + std::to_string(s.count) +
                                              " ranges whose offsets pass 2^64");
  // Offsets grow with i: the last range is the farthest on both sides, and destinations a
  // stride shorter than their length apart overlap. Checked before anything is allocated, so
  // a count in the billions is refused, not allocated.
  const bool read = kind == TransferKind::kRead;
  const uint64_t dest_stride = read ? s.local_stride : s.remote_stride;
  if (s.count > 1 && dest_stride < s.length)
    return Error(ErrorCode::kInvalidArgument,
                 list_range_name(1, s.count) + " overlaps " + list_range_name(0, s.count) +
                     " at its destination (" + (read ? "local" : "remote") + " stride " +
                     std::to_string(dest_stride) + ", length " + std::to_string(s.length) +
                     "): a list's destination ranges must not overlap");
  {
    TransferOp last;
    last.kind = wire_kind(kind);
    last.local = local;
    last.remote = remote;
    last.local_offset = s.local_offset + (s.count - 1) * s.local_stride;
    last.remote_offset = s.remote_offset + (s.count - 1) * s.remote_stride;
    last.length = s.length;
    auto fits = checked_length(last, local.size, static_cast<BufferAccess>(local.access));
    if (!fits.ok())
      return fits.error().with_context(list_range_name(s.count - 1, s.count));
  }
  ranges.reserve(s.count);
  for (uint64_t i = 0; i < s.count; ++i)
    ranges.push_back(ListRange{s.local_offset + i * s.local_stride,
                               s.remote_offset + i * s.remote_stride, s.length});
  return make(kind, local, remote, std::move(ranges));
}

}  // namespace caf_rdma
