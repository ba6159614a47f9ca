// Tests of the manager's front (actors/manager_transfers.cc, rdma_manager_actor.cc) on the
// deterministic fixture: each case names the invariant it checks (the manager's numbering,
// actors/detail/manager_state.h).
#include <gtest/gtest.h>

#include "tests/actors/manager_logic.h"

namespace caf_rdma::testing {
namespace {

// Invariant 5: a transfer whose owner never answers gets exactly one reply, the timeout, at its
// deadline: not a moment before, and no later than the deadline sweep's slack.
TEST_F(ManagerLogicTest, Inv5_AnUnansweredTransferTimesOutAtItsDeadlineWithOneReply) {
  SCOPED_TRACE("Invariant 5");
  ASSERT_NO_FATAL_FAILURE(start_manager());
  std::vector<uint8_t> mine(kChunk, 0);
  BufferHandle local = register_buffer(mine);
  FakePeer& peer = add_peer(patterned(kChunk, 3));
  const auto t0 = now();
  auto p = transfer(make_read(local, peer.handle()), 100);
  ASSERT_EQ(peer.log().of(fetch_atom::value).size(), 1u) << "the owner was asked";
  advance(std::chrono::milliseconds(99));
  EXPECT_FALSE(reply(p)) << "replied before its timeout";
  ASSERT_TRUE(next_timeout()) << "no timer for the deadline";
  EXPECT_GE(now() - t0, std::chrono::milliseconds(100));
  EXPECT_LE(now() - t0, std::chrono::milliseconds(100) + kDeadlineSlack);
  auto r = reply(p);
  ASSERT_TRUE(r) << "no reply at the deadline";
  EXPECT_RDMA_ERROR((*r), ErrorCode::kTimeout, "timed out after 100 ms", "fake-peer");
  // Every other timer (the requests' backstops) fires: nothing more comes.
  ASSERT_NO_FATAL_FAILURE(run());
  EXPECT_FALSE(reply(p));
  EXPECT_TRUE(quiet()) << "a second reply";
  EXPECT_TRUE(all_zero(mine, 0, kChunk)) << "a timed-out read wrote into the buffer";
}

// Invariant 6: requests that act on this node's memory are served only for this node's actors:
// from an actor of another node they are refused, sent to the manager or to its facade, and
// change nothing.
TEST_F(ManagerLogicTest, Inv6_RequestsOnThisNodesMemoryFromAnotherNodeAreRefused) {
  SCOPED_TRACE("Invariant 6");
  ASSERT_NO_FATAL_FAILURE(start_manager());
  std::vector<uint8_t> a = patterned(kChunk, 13), b(kChunk, 0);
  BufferHandle ha = register_buffer(a);
  BufferHandle hb = register_buffer(b);
  caf::scoped_actor stranger{peer_sys(), true};
  const auto addr = reinterpret_cast<uint64_t>(b.data());
  auto direct_buf = ask_as<BufferHandle>(stranger, manager(), request_buffer_atom::value, addr,
                                         uint64_t{kChunk}, uint8_t{1});
  auto direct_transfer = ask_as<TransferReply>(stranger, manager(), transfer_atom::value,
                                               make_write(ha, hb), uint32_t{100});
  auto direct_release = ask_as<uint64_t>(stranger, manager(), release_buffer_atom::value, ha.id);
  auto via_facade = ask_as<BufferHandle>(stranger, facade(), request_buffer_atom::value, addr,
                                         uint64_t{kChunk}, uint8_t{1});
  auto r1 = reply_to(stranger, direct_buf);
  auto r2 = reply_to(stranger, direct_transfer);
  auto r3 = reply_to(stranger, direct_release);
  ASSERT_TRUE(r1 && r2 && r3) << "a refusal must come at once";
  EXPECT_RDMA_ERROR((*r1), ErrorCode::kPermissionDenied, "request_buffer", "own node");
  EXPECT_RDMA_ERROR((*r2), ErrorCode::kPermissionDenied, "transfer", "own node");
  EXPECT_RDMA_ERROR((*r3), ErrorCode::kPermissionDenied, "release_buffer", "own node");
  auto r4 = reply_to(stranger, via_facade);
  ASSERT_TRUE(r4);
  EXPECT_RDMA_ERROR((*r4), ErrorCode::kPermissionDenied, "request_buffer", "own node");
  EXPECT_TRUE(all_zero(b, 0, kChunk)) << "a refused transfer moved bytes";
  // Nothing changed: the buffer is still registered, and this node's own actor may use it.
  auto mine = transfer(make_write(ha, hb), 100);
  auto r5 = reply(mine);
  ASSERT_TRUE(r5 && *r5) << (r5 ? error_message(r5->error()) : "no reply");
  EXPECT_TRUE(same_bytes(b, 0, a, 0, kChunk));
}

// Invariant 5: a batch gets one reply, at its deadline, with an outcome per op: the op that
// completed keeps its success, the one whose owner never answered times out.
TEST_F(ManagerLogicTest, Inv5_ABatchGetsOneReplyWithAnOutcomePerOp) {
  SCOPED_TRACE("Invariant 5");
  ASSERT_NO_FATAL_FAILURE(start_manager());
  std::vector<uint8_t> a = patterned(kChunk, 17), b(kChunk, 0), c(kChunk, 0);
  BufferHandle ha = register_buffer(a);
  BufferHandle hb = register_buffer(b);
  BufferHandle hc = register_buffer(c);
  FakePeer& peer = add_peer(patterned(kChunk, 18));
  auto p = ask<std::vector<TransferOutcome>>(
      manager(), batch_atom::value,
      std::vector<TransferOp>{make_write(ha, hb), make_read(hc, peer.handle())}, uint32_t{100});
  EXPECT_TRUE(same_bytes(b, 0, a, 0, kChunk)) << "the local op did not run at once";
  EXPECT_FALSE(reply(p)) << "replied with an op still open";
  advance(std::chrono::milliseconds(99));
  EXPECT_FALSE(reply(p));
  advance(std::chrono::milliseconds(2));
  auto r = reply(p);
  ASSERT_TRUE(r && *r) << "no single reply at the deadline";
  ASSERT_EQ((*r)->size(), 2u);
  EXPECT_TRUE((**r)[0].ok()) << (**r)[0].message;
  EXPECT_EQ((**r)[0].path, kPathFallback);
  EXPECT_EQ((**r)[0].bytes, kChunk);
  EXPECT_EQ((**r)[1].code, static_cast<uint8_t>(ErrorCode::kTimeout)) << (**r)[1].message;
  EXPECT_TRUE(all_zero(c, 0, kChunk));
  ASSERT_NO_FATAL_FAILURE(run());
  EXPECT_TRUE(quiet()) << "a second reply";
}

}  // namespace
}  // namespace caf_rdma::testing
