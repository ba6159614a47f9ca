// Tests of FetchWindows (actors/manager/fetch_windows.h) on the deterministic fixture: each case
// names the invariant it checks (the manager's numbering, actors/detail/manager_state.h).
#include <gtest/gtest.h>

#include "tests/actors/manager_logic.h"

namespace caf_rdma::testing {
namespace {

class WindowTest : public ManagerLogicTest {
protected:
  void start(std::chrono::milliseconds window_wait) {
    ManagerOptions o = fallback_options();
    o.peer_window_bytes = 2 * kChunk;
    o.window_wait = window_wait;
    ASSERT_NO_FATAL_FAILURE(start_manager(o));
    mine_ = patterned(4 * kChunk, 11);
    handle_ = register_buffer(mine_);
  }
  /// The peer node asks for chunks 0, 1 and 2 of our buffer: two fill its window.
  void ask_three(FakePeer& peer) {
    for (uint64_t i = 0; i < 3; ++i)
      peer.fetch(i, facade(), ref_of(handle_), i * kChunk, kChunk);
    run_jobs();
  }
  void expect_served(FakePeer& peer, uint64_t tag) {
    auto it = peer.log().fetched.find(tag);
    ASSERT_NE(it, peer.log().fetched.end()) << "fetch " << tag << " not answered";
    ASSERT_TRUE(it->second.ok) << error_message(it->second.error);
    EXPECT_TRUE(same_bytes(it->second.bytes, 0, mine_, tag * kChunk, kChunk))
        << "fetch " << tag << " carries other bytes";
  }
  std::vector<uint8_t> mine_;
  BufferHandle handle_;
};

// Invariant 12: as owner, a fetch beyond the peer node's window waits, and is served as soon as
// the peer proves it read earlier answers (it echoes a read_ack).
TEST_F(WindowTest, Inv12_AFetchBeyondThePeerWindowIsServedWhenTheWindowOpens) {
  SCOPED_TRACE("Invariant 12");
  ASSERT_NO_FATAL_FAILURE(start(std::chrono::milliseconds(500)));
  FakePeer& peer = add_peer({}, "peer-node");
  ask_three(peer);
  expect_served(peer, 0);
  expect_served(peer, 1);
  EXPECT_EQ(peer.log().fetched.count(2), 0u) << "served beyond the window";
  auto acks = peer.log().of(read_ack_atom::value);
  ASSERT_FALSE(acks.empty()) << "the owner never asked for proof";
  advance(std::chrono::milliseconds(100));
  EXPECT_EQ(peer.log().fetched.count(2), 0u) << "the window opened without proof";
  peer.answer(acks[0]);  // the first read_ack proves the first answer was read
  run_jobs();
  expect_served(peer, 2);
}

// Invariant 12 (fetch_windows.h invariant 1): a read_ack's echo releases only the answers
// served before that read_ack was sent, never those served after it: with a window of two
// chunks, the echo of the first read_ack (sent after chunk 0) lets one waiting chunk through,
// and the next fetch waits again until the second read_ack (sent after chunk 1) is echoed.
TEST_F(WindowTest, Inv12_AReadAckReleasesOnlyWhatWasServedBeforeIt) {
  SCOPED_TRACE("Invariant 12");
  ASSERT_NO_FATAL_FAILURE(start(std::chrono::milliseconds(5000)));
  FakePeer& peer = add_peer({}, "peer-node");
  ask_three(peer);
  expect_served(peer, 0);
  expect_served(peer, 1);
  auto acks = peer.log().of(read_ack_atom::value);
  ASSERT_EQ(acks.size(), 2u) << "a read_ack after chunk 0, one after chunk 1";
  peer.answer(acks[0]);
  run_jobs();
  expect_served(peer, 2);  // chunk 0 proven read: room for one
  peer.fetch(3, facade(), ref_of(handle_), 3 * kChunk, kChunk);
  run_jobs();
  EXPECT_EQ(peer.log().fetched.count(3), 0u)
      << "the first read_ack's echo released chunks served after it was sent";
  peer.answer(acks[1]);  // chunk 1 proven read
  run_jobs();
  expect_served(peer, 3);
}

// Invariant 12: a fetch waiting for its window fails at window_wait with resource_exhausted
// naming the peer and the window; not before.
TEST_F(WindowTest, Inv12_AFetchWaitingForItsWindowFailsAtWindowWait) {
  SCOPED_TRACE("Invariant 12");
  ASSERT_NO_FATAL_FAILURE(start(std::chrono::milliseconds(500)));
  FakePeer& peer = add_peer({}, "peer-node");
  ask_three(peer);
  expect_served(peer, 0);
  expect_served(peer, 1);
  advance(std::chrono::milliseconds(499));
  EXPECT_EQ(peer.log().fetched.count(2), 0u) << "the waiting fetch ended before window_wait";
  advance(std::chrono::milliseconds(2));
  auto it = peer.log().fetched.find(2);
  ASSERT_NE(it, peer.log().fetched.end()) << "the waiting fetch outlived window_wait";
  EXPECT_FALSE(it->second.ok);
  EXPECT_EQ(error_code(it->second.error), ErrorCode::kResourceExhausted)
      << error_message(it->second.error);
  EXPECT_NE(error_message(it->second.error).find("has not proven it read"), std::string::npos)
      << error_message(it->second.error);
  EXPECT_NE(error_message(it->second.error).find("peer_window_bytes"), std::string::npos);
}

}  // namespace
}  // namespace caf_rdma::testing
