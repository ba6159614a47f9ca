// The answer of an op the NIC refused, once its owner was asked (see owner_verdict.h).
#include "actors/transfer/owner_verdict.h"

#include "actors/op_texts.h"

namespace caf_rdma::detail {

bool asks_owner(OpFault fault) {
  return fault != OpFault::kNone;
}

Error owner_verdict(const TransferOp& op, const Error& nic, OpFault fault,
                    const Result<TransferOutcome>& asked) {
  if (!asked.ok()) {
    if (asked.error().code() == ErrorCode::kPeerUnavailable)  // invariant 3
      return asked.error();
    return Error(nic.code(), owner_silent_text(nic.message(), asked.error().message()));  // 4
  }
  if (asked->ok() || (fault != OpFault::kRemoteAccess && fault != OpFault::kFlushed))  // 2
    return nic;
  return Error(static_cast<ErrorCode>(asked->code), owner_refused_text(op, asked->message));  // 1
}

}  // namespace caf_rdma::detail
