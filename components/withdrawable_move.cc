// Withdrawable moves (see withdrawable_move.h).
#include "components/withdrawable_move.h"

#include <algorithm>
#include <vector>

namespace caf_rdma {

Status move_withdrawable(const Socket& s, uint8_t* addr, uint64_t length, StreamDirection direction,
                         Deadline deadline, std::chrono::milliseconds stall,
                         const Withdrawal& withdrawal, const std::string& what) {
  const bool into_owner = direction == StreamDirection::kIntoOwner;
  uint64_t moved = 0;
  while (moved < length && !withdrawn(withdrawal)) {  // invariant 1
    const uint64_t piece = std::min(length - moved, kWithdrawablePiece);
    Status st = into_owner ? recv_all(s, addr + moved, piece, deadline, what, stall)
                           : send_all(s, addr + moved, piece, deadline, what, stall);
    if (!st.ok())
      return st;
    moved += piece;
  }
  if (moved == length)
    return {};
  // Invariant 2: the rest without the memory.
  std::vector<uint8_t> scratch(std::min(length - moved, kWithdrawablePiece), 0);
  for (uint64_t left = length - moved; left > 0;) {
    const uint64_t piece = std::min<uint64_t>(left, scratch.size());
    Status st = into_owner ? recv_all(s, scratch.data(), piece, deadline, what, stall)
                           : send_all(s, scratch.data(), piece, deadline, what, stall);
    if (!st.ok())
      return st;
    left -= piece;
  }
  return released_midway_error(moved, length);
}

}  // namespace caf_rdma
