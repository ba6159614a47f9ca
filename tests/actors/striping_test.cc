// Several devices per node (actors/manager/rails.h, invariants 18-20) in the Soft-RoCE VM's
// quad mode (BUILD: RXE_VM_MODE=quad): node a on rxe0 + rxe2, node b on rxe1 + rxe3, two wires
// (veth0-veth1, veth2-veth3), so each node has two devices joined rail by rail. Large reads and
// writes are cut in slices over both rails (and two queue pairs per pair of devices), every
// byte checked; a rail whose device the owner loses, or whose link goes down mid-transfer,
// hands its slices to the primary device; every transfer still moves every byte.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <thread>

#include "actors/rdma_client.h"
#include "tests/actors/manager_fixture.h"
#include "tests/device_control.h"

namespace caf_rdma::testing {
namespace {

constexpr uint64_t kStripeMin = 1 << 20;

/// A node on `primary` with `rail`; `fail_fast`: its queue pairs give up on a silent peer after
/// ~0.5 s (the tests that take a rail away), else after the default ~8.6 s (the others: a
/// guest stalled by a loaded host must not fail their transfers: "transport retry counter
/// exceeded" was seen in CI with the short limit on every test).
std::unique_ptr<TestNode> start_on(const std::string& primary, const std::string& rail,
                                   uint32_t stripe_qps = 2, bool fail_fast = false) {
  NodeOptions o;
  auto env = ManagerOptions::from_env();
  EXPECT_TRUE(env.ok()) << env.error().to_string();
  o.manager = env.ok() ? *env : ManagerOptions{};
  o.manager.mode = TransportMode::kRdma;
  o.manager.ibverbs.device_name = primary;
  if (!rail.empty())
    o.manager.rail_devices = {rail};
  o.manager.stripe_min_bytes = kStripeMin;
  o.manager.stripe_qps = stripe_qps;
  // A rail that stops answering fails its slices after ~0.5 s (4.096 us * 2^14 per try), not
  // the default ~8.6 s; 6 retries, since Soft-RoCE takes retry_cnt 7 for "retry forever"
  // (rxe_comp.c; the IB spec gives 7 no such meaning, only rnr_retry).
  if (fail_fast) {
    o.manager.ibverbs.qp_timeout = 14;
    o.manager.ibverbs.retry_cnt = 6;
  }
  auto n = RdmaNode::start(o);
  EXPECT_TRUE(n.ok()) << n.error().to_string();
  return n.ok() ? std::make_unique<TestNode>(std::move(*n)) : nullptr;
}

class StripingTest : public DeviceChangingTest {
protected:
  StripingTest()
      : DeviceChangingTest("stripes over rxe0+rxe2 and rxe1+rxe3 and cuts the rxe2-rxe3 wire") {}
  void SetUp() override {
    DeviceChangingTest::SetUp();
    if (IsSkipped())
      return;
    a_ = start_on("rxe0", "rxe2");
    b_ = start_on("rxe1", "rxe3");
    ASSERT_TRUE(a_ && b_) << "the VM must run in quad mode (RXE_VM_MODE=quad)";
    ASSERT_EQ(a_->stats().rails, std::vector<std::string>{"rxe2"});
    ASSERT_EQ(b_->stats().rails, std::vector<std::string>{"rxe3"});
  }
  /// a_ and b_ again, with queue pairs that fail fast (start_on).
  void restart_failing_fast() {
    b_.reset();
    a_.reset();
    a_ = start_on("rxe0", "rxe2", 2, true);
    b_ = start_on("rxe1", "rxe3", 2, true);
    ASSERT_TRUE(a_ && b_);
  }
  void TearDown() override {
    b_.reset();
    a_.reset();
    if (rxe3_deleted_)
      (void)run_command({"/usr/bin/rdma", "link", "add", "rxe3", "type", "rxe", "netdev", "veth3"});
    if (link_down_) {
      (void)run_command({"/usr/sbin/ip", "link", "set", "veth3", "up"});
      (void)run_command({"/usr/sbin/ip", "route", "replace", "10.99.2.1", "dev", "veth3", "src",
                         "10.99.3.1", "table", "103"});
      (void)run_command({"/usr/sbin/ip", "route", "replace", "10.99.3.1", "dev", "veth2", "src",
                         "10.99.2.1", "table", "102"});
    }
  }

