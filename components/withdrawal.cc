// Withdrawal (see withdrawal.h).
#include "components/withdrawal.h"

#include <string>

namespace caf_rdma {

Error released_midway_error(uint64_t moved, uint64_t length) {
  return Error(ErrorCode::kReleased,
               "its owner released the buffer while the transfer moved its bytes (" +
                   std::to_string(moved) + " of " + std::to_string(length) +
                   " had moved; those may have landed, no byte moves after this answer)");
}

}  // namespace caf_rdma
