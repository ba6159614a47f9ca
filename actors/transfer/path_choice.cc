// The choice of an op's path (see path_choice.h).
#include "actors/transfer/path_choice.h"

#include <algorithm>

#include "actors/op_texts.h"
#include "actors/transfer_checks.h"

namespace caf_rdma::detail {

std::string why_not_rdma(const TransferOp& op, const PathFacts& f) {
  if (!f.rdma_lost.empty())
    return std::string(f.rdma_lost);
  if (!f.has_device || !f.port_down.empty())
    return rdma_unusable_text(f.has_device, f.no_device_reason, f.port_down);
  if (!f.local_registered)
    return "the local " + describe(op.local) + " has no registration on the reopened device";
  if (!f.remote_registered)
    return "the owner " + op.remote.owner_name + " registered " + describe(op.remote) +
           " without an RDMA device";
  if (f.remote_staged)
    return "the owner " + op.remote.owner_name + "'s NIC cannot register the GPU memory of " +
           describe(op.remote) + ", so only its owner can move it";
  if (!f.same_fabric)
    return "the owner is on another kind of fabric (RoCE vs InfiniBand)";
  return {};
}

PathFacts device_facts(const TransferOp& op, TransportMode mode, bool has_device,
                       std::string_view no_device_reason, std::string_view port_down,
                       bool port_ethernet) {
  PathFacts f;
  f.mode = mode;
  f.has_device = has_device;
  f.no_device_reason = no_device_reason;
  f.port_down = port_down;
  f.remote_registered = op.remote.has_rdma();
  // GPU memory its owner's NIC cannot register is only reachable through its owner.
  f.remote_staged = op.remote.memory == static_cast<uint8_t>(BufferMemory::kGpuStaged);
  f.same_fabric = has_device && f.remote_registered && op.remote.ethernet == port_ethernet;
  return f;
}

bool stream_size_fits(uint64_t bytes, uint64_t stream_min_bytes) {
  return stream_min_bytes > 0 && bytes >= stream_min_bytes;
}

LaneFacts lane_facts(const BufferHandle& local, const BufferHandle& remote, uint8_t kind,
                     bool notify, uint64_t bytes, uint64_t stream_min_bytes) {
  const auto host = static_cast<uint8_t>(BufferMemory::kHost);
  LaneFacts f;
  f.kind = kind;
  f.notify = notify;
  f.owners_known = local.owner && remote.owner;
  f.same_node = f.owners_known && local.owner.node() == remote.owner.node();
  f.local_rdma = local.has_rdma();
  f.remote_rdma = remote.has_rdma();
  f.local_host = local.memory == host;
  f.local_staged = local.memory == static_cast<uint8_t>(BufferMemory::kGpuStaged);
  f.remote_host = remote.memory == host;
  f.remote_staged = remote.memory == static_cast<uint8_t>(BufferMemory::kGpuStaged);
  f.remote_stream = remote.stream_port != 0;
  f.bytes = bytes;
  f.stream_min_bytes = stream_min_bytes;
  return f;
}

PathKind lane_path(const LaneFacts& f) {
  // Lanes carry plain reads and writes of buffers whose owners the handles name.
  if (f.notify || (!is_read_kind(f.kind) && !is_write_kind(f.kind)) || !f.owners_known)
    return PathKind::kNone;
  if (f.local_rdma && f.remote_rdma)  // invariant 1's facts the handles show
    return f.remote_staged || f.local_staged ? PathKind::kNone : PathKind::kRdma;
  if (f.remote_stream && f.local_host && f.remote_host && !f.same_node &&
      stream_size_fits(f.bytes, f.stream_min_bytes))
    return PathKind::kStream;  // invariant 4
  return PathKind::kNone;
}

size_t shared_rails(size_t local_rails, size_t remote_rails) {
  return std::min(local_rails, remote_rails);
}

bool striped(const StripeFacts& f) {
  return f.stripe_min_bytes > 0 && f.bytes >= f.stripe_min_bytes && !f.notify && !f.same_node &&
         f.bulk && (f.rails > 0 || f.several_qps);
}

bool counts_together(const TransferOp& op) {
  return (op.kind == wire_kind(TransferKind::kRead) ||
          op.kind == wire_kind(TransferKind::kWrite)) &&
         !op.notify && op.length != kWholeSpan && priority_of(op) == Priority::kBulk;
}

PathChoice choose_path(const TransferOp& op, const PathFacts& f) {
  if (f.same_node && f.ranges_overlap)
    return {PathKind::kLocalCopy, ErrorCode::kNoDevice, "the two ranges overlap"};
  std::string why =
      f.mode == TransportMode::kFallback ? std::string("RDMA disabled") : why_not_rdma(op, f);
  if (why.empty() && is_atomic(op) && !f.device_atomics)  // invariant 5
    return {PathKind::kNone, ErrorCode::kInvalidArgument,
            atomics_unsupported_text(op.kind, f.device)};
  if (why.empty())
    return {f.local_staged ? PathKind::kRdmaStaged : PathKind::kRdma, ErrorCode::kNoDevice, {}};
  if (f.mode == TransportMode::kRdma)
    return {PathKind::kNone, ErrorCode::kNoDevice, fallback_forbidden_text() + ", but " + why};
  if (f.same_node)
    return {PathKind::kLocalCopy, ErrorCode::kNoDevice, std::move(why)};
  return {f.stream_fits && !is_atomic(op) ? PathKind::kStream : PathKind::kChunks,
          ErrorCode::kNoDevice, std::move(why)};
}

}  // namespace caf_rdma::detail
