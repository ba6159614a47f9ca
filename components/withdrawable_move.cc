// Withdrawable moves (see withdrawable_move.h).
#include "components/withdrawable_move.h"

#include <algorithm>
#include <vector>

namespace caf_rdma {

Result<uint64_t> move_until_withdrawn(const Socket& s, const iovec* pieces, size_t count,
                                      StreamDirection direction, Deadline deadline,
                                      std::chrono::milliseconds stall, const Withdrawal& withdrawal,
                                      const std::string& what) {
  // Invariant 1: the flag (when something can withdraw the memory) is looked at before every
  // call that touches the memory.
  return move_pieces(s, pieces, count, direction == StreamDirection::kOutOfOwner, deadline, what,
                     stall, withdrawal.get());
}

Result<uint64_t> move_until_withdrawn(const Socket& s, uint8_t* addr, uint64_t length,
                                      StreamDirection direction, Deadline deadline,
                                      std::chrono::milliseconds stall, const Withdrawal& withdrawal,
                                      const std::string& what) {
  const iovec piece{addr, length};
  return move_until_withdrawn(s, &piece, 1, direction, deadline, stall, withdrawal, what);
}

Status move_rest_without_memory(const Socket& s, uint64_t rest, StreamDirection direction,
                                Deadline deadline, std::chrono::milliseconds stall,
                                const std::string& what) {
  const bool into_owner = direction == StreamDirection::kIntoOwner;
  std::vector<uint8_t> scratch(std::min(rest, kWithdrawablePiece), 0);  // zeros to send
  while (rest > 0) {
    const uint64_t piece = std::min<uint64_t>(rest, scratch.size());
    Status st = into_owner ? recv_all(s, scratch.data(), piece, deadline, what, stall)
                           : send_all(s, scratch.data(), piece, deadline, what, stall);
    if (!st.ok())
      return st;
    rest -= piece;
  }
  return {};
}

}  // namespace caf_rdma
