// Tests of LocalCopyPath (actors/transfer/local_copy_path.h) on the deterministic fixture: each
// case names the invariant it checks (the manager's numbering, actors/detail/manager_state.h).
#include <gtest/gtest.h>

#include "tests/actors/manager_logic.h"

namespace caf_rdma::testing {
namespace {

// Invariant 5 (one reply, naming its path), path choice: both buffers this manager's: the
// owner's own copy, without any message to a peer and without the clock moving; overlapping
// ranges of one buffer move as memmove does.
TEST_F(ManagerLogicTest, Inv5_LocalBuffersAreCopiedByTheOwnerWithoutAnyPeer) {
  SCOPED_TRACE("Invariant 5 (path choice)");
  ASSERT_NO_FATAL_FAILURE(start_manager());
  std::vector<uint8_t> a = patterned(2 * kChunk, 14), b(2 * kChunk, 0);
  BufferHandle ha = register_buffer(a);
  BufferHandle hb = register_buffer(b);
  FakePeer& bystander = add_peer(patterned(kChunk, 15));
  const auto t0 = now();
  auto w = transfer(make_write(ha, hb, 5000, /*local_offset=*/3, /*remote_offset=*/7), 100);
  auto rw = reply(w);
  ASSERT_TRUE(rw && *rw) << (rw ? error_message(rw->error()) : "no reply without the clock");
  EXPECT_EQ((*rw)->path, kPathFallback);
  EXPECT_EQ((*rw)->bytes, 5000u);
  EXPECT_TRUE(all_zero(b, 0, 7));
  EXPECT_TRUE(same_bytes(b, 7, a, 3, 5000));
  EXPECT_TRUE(all_zero(b, 5007, b.size() - 5007));
  // One buffer, overlapping ranges: [0, 6000) onto [100, 6100).
  const std::vector<uint8_t> before = a;
  auto m = transfer(make_write(ha, ha, 6000, 0, 100), 100);
  auto rm = reply(m);
  ASSERT_TRUE(rm && *rm) << (rm ? error_message(rm->error()) : "no reply");
  EXPECT_EQ((*rm)->path, kPathFallback);
  EXPECT_TRUE(same_bytes(a, 100, before, 0, 6000)) << "overlapping copy not as memmove";
  EXPECT_TRUE(same_bytes(a, 0, before, 0, 100));
  EXPECT_EQ(now(), t0);
  EXPECT_TRUE(bystander.log().asked.empty()) << "a local copy sent a peer message";
  EXPECT_TRUE(quiet());
}

}  // namespace
}  // namespace caf_rdma::testing