  /// Writes `n` bytes of a's memory (pattern `seed`) into b's buffer at `remote_offset`, then
  /// reads them back into fresh memory at a; checks every byte both ways.
  void write_and_read_back(uint64_t n, uint64_t remote_offset, uint32_t seed) {
    Memory src(n, seed), back(n), dst(remote_offset + n);
    BufferHandle dst_at_a = remote_view(*b_, *a_, dst, "dst");
    auto src_h = a_->request_buffer(src);
    auto back_h = a_->request_buffer(back);
    ASSERT_TRUE(src_h && back_h);
    auto w = a_->transfer(make_write(*src_h, dst_at_a, n, 0, remote_offset), 60000);
    ASSERT_TRUE(w) << n << " bytes: " << error_message(w.error());
    EXPECT_EQ(w->path, kPathRdma);
    ASSERT_TRUE(holds_pattern(dst, remote_offset, n, seed, 0)) << n << " bytes written";
    auto r = a_->transfer(make_read(*back_h, dst_at_a, n, 0, remote_offset), 60000);
    ASSERT_TRUE(r) << n << " bytes: " << error_message(r.error());
    ASSERT_TRUE(holds_pattern(back, 0, n, seed, 0)) << n << " bytes read back";
    EXPECT_TRUE(a_->release(src_h->id) && a_->release(back_h->id));
  }

