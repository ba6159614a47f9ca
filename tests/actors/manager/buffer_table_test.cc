// Tests of BufferTable (actors/manager/buffer_table.h) on the deterministic fixture: each case
// names the invariant it checks (the manager's numbering, actors/detail/manager_state.h).
#include <gtest/gtest.h>

#include "tests/actors/manager_logic.h"

namespace caf_rdma::testing {
namespace {

// Invariant 2: a buffer released while a transfer uses it is refused to new transfers at once,
// and its release is answered only after that transfer's reply (message by message).
TEST_F(ManagerLogicTest, Inv2_AReleaseWaitsForTheTransferInFlightAndRefusesNewOnes) {
  SCOPED_TRACE("Invariant 2");
  ASSERT_NO_FATAL_FAILURE(start_manager());
  std::vector<uint8_t> mine = patterned(kChunk, 9);
  BufferHandle local = register_buffer(mine);
  FakePeer& peer = add_peer(patterned(kChunk, 0));
  auto write = transfer(make_write(local, peer.handle()), 1000);
  auto stores = peer.log().of(store_atom::value);
  ASSERT_EQ(stores.size(), 1u);
  auto rel = release(local.id);
  EXPECT_FALSE(reply(rel)) << "released while a transfer still uses the buffer";
  auto refused = transfer(make_write(local, peer.handle()), 1000);
  auto r0 = reply(refused);
  ASSERT_TRUE(r0) << "a new transfer on a released buffer waits instead of being refused";
  EXPECT_RDMA_ERROR((*r0), ErrorCode::kReleased, "was released");
  EXPECT_EQ(peer.log().of(store_atom::value).size(), 1u) << "the refused transfer reached the peer";
  peer.answer(stores[0]);
  run_jobs();
  EXPECT_TRUE(answered_first(write)) << "the release was answered before the transfer that used "
                                        "the buffer (or nothing was answered)";
  auto w = reply(write);
  auto released = reply(rel);
  ASSERT_TRUE(w && released) << "the transfer ended, but not both were answered";
  ASSERT_TRUE(*w) << error_message(w->error());
  EXPECT_EQ((*w)->bytes, kChunk);
  ASSERT_TRUE(*released) << error_message(released->error());
  EXPECT_EQ(**released, kChunk);
  EXPECT_TRUE(same_bytes(peer.memory(), 0, mine, 0, kChunk));
  EXPECT_TRUE(quiet());
}

// Invariant 1: a released id stays known as released (refused by transfers and by a second
// release) and no later buffer gets it.
TEST_F(ManagerLogicTest, Inv1_AReleasedIdIsRefusedAndNeverReused) {
  SCOPED_TRACE("Invariant 1");
  ASSERT_NO_FATAL_FAILURE(start_manager());
  std::vector<uint8_t> a = patterned(kChunk, 1), b(kChunk, 0), c(kChunk, 0);
  BufferHandle ha = register_buffer(a);
  BufferHandle hb = register_buffer(b);
  auto r = release(ha.id);
  auto ra = reply(r);
  ASSERT_TRUE(ra && *ra) << "an idle buffer's release is answered at once";
  EXPECT_EQ(**ra, kChunk);
  auto again = release(ha.id);
  auto r2 = reply(again);
  ASSERT_TRUE(r2);
  EXPECT_RDMA_ERROR((*r2), ErrorCode::kReleased, "was released");
  auto t = transfer(make_write(ha, hb), 100);
  auto rt = reply(t);
  ASSERT_TRUE(rt);
  EXPECT_RDMA_ERROR((*rt), ErrorCode::kReleased, "was released");
  auto t2 = transfer(make_write(hb, ha), 100);  // as the remote side too
  auto rt2 = reply(t2);
  ASSERT_TRUE(rt2);
  EXPECT_RDMA_ERROR((*rt2), ErrorCode::kReleased, "was released");
  EXPECT_TRUE(all_zero(b, 0, kChunk));
  BufferHandle hc = register_buffer(c);
  EXPECT_NE(hc.id, ha.id);
  EXPECT_GT(hc.id, hb.id) << "ids are not handed out in order: a released one may come back";
  EXPECT_TRUE(quiet());
}

}  // namespace
}  // namespace caf_rdma::testing
