// TransferPath: what every path shares (see transfer_path.h).
#include "actors/transfer/transfer_path.h"

#include "actors/detail/manager_state.h"

namespace caf_rdma::detail {

const char* reply_path(PathKind path) {
  switch (path) {
    case PathKind::kRdma:
      return kPathRdma;
    case PathKind::kRdmaStaged:
      return kPathRdmaStaged;
    case PathKind::kNone:
      return "";
    case PathKind::kLocalCopy:
    case PathKind::kChunks:
    case PathKind::kStream:
      break;
  }
  return kPathFallback;
}

bool TransferPath::deadline(OpId id, DeadlineStage stage) {
  (void)stage;
  m_.finish_op(id, m_.timed_out(id, ""));
  return false;
}

}  // namespace caf_rdma::detail