  std::unique_ptr<TestNode> a_, b_;
  bool rxe3_deleted_ = false, link_down_ = false;
};

TEST_F(StripingTest, LargeReadsAndWritesMoveEveryByteOverBothRails) {
  // Below the threshold: one queue pair. From it on: slices over 4 queue pairs (2 rails x 2).
  write_and_read_back(kStripeMin - 1, 3, 1);
  EXPECT_EQ(a_->stats().striped_ops, 0u);
  const uint64_t sizes[] = {kStripeMin, (16 << 20) + 4097, 64 << 20};
  uint32_t seed = 2;
  for (uint64_t n : sizes) {
    write_and_read_back(n, 4096 + seed, seed);  // (seed++ in the call was unsequenced)
    ++seed;
  }
  ManagerStats s = a_->stats();
  EXPECT_EQ(s.striped_ops, 6u);  // 3 sizes, written and read
  EXPECT_EQ(s.stripe_slices, 6u * 4);
  EXPECT_EQ(s.stripe_failovers, 0u);
  EXPECT_EQ(b_->stats().striped_ops, 0u);  // b only answered (one-sided)

  // Smaller ops go whole to the least busy queue pair: in a batch, not all on the primary's.
  {
    constexpr uint64_t kOp = 512 << 10, kOps = 8;
    Memory src(kOp * kOps, 17), dst(kOp * kOps);
    BufferHandle dst_at_a = remote_view(*b_, *a_, dst, "dst");
    auto src_h = a_->request_buffer(src);
    ASSERT_TRUE(src_h);
    std::vector<TransferOp> ops;
    for (uint64_t i = 0; i < kOps; ++i)
      ops.push_back(make_write(*src_h, dst_at_a, kOp, i * kOp, i * kOp));
    auto r = a_->batch(ops, 60000);
    ASSERT_TRUE(r) << error_message(r.error());
    for (const auto& out : *r)
      EXPECT_TRUE(out.ok()) << out.message;
    EXPECT_TRUE(holds_pattern(dst, 0, kOp * kOps, 17, 0));
    ManagerStats after = a_->stats();
    EXPECT_GE(after.spread_ops, 1u);
    EXPECT_EQ(after.striped_ops, s.striped_ops);
  }

  // RdmaClient sends large ops with an owner that has rails to its manager (no direct lane).
  RdmaClient client(a_->node().system(), a_->manager());
  Memory src(16 << 20, 9), dst(16 << 20);
  BufferHandle dst_at_a = remote_view(*b_, *a_, dst, "dst");
  auto src_h = client.request_buffer(src.bytes.data(), src.bytes.size());
  ASSERT_TRUE(src_h.ok()) << src_h.error().to_string();
  auto w = client.write(*src_h, dst_at_a, Range::whole(), std::chrono::seconds(60));
  ASSERT_TRUE(w.ok()) << w.error().to_string();
  EXPECT_TRUE(holds_pattern(dst, 0, dst.bytes.size(), 9, 0));
  EXPECT_EQ(a_->stats().striped_ops, 7u);

  // So does it a batch with any such op, whichever comes first (path_choice.h invariant 7: the
  // manager decides for each op of a batch): the small op goes whole, the large one in slices.
  ASSERT_EQ(client.lanes(), 1u) << "no direct lane to b: the batch below would test nothing";
  std::fill(dst.bytes.begin(), dst.bytes.end(), 0);
  constexpr uint64_t kSmall = 4096, kLarge = 2 * kStripeMin, kAt = 4 << 20;
  auto b = client.batch(
      {make_write(*src_h, dst_at_a, kSmall), make_write(*src_h, dst_at_a, kLarge, kAt, kAt)},
      60000);
  ASSERT_TRUE(b.ok()) << b.error().to_string();
  for (const auto& out : *b)
    EXPECT_TRUE(out.ok()) << out.message;
  EXPECT_TRUE(holds_pattern(dst, 0, kSmall, 9, 0));
  EXPECT_TRUE(holds_pattern(dst, kAt, kLarge, 9, kAt));
  EXPECT_TRUE(std::all_of(dst.bytes.begin() + kSmall, dst.bytes.begin() + kAt,
                          [](uint8_t x) { return x == 0; }) &&
              std::all_of(dst.bytes.begin() + kAt + kLarge, dst.bytes.end(),
                          [](uint8_t x) { return x == 0; }))
      << "a byte outside the two ranges was written";
  EXPECT_EQ(a_->stats().striped_ops, 8u) << "the batch's large op was not striped";
}

// Invariant 19 for lists: a client's list of small ranges that moves kStripeMin or more
// together is the manager's, which spreads its ranges whole over both rails' queue pairs; a
// smaller list takes the client's direct lane. Every byte both ways.
TEST_F(StripingTest, AListOfSmallRangesThatMovesEnoughTogetherSpreadsOverBothRails) {
  constexpr uint64_t kBlock = 4096, kBlocks = 1024;  // 4 MiB together
  RdmaClient client(a_->node().system(), a_->manager());
  Memory theirs(kBlocks * kBlock, 31), mine(kBlocks * kBlock);
  BufferHandle remote = remote_view(*b_, *a_, theirs, "pool");
  auto local = client.request_buffer(mine.bytes.data(), mine.bytes.size());
  ASSERT_TRUE(local.ok()) << local.error().to_string();
  // Local block i is the owner's block (i * 389) % kBlocks (389 is prime: a permutation).
  auto ranges = [&](uint64_t n) {
    std::vector<ListRange> r;
    for (uint64_t i = 0; i < n; ++i)
      r.push_back(ListRange{i * kBlock, (i * 389) % kBlocks * kBlock, kBlock});
    return r;
  };
  auto expect_moved = [&](uint64_t n, bool read) {
    for (uint64_t i = 0; i < n; ++i)
      ASSERT_TRUE(std::equal(mine.bytes.begin() + i * kBlock, mine.bytes.begin() + (i + 1) * kBlock,
                             theirs.bytes.begin() + (i * 389) % kBlocks * kBlock))
          << (read ? "read" : "write") << ", block " << i;
  };
  // A list under kStripeMin: the client's direct lane, one op.
  const ManagerStats s0 = a_->stats();
  auto few = client.prepare(TransferKind::kRead, *local, remote, ranges(64));
  ASSERT_TRUE(few.ok()) << few.error().to_string();
  ListOutcome got = client.post(*few, std::chrono::seconds(60));
  ASSERT_TRUE(got.ok()) << got.status().error().to_string();
  ASSERT_NO_FATAL_FAILURE(expect_moved(64, true));
  const ManagerStats s1 = a_->stats();
  EXPECT_EQ(s1.direct_ops - s0.direct_ops, 1u) << "a small list did not take the lane";
  EXPECT_EQ(s1.spread_ops, s0.spread_ops);
  // The whole pool as a list: the manager's, spread over the rails, each range whole.
  auto all = client.prepare(TransferKind::kRead, *local, remote, ranges(kBlocks));
  ASSERT_TRUE(all.ok()) << all.error().to_string();
  got = client.post(*all, std::chrono::seconds(60));
  ASSERT_TRUE(got.ok()) << got.status().error().to_string();
  EXPECT_EQ(got.landed, kBlocks);
  ASSERT_NO_FATAL_FAILURE(expect_moved(kBlocks, true));
  const ManagerStats s2 = a_->stats();
  EXPECT_EQ(s2.direct_ops, s1.direct_ops) << "a list the manager stripes took the lane";
  EXPECT_GE(s2.spread_ops - s1.spread_ops, kBlocks / 8) << "the list did not spread";
  EXPECT_EQ(s2.striped_ops, s1.striped_ops) << "a 4 KiB range was cut in slices";
  // And back the other way, from a new pattern.
  for (uint64_t i = 0; i < mine.bytes.size(); ++i)
    mine.bytes[i] = pattern(i, 32);
  auto push = client.prepare(TransferKind::kWrite, *local, remote, ranges(kBlocks));
  ASSERT_TRUE(push.ok()) << push.error().to_string();
  got = client.post(*push, std::chrono::seconds(60));
  ASSERT_TRUE(got.ok()) << got.status().error().to_string();
  ASSERT_NO_FATAL_FAILURE(expect_moved(kBlocks, false));
  EXPECT_GE(a_->stats().spread_ops - s2.spread_ops, kBlocks / 8);
}

// Invariant 19: an op is answered by its slices together: one whose slices fail on every queue
// pair (the owner released the buffer, so every rail's key and the primary's are refused, and
// each failover fails too) fails with `released`, never succeeds with bytes missing; no byte
// moves either way.
TEST_F(StripingTest, AStripedOpWhoseSlicesFailReportsTheFailure) {
  constexpr uint64_t kSize = 8 << 20;
  Memory dst(kSize), src(kSize, 61), back(kSize);
  BufferHandle gone = remote_view(*b_, *a_, dst, "gone");
  ASSERT_FALSE(gone.rails.empty()) << "the owner's handle carries no rails";
  auto src_h = a_->request_buffer(src);
  auto back_h = a_->request_buffer(back);
  ASSERT_TRUE(src_h && back_h);
  ASSERT_TRUE(b_->release(gone.id));
  const ManagerStats before = a_->stats();
  for (bool write : {true, false}) {
    SCOPED_TRACE(write ? "write" : "read");
    auto r = a_->transfer(write ? make_write(*src_h, gone) : make_read(*back_h, gone), 60000);
    ASSERT_FALSE(r) << "a striped op whose every slice was refused succeeded";
    EXPECT_EQ(error_code(r.error()), ErrorCode::kReleased) << error_message(r.error());
  }
  const ManagerStats after = a_->stats();
  // The first op's failed slices took their striping queue pairs to ERR: they are not made
  // again for kStripeRetry (invariant 20), so the second op may run whole on the primary's.
  EXPECT_GE(after.striped_ops - before.striped_ops, 1u) << "the ops were not striped";
  EXPECT_GE(after.stripe_failovers - before.stripe_failovers, 1u);
  auto zero = [](const Memory& m) {
    return std::all_of(m.bytes.begin(), m.bytes.end(), [](uint8_t b) { return b == 0; });
  };
  EXPECT_TRUE(zero(dst)) << "a byte reached the released buffer";
  EXPECT_TRUE(zero(back)) << "a byte came from the released buffer";
  EXPECT_TRUE(a_->release(src_h->id) && a_->release(back_h->id));
}

TEST_F(StripingTest, OneDeviceStripesOverSeveralQueuePairs) {
  // No rails: stripe_qps 3 queue pairs between the two primary devices.
  b_.reset();
  a_.reset();
  a_ = start_on("rxe0", "", 3);
  b_ = start_on("rxe1", "", 3);
  ASSERT_TRUE(a_ && b_);
  EXPECT_TRUE(a_->stats().rails.empty());
  write_and_read_back((4 << 20) + 1, 8, 21);
  ManagerStats s = a_->stats();
  EXPECT_EQ(s.striped_ops, 2u);
  EXPECT_EQ(s.stripe_slices, 6u);
  EXPECT_EQ(s.stripe_failovers, 0u);
}

TEST_F(StripingTest, ARailDeviceLostAtTheOwnerHandsItsSlicesToThePrimary) {
  ASSERT_NO_FATAL_FAILURE(restart_failing_fast());
  // A handle of b's from before the loss carries b's rail key, so a keeps striping with it.
  constexpr uint64_t kBytes = 8 << 20;
  Memory dst(kBytes);
  BufferHandle dst_at_a = remote_view(*b_, *a_, dst, "dst");
  ASSERT_EQ(dst_at_a.rails.size(), 1u);
  std::vector<Memory> srcs;
  for (uint32_t seed = 3; seed < 7; ++seed)
    srcs.emplace_back(kBytes, seed);
  auto write = [&](uint32_t i) {
    auto h = a_->request_buffer(srcs[i]);
    ASSERT_TRUE(h);
    auto w = a_->transfer(make_write(*h, dst_at_a, kBytes, 0, 0), 60000);
    ASSERT_TRUE(w) << error_message(w.error());
    EXPECT_TRUE(holds_pattern(dst, 0, kBytes, 3 + i, 0)) << "write " << i;
  };
  write(0);  // striping queue pairs up on both rails
  ASSERT_EQ(a_->stats().striped_ops, 1u);
  ASSERT_EQ(a_->stats().stripe_failovers, 0u);
  // b's rail device goes away: b lets go of it (the delete completes), while a's rxe2 port
  // stays ACTIVE, so a's slices on rail 1 get no answer until its NIC gives up on them
  // (retry exceeded, ~0.5 s here); then its primary queue pair moves them again.
  Command del = start_command({"/usr/bin/rdma", "link", "delete", "rxe3"});
  ASSERT_GT(del.pid, 0);
  rxe3_deleted_ = true;
  EXPECT_EQ(wait_command(del, std::chrono::seconds(30)), 0) << "b did not let go of rxe3";
  auto lost = [](const ManagerStats& s) {
    return s.rails.size() == 1 && s.rails[0].find("rxe3 (lost") == 0;
  };
  EXPECT_TRUE(lost(b_->wait_stats(lost, std::chrono::seconds(30)))) << "b never saw rxe3 go";
  for (uint32_t i = 1; i < 4; ++i)
    write(i);
  ManagerStats s = a_->stats();
  EXPECT_GE(s.stripe_failovers, 1u);
  EXPECT_EQ(s.errors, 0u);
  // b still serves and moves bytes on its primary device.
  Memory src(4 << 20, 8), back(4 << 20);
  BufferHandle back_at_b = remote_view(*a_, *b_, back, "back");
  auto src_h = b_->request_buffer(src);
  ASSERT_TRUE(src_h);
  // Invariant 18: a lost rail's key is empty; the buffer moves on the primary device.
  ASSERT_EQ(src_h->rails.size(), 1u);
  EXPECT_TRUE(src_h->rails[0].device.empty());
  auto w = b_->transfer(make_write(*src_h, back_at_b, src.bytes.size(), 0, 0), 60000);
  ASSERT_TRUE(w) << error_message(w.error());
  EXPECT_TRUE(holds_pattern(back, 0, back.bytes.size(), 8, 0));
}

TEST_F(StripingTest, ARailWhoseLinkGoesDownMidTransferLosesNoByte) {
  ASSERT_NO_FATAL_FAILURE(restart_failing_fast());
  write_and_read_back(8 << 20, 0, 3);
  // Writes run in a loop while veth3 goes down (rxe3's port, and rxe2's: its carrier): the
  // slices in flight on that rail fail over, later ops find its port down and leave it out.
  std::atomic<bool> stop{false};
  std::atomic<int> failures{0}, done{0};
  Memory src(32 << 20, 11), dst(32 << 20);
  BufferHandle dst_at_a = remote_view(*b_, *a_, dst, "dst");
  auto src_h = a_->request_buffer(src);
  ASSERT_TRUE(src_h);
  std::thread writer([&] {
    // Its own client: the test thread keeps asking the manager for its stats meanwhile.
    RdmaClient client(a_->node().system(), a_->manager());
    while (!stop.load()) {
      auto w = client.transfer(make_write(*src_h, dst_at_a, src.bytes.size(), 0, 0), 60000);
      if (!w.ok()) {
        ADD_FAILURE() << w.error().to_string();
        ++failures;
      }
      ++done;
    }
  });
  auto striped = [](const ManagerStats& s) { return s.striped_ops >= 3; };
  EXPECT_TRUE(striped(a_->wait_stats(striped, std::chrono::seconds(60))));
  EXPECT_EQ(run_command({"/usr/sbin/ip", "link", "set", "veth3", "down"}), 0);
  link_down_ = true;
  const int before = done.load();
  auto later = [&](const ManagerStats&) { return done.load() >= before + 3; };
  a_->wait_stats(later, std::chrono::seconds(120));
  stop = true;
  writer.join();
  EXPECT_GE(done.load(), before + 3);
  EXPECT_EQ(failures.load(), 0);
  EXPECT_TRUE(holds_pattern(dst, 0, dst.bytes.size(), 11, 0));
  write_and_read_back(8 << 20, 0, 12);  // the primary alone, every byte
}

}  // namespace
}  // namespace caf_rdma::testing
