// Striping (actors/manager/rails.h) on the fake transport (tests/actors/fake_nic.h) in the
// deterministic fixture: two managers, each with a primary fake NIC and one rail on one fake
// fabric, the owner a real manager on the peer's node; the test decides when each slice
// completes and which fails. The real path (ibverbs, two Soft-RoCE wires) is striping_test's,
// in the VM.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "tests/actors/fake_nic.h"
#include "tests/actors/manager_logic.h"

namespace caf_rdma::testing {
namespace {

constexpr uint64_t kSize = 1 << 20;

class StripingOnFakeNics : public ManagerLogicTest {
protected:
  /// A manager of this host's two fake NICs, `primary` and `rail`: RDMA only, every op of 64 KiB
  /// or more striped over one queue pair per pair of devices.
  static ManagerOptions options(const std::shared_ptr<FakeNic>& primary,
                                const std::shared_ptr<FakeNic>& rail, const char* name) {
    ManagerOptions o = fallback_options();
    o.mode = TransportMode::kRdma;
    o.name = name;
    o.open_nic = FakeNic::opener_of({primary, rail});
    o.ibverbs.device_name = primary->device_name();
    o.rail_devices = {rail->device_name()};
    o.stripe_min_bytes = 64 << 10;
    o.stripe_qps = 1;
    return o;
  }
  /// Both managers started: the one under test on node A, the owner on node B.
  void start_both() {
    ASSERT_NO_FATAL_FAILURE(start_manager(options(a0_, a1_, "requester")));
    owner_ = start_peer_manager(options(b0_, b1_, "owner"));
    ASSERT_TRUE(owner_);
  }
  /// `mem` registered with the owner (read-write), asked from the owner's node.
  BufferHandle register_on_owner(std::vector<uint8_t>& mem) {
    caf::scoped_actor there(peer_sys(), true);
    auto p = ask_as<BufferHandle>(there, owner_, request_buffer_atom::value,
                                  reinterpret_cast<uint64_t>(mem.data()), uint64_t{mem.size()},
                                  static_cast<uint8_t>(BufferAccess::kReadWrite));
    auto h = reply_to(there, p);
    if (!h || !*h) {
      ADD_FAILURE() << "request_buffer: " << (h ? error_message(h->error()) : "no answer");
      return {};
    }
    return **h;
  }
  /// The one queue pair of `nic` with ops outstanding, or a failed test.
  static std::shared_ptr<FakeQueuePair> busy_qp(const FakeNic& nic) {
    std::shared_ptr<FakeQueuePair> out;
    for (auto& qp : nic.queue_pairs())
      if (qp->pending_ops() > 0) {
        EXPECT_EQ(out, nullptr) << "more than one queue pair of " << nic.device_name() << " busy";
        out = qp;
      }
    EXPECT_NE(out, nullptr) << "no queue pair of " << nic.device_name() << " has an op";
    return out;
  }

  /// Both managers started, a 1 MiB buffer of the owner (pattern `seed`) and one here, and a
  /// striped read (or write) of it posted: its two slices out, one on each device's queue pair
  /// (rail_, primary_).
  Pending<TransferReply> striped(bool write, uint32_t seed) {
    start_both();
    theirs_ = patterned(kSize, seed);
    mine_.assign(kSize, 0);
    remote_ = register_on_owner(theirs_);
    local_ = register_buffer(mine_);
    auto p = transfer(
        write ? make_write(local_, remote_, kSize, 0, 0) : make_read(local_, remote_, kSize, 0, 0),
        1000);
    run_jobs();
    rail_ = busy_qp(*a1_);
    primary_ = busy_qp(*a0_);
    return p;
  }

