// Tests of LinkRecovery (actors/manager/link_recovery.h) and of the questions PeerTable asks peers
// (actors/manager/peer_table.h) on the deterministic fixture: each case names the invariant or
// the rule it checks (the manager's numbering, actors/detail/manager_state.h).
#include <gtest/gtest.h>

#include "tests/actors/manager_logic.h"

namespace caf_rdma::testing {
namespace {

// Invariant 13 (and ask_peer's promise): when the peer's actor ends, every op and question on
// its way to it fails at once with peer_unavailable, before any clock moves; later ops to it
// fail at once too.
TEST_F(ManagerLogicTest, Inv13_APeerThatGoesDownFailsEverythingInFlightAtOnce) {
  SCOPED_TRACE("Invariant 13");
  ASSERT_NO_FATAL_FAILURE(start_manager());
  std::vector<uint8_t> in(kChunk, 0), out = patterned(kChunk, 7);
  BufferHandle hin = register_buffer(in);
  BufferHandle hout = register_buffer(out);
  FakePeer& peer = add_peer(patterned(kChunk, 8));
  const auto t0 = now();
  auto read = transfer(make_read(hin, peer.handle()), 10000);
  auto write = transfer(make_write(hout, peer.handle()), 10000);
  auto check = ask<TransferOutcome>(manager(), ask_check_atom::value, peer.handle(), uint64_t{0},
                                    uint64_t{kChunk}, static_cast<uint8_t>(TransferKind::kRead),
                                    uint32_t{10000});
  ASSERT_EQ(peer.log().of(fetch_atom::value).size(), 1u);
  ASSERT_EQ(peer.log().of(store_atom::value).size(), 1u);
  ASSERT_EQ(peer.log().of(buf_check_atom::value).size(), 1u);
  EXPECT_FALSE(reply(read) || reply(write) || reply(check));
  peer.kill();
  run_jobs();
  EXPECT_EQ(now(), t0) << "the clock moved";
  auto rr = reply(read);
  auto rw = reply(write);
  auto rc = reply(check);
  ASSERT_TRUE(rr && rw && rc) << "an op or question waits for its timeout instead";
  EXPECT_RDMA_ERROR((*rr), ErrorCode::kPeerUnavailable, "fake-peer", "down");
  // Its store chunk may sit in the owner's mailbox (chunk_path.h invariant 1).
  EXPECT_RDMA_ERROR((*rw), ErrorCode::kPeerUnavailable, "fake-peer", "down",
                    "whether what was on its way took effect is unknown");
  EXPECT_RDMA_ERROR((*rc), ErrorCode::kPeerUnavailable, "fake-peer", "down");
  // Down for good: the next op fails at once.
  auto later = transfer(make_read(hin, peer.handle()), 10000);
  auto rl = reply(later);
  ASSERT_TRUE(rl);
  EXPECT_RDMA_ERROR((*rl), ErrorCode::kPeerUnavailable, "fake-peer", "down");
  ASSERT_NO_FATAL_FAILURE(run());
  EXPECT_TRUE(quiet()) << "a second reply";
  EXPECT_TRUE(all_zero(in, 0, kChunk));
  // The buffers are free again: their releases are answered at once.
  auto rel = release(hout.id);
  auto rr2 = reply(rel);
  ASSERT_TRUE(rr2 && *rr2) << "a failed op still holds its buffer";
}

// owner_verdict.h: RdmaClient asks its manager (ask_check) why the owner refused what its NIC
// failed, within what is left of the op's time, and the manager relays the question within that
// time: an owner silent until then makes the op's timeout on a lane as on the manager's own RDMA
// path. Not the handshake timeout (30 s here), which let a long op's question fail first and
// answer the NIC's code instead.
TEST_F(ManagerLogicTest, AClientsQuestionToASilentOwnerEndsAtTheTimeItWasGiven) {
  ASSERT_NO_FATAL_FAILURE(start_manager());
  FakePeer& peer = add_peer(patterned(kChunk, 8));
  auto check = ask<TransferOutcome>(manager(), ask_check_atom::value, peer.handle(), uint64_t{0},
                                    uint64_t{kChunk}, static_cast<uint8_t>(TransferKind::kRead),
                                    uint32_t{2000});
  ASSERT_EQ(peer.log().of(buf_check_atom::value).size(), 1u) << "the owner was not asked";
  advance(std::chrono::milliseconds(1999));
  EXPECT_FALSE(reply(check)) << "answered before the owner's time was up";
  advance(std::chrono::milliseconds(2));
  auto rc = reply(check);
  ASSERT_TRUE(rc) << "still waiting after the time it was given";
  ASSERT_FALSE(*rc) << "the silent owner's question succeeded";
  // What RdmaClient makes of it (its call's error code): the op's timeout.
  EXPECT_EQ(request_error_code(rc->error()), ErrorCode::kTimeout) << error_message(rc->error());
  ASSERT_NO_FATAL_FAILURE(run());
  EXPECT_TRUE(quiet()) << "a second reply";
}

}  // namespace
}  // namespace caf_rdma::testing
