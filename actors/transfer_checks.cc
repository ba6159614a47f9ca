// Transfer checks shared by the manager and the direct lanes.
#include "actors/transfer_checks.h"

namespace caf_rdma {

const char* kind_name(uint8_t kind) {
  return is_read_kind(kind) ? "read" : "write";
}

Result<uint64_t> checked_length(const TransferOp& op, uint64_t local_size,
                                BufferAccess local_access) {
  if (!known_kind(op.kind))
    return Error(ErrorCode::kInvalidArgument,
                 "transfer kind " + std::to_string(op.kind) + " is neither read (0) nor write (1)");
  const bool reading = is_read(op);
  if (!op.remote.owner)
    return Error(ErrorCode::kInvalidArgument,
                 "remote " + describe(op.remote) + " names no owner manager");
  if (op.local_offset > local_size)
    return Error(ErrorCode::kOutOfBounds, "local offset " + std::to_string(op.local_offset) +
                                              " is beyond " + describe(op.local) + " (size " +
                                              std::to_string(local_size) + ")");
  if (op.remote_offset > op.remote.size)
    return Error(ErrorCode::kOutOfBounds, "remote offset " + std::to_string(op.remote_offset) +
                                              " is beyond " + describe(op.remote) + " (size " +
                                              std::to_string(op.remote.size) + ")");
  uint64_t local_span = local_size - op.local_offset;
  uint64_t remote_span = op.remote.size - op.remote_offset;
  uint64_t length = op.length;
  if (length == kWholeSpan) {
    // Monarch's rules: a read moves the remote span, a write the local span.
    length = reading ? remote_span : local_span;
    if (reading && local_span < remote_span)
      return Error(ErrorCode::kSizeMismatch,
                   "read needs the local span (" + std::to_string(local_span) + " bytes of " +
                       describe(op.local) + " from offset " + std::to_string(op.local_offset) +
                       ") >= the remote span (" + std::to_string(remote_span) + " bytes of " +
                       describe(op.remote) + ")");
    if (!reading && remote_span < local_span)
      return Error(ErrorCode::kSizeMismatch,
                   "write needs the local span (" + std::to_string(local_span) + " bytes of " +
                       describe(op.local) + ") <= the remote span (" + std::to_string(remote_span) +
                       " bytes of " + describe(op.remote) + " from offset " +
                       std::to_string(op.remote_offset) + ")");
  } else {
    if (length > local_span)
      return Error(ErrorCode::kOutOfBounds, std::string(kind_name(op.kind)) + " of " +
                                                std::to_string(length) + " bytes at local offset " +
                                                std::to_string(op.local_offset) + " does not fit " +
                                                describe(op.local) + " (size " +
                                                std::to_string(local_size) + ")");
    if (length > remote_span)
      return Error(ErrorCode::kOutOfBounds,
                   std::string(kind_name(op.kind)) + " of " + std::to_string(length) +
                       " bytes at remote offset " + std::to_string(op.remote_offset) +
                       " does not fit " + describe(op.remote) + " (size " +
                       std::to_string(op.remote.size) + ")");
  }
  if (length == 0)
    return Error(ErrorCode::kInvalidArgument, std::string("zero-size ") + kind_name(op.kind) +
                                                  " between " + describe(op.local) + " and " +
                                                  describe(op.remote));
  if (reading && local_access != BufferAccess::kReadWrite)
    return Error(ErrorCode::kInvalidArgument, "cannot read into read-only " + describe(op.local));
  if (!reading && op.remote.access != static_cast<uint8_t>(BufferAccess::kReadWrite))
    return Error(ErrorCode::kInvalidArgument, "cannot write into read-only " + describe(op.remote));
  return length;
}

bool ranges_overlap(uint64_t a, uint64_t b, uint64_t n) {
  if (n == 0)
    return false;
  return a < b ? b - a < n : a - b < n;
}

}  // namespace caf_rdma
