#include "components/qp_validation.h"

namespace caf_rdma {

namespace {

Status validate_atomic(const RdmaOp& op, const char* what) {
  if (!op.local.empty())
    return Error(ErrorCode::kInvalidArgument,
                 std::string(what) + " takes no local slices (the result is returned)");
  CAF_RDMA_RETURN_IF_ERROR(op.remote.check_range(op.remote_offset, 8, what));
  if ((op.remote.addr + op.remote_offset) % 8 != 0)
    return Error(ErrorCode::kInvalidArgument, std::string(what) + ": remote word at offset " +
                                                  std::to_string(op.remote_offset) + " of " +
                                                  op.remote.describe() + " is not 8-byte aligned");
  return {};
}

Status validate_local(const RdmaOp& op, const OpBounds& bounds, const char* what) {
  if (op.with_imm && op.kind != OpKind::kWrite)
    return Error(ErrorCode::kInvalidArgument,
                 std::string(what) + " cannot carry an immediate (only an RDMA WRITE can)");
  if (op.local.empty() && op.with_imm)
    return {};  // a zero-byte write with immediate
  if (op.local.empty())
    return Error(ErrorCode::kInvalidArgument, std::string(what) + " without local memory");
  const bool destination = op.kind == OpKind::kRead || op.kind == OpKind::kRecv;
  for (const auto& s : op.local) {
    CAF_RDMA_RETURN_IF_ERROR(s.buffer.check_range(
        s.offset, s.length, destination ? "local destination" : "local source"));
    if (s.buffer.region() == nullptr || s.buffer.region()->pd().get() != bounds.pd)
      return Error(ErrorCode::kInvalidArgument, std::string(what) + ": " + s.buffer.describe() +
                                                    " is registered with another domain than " +
                                                    std::string(bounds.qp_name));
    if (destination && s.buffer.access() == Access::kReadOnly)
      return Error(ErrorCode::kInvalidArgument, std::string(what) + ": " + s.buffer.describe() +
                                                    " is read-only and cannot be written");
  }
  return {};
}

Status validate_message(const RdmaOp& op, const OpBounds& bounds, const char* what) {
  const uint64_t length = op.local_length();
  const size_t max_sge =
      op.kind == OpKind::kRecv ? bounds.caps.max_recv_sge : bounds.caps.max_send_sge;
  if (length > bounds.max_message)
    return Error(ErrorCode::kInvalidArgument, std::string(what) + " of " + std::to_string(length) +
                                                  " bytes exceeds the maximum message size " +
                                                  std::to_string(bounds.max_message) + " of " +
                                                  std::string(bounds.qp_name));
  if (op.local.size() > max_sge)
    return Error(ErrorCode::kInvalidArgument,
                 std::string(what) + " with " + std::to_string(op.local.size()) +
                     " slices exceeds max SGE " + std::to_string(max_sge));
  return {};
}

/// A list (RdmaQueuePair invariant 13): each range inside both buffers, none empty. One pass,
/// nothing allocated unless a range is refused.
Status validate_list(const RdmaOp& op, const char* what) {
  if (op.kind != OpKind::kRead && op.kind != OpKind::kWrite)
    return Error(ErrorCode::kInvalidArgument, std::string(what) + " cannot move a list");
  if (op.with_imm || op.local.size() != 1)
    return Error(ErrorCode::kInvalidArgument,
                 std::string(what) + " of a list takes one local buffer and no immediate");
  if (op.list.count == 0)
    return Error(ErrorCode::kInvalidArgument, std::string(what) + " of a list of no ranges");
  const RdmaBuffer& local = op.local[0].buffer;
  const bool read = op.kind == OpKind::kRead;
  for (size_t i = 0; i < op.list.count; ++i) {
    const ListEntry& e = op.list[i];
    const bool fits = e.length > 0 && e.peer_offset <= local.size() &&
                      e.length <= local.size() - e.peer_offset && e.offset <= op.remote.size &&
                      e.length <= op.remote.size - e.offset;
    if (fits)
      continue;
    auto named = [&](const Error& err) {
      return Error(err.code(), std::string(what) + " of a list, range " + std::to_string(i) +
                                   " of " + std::to_string(op.list.count) + ": " + err.message());
    };
    if (e.length == 0)
      return named(Error(ErrorCode::kInvalidArgument, "it has no bytes"));
    Status l =
        local.check_range(e.peer_offset, e.length, read ? "local destination" : "local source");
    if (!l.ok())
      return named(l.error());
    return named(
        op.remote.check_range(e.offset, e.length, read ? "remote source" : "remote destination")
            .error());
  }
  return {};
}

}  // namespace

Status validate_op(const RdmaOp& op, const OpBounds& bounds) {
  const char* what = to_string(op.kind);
  // Invariant 4: a remote key of another opening of the peer's device never reaches the NIC.
  if (op.remote.incarnation != 0 && bounds.remote_incarnation != 0 &&
      op.remote.incarnation != bounds.remote_incarnation)
    return Error(ErrorCode::kInvalidArgument,
                 std::string(what) + ": " + op.remote.describe() +
                     " was registered before its owner's device " + op.remote.device +
                     " went away and came back; its remote key is gone (ask the owner for a "
                     "new handle)");
  if (op.kind == OpKind::kFetchAdd || op.kind == OpKind::kCompareSwap)
    return validate_atomic(op, what);
  CAF_RDMA_RETURN_IF_ERROR(validate_local(op, bounds, what));
  if (op.is_list())
    return validate_list(op, what);
  if (op.kind == OpKind::kSend || op.kind == OpKind::kRecv)
    return validate_message(op, bounds, what);
  if (op.with_imm && op.local.empty()) {  // zero bytes: no memory is touched, only the offset
    if (op.remote_offset > op.remote.size)
      return Error(ErrorCode::kOutOfBounds, std::string(what) + " with immediate: offset " +
                                                std::to_string(op.remote_offset) + " is past " +
                                                op.remote.describe());
    return {};
  }
  return op.remote.check_range(op.remote_offset, op.local_length(),
                               op.kind == OpKind::kWrite ? "remote destination" : "remote source");
}

}  // namespace caf_rdma
