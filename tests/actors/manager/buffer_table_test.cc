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

// Invariant 23: a peer's store or atomic is applied only until its arrival at this node (its
// facade stamps it) plus the time its requester had left, cut to max_timeout; the time it waits
// in the manager's mailbox counts. A late one is refused with timeout: nothing stored or applied.
TEST_F(ManagerLogicTest, Inv23_AStoreOrAtomicTakenUpPastItsTimeLeftIsRefusedNotApplied) {
  SCOPED_TRACE("Invariant 23");
  ManagerOptions o = fallback_options();
  o.max_timeout = std::chrono::milliseconds(1000);
  ASSERT_NO_FATAL_FAILURE(start_manager(o));
  std::vector<uint8_t> mine(3 * kChunk, 0);
  BufferHandle h = register_buffer(mine);
  FakePeer& peer = add_peer(patterned(kChunk, 0));
  const std::vector<uint8_t> src = patterned(kChunk, 23);
  auto answer = [&](uint64_t tag) -> caf::expected<uint64_t> {
    auto it = peer.log().asked_answers.find(tag);
    if (it == peer.log().asked_answers.end())
      return make_rdma_error(ErrorCode::kInternal,
                             "request " + std::to_string(tag) + " not answered");
    return it->second;
  };
  // Held in the manager's mailbox for `held`, then served.
  auto held_store = [&](uint64_t tag, uint64_t offset, uint32_t left_ms, caf::timespan held) {
    peer.ask(tag, facade(), store_atom::value, ref_of(h), offset,
             ByteChunk::copy_of(src.data(), kChunk), uint64_t{0}, left_ms);
    run_jobs_holding_manager();
    advance_holding_manager(held);
    EXPECT_EQ(peer.log().asked_answers.count(tag), 0u) << "served while held";
    run_jobs();
  };
  held_store(1, 0, 100, std::chrono::milliseconds(100));  // its last moment: stored
  auto s1 = answer(1);
  ASSERT_TRUE(s1) << error_message(s1.error());
  EXPECT_EQ(*s1, kChunk);
  EXPECT_TRUE(same_bytes(mine, 0, src, 0, kChunk));
  held_store(2, kChunk, 100, std::chrono::milliseconds(101));  // late: refused
  const std::string buffer_name = "of buffer " + std::to_string(h.id);
  EXPECT_RDMA_ERROR(answer(2), ErrorCode::kTimeout, "refused by manager-under-test",
                    "taken up 101 ms after it reached", "the 100 ms its requester had left",
                    "nothing was stored", buffer_name.c_str());
  EXPECT_TRUE(all_zero(mine, kChunk, kChunk)) << "a late store was applied";
  // A time left beyond max_timeout counts as max_timeout.
  held_store(3, 2 * kChunk, UINT32_MAX, std::chrono::milliseconds(1001));
  EXPECT_RDMA_ERROR(answer(3), ErrorCode::kTimeout,
                    "past manager-under-test's max_timeout of 1000 ms");
  EXPECT_TRUE(all_zero(mine, 2 * kChunk, kChunk)) << "a late store was applied";
  // Atomics: late is not applied, in time is.
  const uint8_t add = wire_kind(TransferKind::kFetchAdd);
  peer.ask(4, facade(), atomic_atom::value, ref_of(h), uint64_t{8}, add, uint64_t{5}, uint64_t{0},
           uint32_t{50});
  run_jobs_holding_manager();
  advance_holding_manager(std::chrono::milliseconds(51));
  run_jobs();
  EXPECT_RDMA_ERROR(answer(4), ErrorCode::kTimeout, "taken up 51 ms", "it was not applied");
  uint64_t word = 0;
  std::memcpy(&word, mine.data() + 8, 8);
  EXPECT_EQ(word, *reinterpret_cast<const uint64_t*>(src.data() + 8)) << "a late atomic applied";
  peer.ask(5, facade(), atomic_atom::value, ref_of(h), uint64_t{8}, add, uint64_t{5}, uint64_t{0},
           uint32_t{50});
  run_jobs_holding_manager();
  advance_holding_manager(std::chrono::milliseconds(50));
  run_jobs();
  auto a5 = answer(5);
  ASSERT_TRUE(a5) << error_message(a5.error());
  EXPECT_EQ(*a5, word);
  uint64_t after = 0;
  std::memcpy(&after, mine.data() + 8, 8);
  EXPECT_EQ(after, word + 5);
  EXPECT_TRUE(quiet());
}

}  // namespace
}  // namespace caf_rdma::testing