  std::shared_ptr<FakeFabric> fabric_ = FakeFabric::make();
  std::shared_ptr<FakeNic> a0_ = FakeNic::make("fakeA0", fabric_);
  std::shared_ptr<FakeNic> a1_ = FakeNic::make("fakeA1", fabric_);
  std::shared_ptr<FakeNic> b0_ = FakeNic::make("fakeB0", fabric_);
  std::shared_ptr<FakeNic> b1_ = FakeNic::make("fakeB1", fabric_);
  rdma_manager_actor owner_;
  std::vector<uint8_t> theirs_, mine_;
  BufferHandle remote_, local_;
  std::shared_ptr<FakeQueuePair> rail_, primary_;
};

TEST_F(StripingOnFakeNics, ASliceThatFailsOnARailRunsAgainOnThePrimaryQueuePair) {
  SCOPED_TRACE("rails.h invariants 19 and 21 (failover)");
  auto r = striped(/*write=*/false, 41);
  ASSERT_TRUE(rail_ && primary_);
  ASSERT_EQ(remote_.rails.size(), 1u) << "the owner's handle names no rail";
  EXPECT_EQ(remote_.rails[0].device, "fakeB1");
  ASSERT_EQ(rail_->pending_ops(), 1u);
  ASSERT_EQ(primary_->pending_ops(), 1u);
  // The rail's slice fails (its link pulled, as a NIC reports it): nothing is answered yet, the
  // slice runs again on the primary queue pair.
  ASSERT_TRUE(rail_->fail_next(OpFault::kOther, "the rail's link was pulled"));
  run_jobs();
  EXPECT_FALSE(reply(r).has_value()) << "answered while a slice was still moving";
  EXPECT_EQ(primary_->pending_ops(), 2u) << "the failed slice did not fail over";
  EXPECT_EQ(primary_->complete_all(), 2u);
  run_jobs();
  auto rr = reply(r);
  ASSERT_TRUE(rr.has_value()) << "no reply";
  ASSERT_TRUE(*rr) << error_message(rr->error());
  EXPECT_EQ((*rr)->bytes, kSize);
  EXPECT_TRUE(mine_ == theirs_) << "a byte of the striped read is wrong";
  auto stats = call<ManagerStats>(manager(), stats_atom::value);
  ASSERT_TRUE(stats) << error_message(stats.error());
  EXPECT_EQ(stats->striped_ops, 1u);
  EXPECT_EQ(stats->stripe_slices, 2u);
  EXPECT_EQ(stats->stripe_failovers, 1u);
  EXPECT_TRUE(quiet());
}

TEST_F(StripingOnFakeNics, ASliceThatFailsOnThePrimaryQueuePairFailsTheOpOnceEverySliceEnded) {
  SCOPED_TRACE("rails.h invariant 19 (the reply after every slice; the primary's error)");
  auto w = striped(/*write=*/true, 42);
  ASSERT_TRUE(rail_ && primary_);
  ASSERT_TRUE(primary_->fail_next(OpFault::kRemoteAccess, "the owner's key refused the write"));
  run_jobs();
  // The rail's slice still moves: no answer may come before it ended.
  EXPECT_FALSE(reply(w).has_value()) << "answered while the rail's slice was still moving";
  EXPECT_EQ(rail_->complete_all(), 1u);
  run_jobs();
  auto rw = reply(w);
  ASSERT_TRUE(rw.has_value()) << "no reply once every slice ended";
  ASSERT_FALSE(*rw) << "a write with a failed slice was answered done";
  EXPECT_NE(error_message(rw->error()).find("the owner's key refused the write"), std::string::npos)
      << error_message(rw->error());
  EXPECT_TRUE(quiet());
}

TEST_F(StripingOnFakeNics, ARailWhosePortGoesDownFailsOverAtOnceAndGetsNoSlices) {
  SCOPED_TRACE("rails.h invariant 21 (port down)");
  auto r = striped(/*write=*/false, 43);
  ASSERT_TRUE(rail_ && primary_);
  // The rail's link is pulled while its slice is out: its queue pair is flushed at once (the
  // fake NIC flushes on abort as a device does), and the slice runs on the primary one.
  a1_->set_port_active(false, "link pulled");
  run_jobs();
  EXPECT_EQ(rail_->pending_ops(), 0u) << "the downed rail's slice was not flushed";
  EXPECT_EQ(primary_->pending_ops(), 2u) << "the flushed slice did not fail over";
  EXPECT_FALSE(reply(r).has_value()) << "answered while a slice was still moving";
  EXPECT_EQ(primary_->complete_all(), 2u);
  run_jobs();
  auto rr = reply(r);
  ASSERT_TRUE(rr.has_value()) << "no reply";
  ASSERT_TRUE(*rr) << error_message(rr->error());
  EXPECT_TRUE(mine_ == theirs_) << "a byte of the striped read is wrong";
  // While the port is down, the next large op takes no slice on the rail_.
  std::fill(mine_.begin(), mine_.end(), 0);
  auto again = transfer(make_read(local_, remote_, kSize, 0, 0), 1000);
  run_jobs();
  for (auto& qp : a1_->queue_pairs())
    EXPECT_EQ(qp->pending_ops(), 0u) << "a slice went to the rail whose port is down";
  ASSERT_GE(primary_->complete_all(), 1u);
  run_jobs();
  auto ra = reply(again);
  ASSERT_TRUE(ra.has_value()) << "no reply";
  ASSERT_TRUE(*ra) << error_message(ra->error());
  EXPECT_TRUE(mine_ == theirs_) << "a byte of the read with the rail down is wrong";
  auto stats = call<ManagerStats>(manager(), stats_atom::value);
  ASSERT_TRUE(stats) << error_message(stats.error());
  EXPECT_EQ(stats->stripe_failovers, 1u);
  EXPECT_TRUE(quiet());
}

TEST_F(StripingOnFakeNics, ABatchOfSmallReadsThatMovesEnoughTogetherSpreadsOverTheRails) {
  SCOPED_TRACE("rails.h invariant 19 (a batch stripes by its bytes together)");
  start_both();
  theirs_ = patterned(kSize, 44);
  mine_.assign(kSize, 0);
  remote_ = register_on_owner(theirs_);
  local_ = register_buffer(mine_);
  // 8 blocks of 4 KiB (32 KiB together, under stripe_min_bytes): all on the primary device.
  constexpr uint64_t kBlock = 4096;
  auto blocks = [&](uint64_t first, uint64_t n) {
    std::vector<TransferOp> ops;
    for (uint64_t i = first; i < first + n; ++i)  // local block i from the owner's block 255 - i
      ops.push_back(make_read(local_, remote_, kBlock, i * kBlock, (255 - i) * kBlock));
    return ops;
  };
  auto finish = [&](Pending<std::vector<TransferOutcome>>& p, size_t n) {
    std::optional<caf::expected<std::vector<TransferOutcome>>> r;
    for (int round = 0; round < 8 && !r; ++round) {
      for (auto& nic : {a0_, a1_})
        for (auto& qp : nic->queue_pairs())
          qp->complete_all();
      run_jobs();
      r = reply(p);
    }
    ASSERT_TRUE(r && *r) << (r ? error_message(r->error()) : "no reply");
    ASSERT_EQ((*r)->size(), n);
    for (const TransferOutcome& out : **r)
      EXPECT_TRUE(out.ok()) << out.message;
  };
  auto small =
      ask<std::vector<TransferOutcome>>(manager(), batch_atom::value, blocks(0, 8), uint32_t{1000});
  run_jobs();
  for (auto& qp : a1_->queue_pairs())
    EXPECT_EQ(qp->pending_ops(), 0u) << "a small batch went to the rail";
  ASSERT_NO_FATAL_FAILURE(finish(small, 8));
  // 64 blocks (256 KiB together): spread over the primary device and the rail, each whole.
  auto big = ask<std::vector<TransferOutcome>>(manager(), batch_atom::value, blocks(8, 64),
                                               uint32_t{1000});
  run_jobs();
  size_t on_rail = 0, on_primary = 0;
  for (auto& qp : a1_->queue_pairs())
    on_rail += qp->pending_ops();
  for (auto& qp : a0_->queue_pairs())
    on_primary += qp->pending_ops();
  EXPECT_EQ(on_rail + on_primary, 64u) << "an op was cut in slices, or is missing";
  EXPECT_GE(on_rail, 16u) << "the batch did not spread over the rail";
  EXPECT_GE(on_primary, 16u);
  ASSERT_NO_FATAL_FAILURE(finish(big, 64));
  for (uint64_t i = 0; i < 72; ++i)
    ASSERT_TRUE(same_bytes(mine_, i * kBlock, theirs_, (255 - i) * kBlock, kBlock))
        << "block " << i;
  EXPECT_TRUE(all_zero(mine_, 72 * kBlock, kSize - 72 * kBlock));
  auto stats = call<ManagerStats>(manager(), stats_atom::value);
  ASSERT_TRUE(stats) << error_message(stats.error());
  EXPECT_EQ(stats->striped_ops, 0u) << "a 4 KiB op was cut in slices";
  EXPECT_EQ(stats->spread_ops, on_rail);
  EXPECT_TRUE(quiet());
}

TEST_F(StripingOnFakeNics, ABatchSpreadOverARailThatFailsMovesEveryOpOnThePrimary) {
  SCOPED_TRACE("rails.h invariants 19 and 21 (a spread batch's failover)");
  start_both();
  theirs_.assign(kSize, 0);
  mine_ = patterned(kSize, 45);  // written into the owner's zeros
  remote_ = register_on_owner(theirs_);
  local_ = register_buffer(mine_);
  constexpr uint64_t kBlock = 8192, kOps = 32;  // 256 KiB together
  std::vector<TransferOp> ops;
  for (uint64_t i = 0; i < kOps; ++i)
    ops.push_back(make_write(local_, remote_, kBlock, (kOps - 1 - i) * kBlock, i * kBlock));
  auto p = ask<std::vector<TransferOutcome>>(manager(), batch_atom::value, ops, uint32_t{1000});
  run_jobs();
  rail_ = busy_qp(*a1_);
  primary_ = busy_qp(*a0_);
  ASSERT_TRUE(rail_ && primary_);
  const size_t on_rail = rail_->pending_ops();
  ASSERT_GE(on_rail, 2u);
  // The rail's link is pulled under its first op: it fails, the rest of the rail's are flushed,
  // and each of them runs again on the primary queue pair. No reply before that.
  ASSERT_TRUE(rail_->fail_next(OpFault::kOther, "the rail's link was pulled"));
  run_jobs();
  EXPECT_FALSE(reply(p).has_value()) << "answered while ops were still moving";
  EXPECT_EQ(rail_->pending_ops(), 0u);
  EXPECT_EQ(primary_->pending_ops(), kOps) << "a rail's op did not fail over";
  EXPECT_EQ(primary_->complete_all(), kOps);
  run_jobs();
  auto r = reply(p);
  ASSERT_TRUE(r && *r) << (r ? error_message(r->error()) : "no reply");
  for (const TransferOutcome& out : **r)
    EXPECT_TRUE(out.ok()) << out.message;
  for (uint64_t i = 0; i < kOps; ++i)
    ASSERT_TRUE(same_bytes(theirs_, i * kBlock, mine_, (kOps - 1 - i) * kBlock, kBlock))
        << "block " << i;
  auto stats = call<ManagerStats>(manager(), stats_atom::value);
  ASSERT_TRUE(stats) << error_message(stats.error());
  EXPECT_EQ(stats->stripe_failovers, on_rail);
  EXPECT_TRUE(quiet());
}

}  // namespace
}  // namespace caf_rdma::testing
