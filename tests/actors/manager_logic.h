// What the tests of the manager's logic share (ManagerLogicTest on the deterministic fixture,
// tests/actors/deterministic_fixture.h): every order of replies, answers, deaths and timer
// expiries is written out in the test, and time is the test scheduler's clock. Each case names
// the invariant it checks. Native only: the manager runs the fallback without a device and
// without the stream channel (nothing runs on another thread).
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "tests/actors/deterministic_fixture.h"

namespace caf_rdma::testing {

inline constexpr uint64_t kChunk = 4096;

/// The backstop CAF requests to peers get beyond a transfer's timeout (manager_state.h).
inline constexpr auto kBackstop = std::chrono::seconds(1);

class ManagerLogicTest : public DeterministicFixture {
protected:
  Pending<TransferReply> transfer(const TransferOp& op, uint32_t timeout_ms) {
    return ask<TransferReply>(manager(), transfer_atom::value, op, timeout_ms);
  }
  Pending<uint64_t> release(uint64_t id) {
    return ask<uint64_t>(manager(), release_buffer_atom::value, id);
  }
};

/// Whether [from, from + n) of `a` equals [at, at + n) of `b`.
inline bool same_bytes(const std::vector<uint8_t>& a, uint64_t from, const std::vector<uint8_t>& b,
                       uint64_t at, uint64_t n) {
  return from + n <= a.size() && at + n <= b.size() &&
         std::memcmp(a.data() + from, b.data() + at, n) == 0;
}

inline bool all_zero(const std::vector<uint8_t>& a, uint64_t from, uint64_t n) {
  return std::all_of(a.begin() + static_cast<long>(from), a.begin() + static_cast<long>(from + n),
                     [](uint8_t b) { return b == 0; });
}

}  // namespace caf_rdma::testing
