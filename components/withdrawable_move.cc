// Withdrawable moves (see withdrawable_move.h).
#include "components/withdrawable_move.h"

#include <algorithm>
#include <vector>

namespace caf_rdma {

Result<uint64_t> move_until_withdrawn(const Socket& s, uint8_t* addr, uint64_t length,
                                      StreamDirection direction, Deadline deadline,
                                      std::chrono::milliseconds stall, const Withdrawal& withdrawal,
                                      const std::string& what) {
  const bool into_owner = direction == StreamDirection::kIntoOwner;
  if (!withdrawal) {  // nothing can withdraw it
    Status st = into_owner ? recv_all(s, addr, length, deadline, what, stall)
                           : send_all(s, addr, length, deadline, what, stall);
    if (!st.ok())
      return st.error();
    return length;
  }
  // Invariant 1: the flag is looked at before every call that touches the memory.
  return move_until_stopped(s, addr, length, !into_owner, deadline, what, stall, *withdrawal);
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
