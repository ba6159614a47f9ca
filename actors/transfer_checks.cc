// Transfer checks shared by the manager and the direct lanes.
#include "actors/transfer_checks.h"

#include "actors/rdma_node.h"
#include "components/same_host.h"

namespace caf_rdma {

const char* kind_name(uint8_t kind) {
  switch (kind) {
    case wire_kind(TransferKind::kRead):
      return "read";
    case wire_kind(TransferKind::kWrite):
      return "write";
    case wire_kind(TransferKind::kFetchAdd):
      return "fetch-add";
    case wire_kind(TransferKind::kCompareSwap):
      return "compare-swap";
    default:
      return "transfer";
  }
}

Result<uint64_t> checked_atomic(const TransferOp& op, uint64_t local_size,
                                BufferAccess local_access) {
  const std::string what = kind_name(op.kind);
  if (!op.remote.owner)
    return Error(ErrorCode::kInvalidArgument,
                 "remote " + describe(op.remote) + " names no owner manager");
  if (op.length != kAtomicBytes)
    return Error(
        ErrorCode::kInvalidArgument,
        what + " on " + describe(op.remote) + " needs length " + std::to_string(kAtomicBytes) +
            " (one 64-bit word), not " +
            (op.length == kWholeSpan ? std::string("the whole span") : std::to_string(op.length)));
  if (op.remote_offset > op.remote.size || op.remote.size - op.remote_offset < kAtomicBytes)
    return Error(ErrorCode::kOutOfBounds, what + " of the 8-byte word at remote offset " +
                                              std::to_string(op.remote_offset) + " does not fit " +
                                              describe(op.remote) + " (size " +
                                              std::to_string(op.remote.size) + ")");
  if ((op.remote.addr + op.remote_offset) % kAtomicBytes != 0)
    return Error(ErrorCode::kInvalidArgument,
                 misaligned_word_text(op.kind, "remote offset " + std::to_string(op.remote_offset) +
                                                   " of " + describe(op.remote)));
  if (op.remote.access != static_cast<uint8_t>(BufferAccess::kReadWrite))
    return Error(ErrorCode::kInvalidArgument,
                 "cannot run a " + what + " on read-only " + describe(op.remote));
  if (op.remote.memory == static_cast<uint8_t>(BufferMemory::kGpuStaged))
    return Error(ErrorCode::kInvalidArgument,
                 "cannot run a " + what + " on " + describe(op.remote) +
                     ": GPU memory its owner's NIC cannot register (no GPUDirect) has no atomics");
  if (op.local_offset > local_size || local_size - op.local_offset < kAtomicBytes)
    return Error(ErrorCode::kOutOfBounds,
                 "the old value of a " + what + " (8 bytes at local offset " +
                     std::to_string(op.local_offset) + ") does not fit " + describe(op.local) +
                     " (size " + std::to_string(local_size) + ")");
  if (local_access != BufferAccess::kReadWrite)
    return Error(ErrorCode::kInvalidArgument,
                 "cannot put the old value of a " + what + " into read-only " + describe(op.local));
  return kAtomicBytes;
}

std::string misaligned_word_text(uint8_t kind, const std::string& where) {
  return std::string(kind_name(kind)) + " on a misaligned word: " + where +
         " is not 8-byte aligned in its owner's address space";
}

std::string atomics_unsupported_text(uint8_t kind, std::string_view device) {
  return std::string(kind_name(kind)) + " cannot use RDMA: device " + std::string(device) +
         " has atomic_cap IBV_ATOMIC_NONE (its NIC runs no atomics; the owner's CPU atomics are "
         "not atomic with other nodes' NIC atomics on the same word, so there is no fallback)";
}

Result<uint64_t> checked_length(const TransferOp& op, uint64_t local_size,
                                BufferAccess local_access) {
  if (!known_kind(op.kind))
    return Error(ErrorCode::kInvalidArgument,
                 "transfer kind " + std::to_string(op.kind) +
                     " is none of read (0), write (1), fetch-add (2), compare-swap (3)");
  if (!priority_from_wire(op.priority))
    return Error(ErrorCode::kInvalidArgument, "transfer " + unknown_priority_text(op.priority));
  if (op.notify && !is_write(op))
    return Error(ErrorCode::kInvalidArgument,
                 std::string("a ") + kind_name(op.kind) + " of " + describe(op.remote) +
                     " asks for a write notice: only writes notify their owner");
  if (is_atomic(op))
    return checked_atomic(op, local_size, local_access);
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

bool stream_reachable(const StreamEndpoint& endpoint, const std::string& owner_name) {
  if (!is_loopback_host(endpoint.host) || !endpoint.unix_name.empty())
    return true;
  const auto colon = owner_name.rfind(':');
  return colon != std::string::npos && is_loopback_host(owner_name.substr(0, colon));
}

}  // namespace caf_rdma
