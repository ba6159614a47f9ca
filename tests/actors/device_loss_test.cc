// A node's RDMA device going away mid-transfer and coming back (`rdma link delete` / `add`),
// in the Soft-RoCE VM: the transfer in flight fails at once naming the device (not at its
// timeout), the kernel can finish removing the device (the manager let go of everything on
// it), the node keeps working through the fallback while the device is gone, and uses RDMA
// again once it is back, where a handle from before never reaches a NIC with its stale key.
//
// Node `a` uses rxe0 (the one that goes away), node `b` rxe1; both in auto mode.
#include <gtest/gtest.h>

#include <thread>

#include "actors/direct_lane.h"
#include "actors/rdma_client.h"
#include "tests/actors/manager_fixture.h"
#include "tests/device_control.h"

namespace caf_rdma::testing {
namespace {

constexpr uint64_t kRange = 4 << 20;  // bytes per op
constexpr uint64_t kRanges = 8;       // buffer = kRanges ranges
constexpr uint64_t kBytes = kRange * kRanges;

std::unique_ptr<TestNode> start_on(const std::string& device) {
  NodeOptions o;
  auto env = ManagerOptions::from_env();
  EXPECT_TRUE(env.ok()) << env.error().to_string();
  o.manager = env.ok() ? *env : ManagerOptions{};
  o.manager.mode = TransportMode::kAuto;
  o.manager.ibverbs.device_name = device;
  auto n = RdmaNode::start(o);
  EXPECT_TRUE(n.ok()) << n.error().to_string();
  return n.ok() ? std::make_unique<TestNode>(std::move(*n)) : nullptr;
}

/// Waits (60 s at most) until `n` can use RDMA again (or not): its stats' no_rdma_reason.
bool wait_rdma(TestNode& n, bool usable) {
  auto reached = [usable](const ManagerStats& s) { return s.no_rdma_reason.empty() == usable; };
  return reached(n.wait_stats(reached, std::chrono::seconds(60)));
}

class DeviceLossTest : public DeviceChangingTest {
protected:
  DeviceLossTest() : DeviceChangingTest("deletes and re-adds the Soft-RoCE device rxe0") {}
  void SetUp() override {
    DeviceChangingTest::SetUp();
    if (IsSkipped())
      return;
    a_ = start_on("rxe0");
    b_ = start_on("rxe1");
    ASSERT_TRUE(a_ && b_);
    ASSERT_EQ(a_->stats().device, "rxe0");
    ASSERT_EQ(b_->stats().device, "rxe1");
  }
  void TearDown() override {
    b_.reset();
    a_.reset();
    // Leave rxe0 as the VM made it, for the tests after this one.
    if (deleted_ && !added_)
      run_command({"/usr/bin/rdma", "link", "add", "rxe0", "type", "rxe", "netdev", "veth0"});
    if (link_down_)
      link_up();
  }

  /// Starts `rdma link delete rxe0` (its end: wait_command).
  Command delete_rxe0() {
    Command del = start_command({"/usr/bin/rdma", "link", "delete", "rxe0"});
    EXPECT_GT(del.pid, 0);
    deleted_ = true;
    return del;
  }

  /// Adds rxe0 back and waits (60 s at most) for node a to open it again; its stats then.
  ManagerStats add_rxe0_back() {
    EXPECT_EQ(
        run_command({"/usr/bin/rdma", "link", "add", "rxe0", "type", "rxe", "netdev", "veth0"}), 0);
    added_ = true;
    return a_->wait_stats([](const ManagerStats& s) { return !s.device.empty(); },
                          std::chrono::seconds(60));
  }

  /// veth1 up again, with the route to rxe0's address that taking it down deleted.
  static int link_up() {
    int rc = run_command({"/usr/sbin/ip", "link", "set", "veth1", "up"});
    int route = run_command({"/usr/sbin/ip", "route", "replace", "10.99.0.1", "dev", "veth1", "src",
                             "10.99.1.1", "table", "101"});
    return rc != 0 ? rc : route;
  }

  std::unique_ptr<TestNode> a_, b_;
  bool deleted_ = false, added_ = false, link_down_ = false;
};

TEST_F(DeviceLossTest, PortDownMovesTransfersToTheFallbackAndBackToRdmaWhenItIsUp) {
  Memory src(kRange, 5);  // at b
  Memory dst(kRange);     // at a
  BufferHandle src_at_b = remote_view(*b_, *a_, src, "src");
  auto dst_local = a_->request_buffer(dst);
  ASSERT_TRUE(dst_local) << error_message(dst_local.error());
  auto read = a_->transfer(make_read(*dst_local, src_at_b, kRange, 0, 0));
  ASSERT_TRUE(read) << error_message(read.error());
  EXPECT_EQ(read->path, kPathRdma);
  EXPECT_TRUE(holds_pattern(dst, 0, kRange, 5, 0));

  // veth1 down: rxe1's port goes down, and rxe0's (its veth peer loses carrier).
  ASSERT_EQ(run_command({"/usr/sbin/ip", "link", "set", "veth1", "down"}), 0);
  link_down_ = true;
  ASSERT_TRUE(wait_rdma(*a_, false)) << "a never heard its port went down";
  EXPECT_NE(a_->stats().no_rdma_reason.find("rxe0 port 1"), std::string::npos)
      << a_->stats().no_rdma_reason;
  std::fill(dst.bytes.begin(), dst.bytes.end(), 0);
  read = a_->transfer(make_read(*dst_local, src_at_b, kRange, 0, 0));
  ASSERT_TRUE(read) << error_message(read.error());
  EXPECT_EQ(read->path, kPathFallback);
  EXPECT_TRUE(holds_pattern(dst, 0, kRange, 5, 0));

  ASSERT_EQ(link_up(), 0);
  link_down_ = false;
  ASSERT_TRUE(wait_rdma(*a_, true)) << a_->stats().no_rdma_reason;
  ASSERT_TRUE(wait_rdma(*b_, true)) << b_->stats().no_rdma_reason;
  std::fill(dst.bytes.begin(), dst.bytes.end(), 0);
  read = a_->transfer(make_read(*dst_local, src_at_b, kRange, 0, 0));
  ASSERT_TRUE(read) << error_message(read.error());
  EXPECT_EQ(read->path, kPathRdma);
  EXPECT_TRUE(holds_pattern(dst, 0, kRange, 5, 0));
}

TEST_F(DeviceLossTest, DeviceRemovedMidTransferFailsAtOnceAndTheNodeWorksAgainAfterItReturns) {
  Memory src(kBytes, 7);  // at b
  Memory dst(kBytes);     // at a
  BufferHandle src_at_b = remote_view(*b_, *a_, src, "src");
  auto dst_local = a_->request_buffer(dst);
  ASSERT_TRUE(dst_local) << error_message(dst_local.error());
  ASSERT_NE(src_at_b.incarnation, 0u) << "an RDMA handle names its device's incarnation";
  Memory early(kRange);  // at a, registered before the loss, its handle at b
  BufferHandle early_at_b = remote_view(*a_, *b_, early, "early");
  ASSERT_NE(early_at_b.incarnation, 0u);

  // Warm-up: RDMA both ways works.
  auto warm = a_->transfer(make_read(*dst_local, src_at_b, kRange, 0, 0));
  ASSERT_TRUE(warm) << error_message(warm.error());
  EXPECT_EQ(warm->path, kPathRdma);
  EXPECT_TRUE(holds_pattern(dst, 0, kRange, 7, 0));

  std::fill(dst.bytes.begin(), dst.bytes.end(), 0);
  const uint64_t last = kRange - 1;
  ASSERT_NE(pattern(last, 7), 0);
  // A long batch of reads (1 GiB; the same source range always lands in the same destination
  // range, so any range one successful op wrote must hold the pattern whatever else ran).
  std::vector<TransferOp> ops;
  for (uint64_t i = 0; i < 256; ++i) {
    uint64_t r = (i % kRanges) * kRange;
    ops.push_back(make_read(*dst_local, src_at_b, kRange, r, r));
  }
  caf::expected<std::vector<TransferOutcome>> outcomes{caf::error{}};
  std::thread batch([&] {
    caf::scoped_actor self{a_->node().system()};
    self->request(a_->manager(), std::chrono::seconds(200), batch_atom::value, ops,
                  uint32_t{120000})
        .receive([&](std::vector<TransferOutcome>& r) { outcomes = std::move(r); },
                 [&](caf::error& e) { outcomes = std::move(e); });
  });
  // (No ASSERT until the batch thread is joined.)
  EXPECT_TRUE(a_->wait_busy()) << "the batch never started";
  // Bytes are moving: the first op's last byte has landed (dst was zeroed; the NIC writes it).
  auto landing = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (reinterpret_cast<volatile const uint8_t*>(dst.bytes.data())[last] != pattern(last, 7) &&
         std::chrono::steady_clock::now() < landing)
    std::this_thread::yield();
  EXPECT_EQ(dst.bytes[last], pattern(last, 7)) << "no op of the batch landed within 60 s";
  Command del = delete_rxe0();
  batch.join();

  // 1. The batch failed at once, with the device named: no_device (its 120 s timeout would
  //    say timeout), every op either done or failed that way.
  ASSERT_TRUE(outcomes) << error_message(outcomes.error());
  size_t failed = 0;
  std::vector<bool> written(kRanges, false);
  for (size_t i = 0; i < outcomes->size(); ++i) {
    const TransferOutcome& o = (*outcomes)[i];
    if (o.ok()) {
      written[i % kRanges] = true;
      continue;
    }
    ++failed;
    EXPECT_EQ(o.code, static_cast<uint8_t>(ErrorCode::kNoDevice)) << o.message;
    EXPECT_NE(o.message.find("rxe0"), std::string::npos) << o.message;
    EXPECT_NE(o.message.find("device lost"), std::string::npos) << o.message;
  }
  EXPECT_GT(failed, 0u) << "the whole batch ended before the device went away";
  std::printf("batch: %zu ops done before the loss, %zu failed at once: %s\n",
              outcomes->size() - failed, failed,
              failed > 0 ? outcomes->back().message.c_str() : "");
  for (uint64_t r = 0; r < kRanges; ++r) {
    if (written[r]) {
      EXPECT_TRUE(holds_pattern(dst, r * kRange, kRange, 7, r * kRange)) << "range " << r;
    }
  }

  // 2. The kernel finished removing rxe0: nothing of this process holds it any more.
  EXPECT_EQ(wait_command(del, std::chrono::seconds(60)), 0)
      << "'rdma link delete rxe0' did not finish: something still holds the device";
  ManagerStats gone = a_->stats();
  EXPECT_EQ(gone.device, "");
  EXPECT_EQ(gone.device_losses, 1u);
  EXPECT_NE(gone.no_rdma_reason.find("rxe0"), std::string::npos) << gone.no_rdma_reason;

  // 3. Without the device, both directions work through the fallback, every byte checked.
  std::fill(dst.bytes.begin(), dst.bytes.end(), 0);
  auto read = a_->transfer(make_read(*dst_local, src_at_b, kRange, kRange, 0));
  ASSERT_TRUE(read) << error_message(read.error());
  EXPECT_EQ(read->path, kPathFallback);
  EXPECT_TRUE(holds_pattern(dst, kRange, kRange, 7, 0));
  Memory wsrc(kRange, 9);  // at b
  auto wsrc_local = b_->request_buffer(wsrc);
  ASSERT_TRUE(wsrc_local) << error_message(wsrc_local.error());
  // b's queue pair to a was aborted when a said its device went away; the handshake for a new
  // one is refused (a has no device), so the write moves through a.
  auto write = b_->transfer(make_write(*wsrc_local, early_at_b, kRange, 0, 0));
  ASSERT_TRUE(write) << error_message(write.error());
  EXPECT_EQ(write->path, kPathFallback);
  EXPECT_TRUE(holds_pattern(early, 0, kRange, 9, 0));
  BufferHandle gone_at_b = remote_view(*a_, *b_, dst, "dst");  // registered while rxe0 is gone
  EXPECT_EQ(gone_at_b.incarnation, 0u);
  EXPECT_FALSE(gone_at_b.has_rdma());

  // 4. rxe0 comes back: the manager opens it again by itself.
  ManagerStats back = add_rxe0_back();
  ASSERT_EQ(back.device, "rxe0") << "not reopened within 60 s: " << back.no_rdma_reason;
  EXPECT_EQ(back.device_reopens, 1u);

  // 5. RDMA again: a reads with its buffer registered before the loss (registered again)...
  std::fill(dst.bytes.begin(), dst.bytes.end(), 0);
  read = a_->transfer(make_read(*dst_local, src_at_b, kRange, 0, kRange));
  ASSERT_TRUE(read) << error_message(read.error());
  EXPECT_EQ(read->path, kPathRdma);
  EXPECT_TRUE(holds_pattern(dst, 0, kRange, 7, kRange));
  // ...b writes into a buffer a registered after the return: RDMA...
  Memory fresh(kRange);
  BufferHandle fresh_at_b = remote_view(*a_, *b_, fresh, "fresh");
  EXPECT_NE(fresh_at_b.incarnation, 0u);
  EXPECT_NE(fresh_at_b.incarnation, src_at_b.incarnation);
  write = b_->transfer(make_write(*wsrc_local, fresh_at_b, kRange, 0, 0));
  ASSERT_TRUE(write) << error_message(write.error());
  EXPECT_EQ(write->path, kPathRdma);
  EXPECT_TRUE(holds_pattern(fresh, 0, kRange, 9, 0));
  // ...and a handle from before the loss moves through its owner: its old key never reaches
  // the NIC (it could name other memory on the new device).
  std::fill(early.bytes.begin(), early.bytes.end(), 0);
  Memory wsrc2(kRange, 11);  // at b
  auto wsrc2_local = b_->request_buffer(wsrc2);
  ASSERT_TRUE(wsrc2_local) << error_message(wsrc2_local.error());
  write = b_->transfer(make_write(*wsrc2_local, early_at_b, kRange, 0, 0));
  ASSERT_TRUE(write) << error_message(write.error());
  EXPECT_EQ(write->path, kPathFallback);
  EXPECT_TRUE(holds_pattern(early, 0, kRange, 11, 0));
  auto stale = a_->transfer(make_read(*dst_local, early_at_b, kRange, 0, 0));
  ASSERT_TRUE(stale) << error_message(stale.error());
  EXPECT_TRUE(holds_pattern(dst, 0, kRange, 11, 0)) << "a's own stale handle, read locally";
}

// DirectLane invariant 5: a direct lane a client keeps without using it lets go of the lost
// device (the kernel finishes removing it); the client's next transfer moves through the
// fallback, and RDMA again once the device is back. Every byte checked.
TEST_F(DeviceLossTest, ALaneAClientKeepsIdleDoesNotHoldALostDevice) {
  Memory src(kRange, 5);  // at b
  Memory dst(kRange);     // at a
  BufferHandle src_at_b = remote_view(*b_, *a_, src, "lane_src");
  auto dst_local = a_->request_buffer(dst);
  ASSERT_TRUE(dst_local) << error_message(dst_local.error());
  RdmaClient client(a_->node().system(), a_->manager(), true);
  auto read = client.read(*dst_local, src_at_b, Range::whole(), std::chrono::milliseconds(30000));
  ASSERT_TRUE(read.ok()) << read.error().to_string();
  EXPECT_EQ(read->path, kPathRdma);
  EXPECT_TRUE(holds_pattern(dst, 0, kRange, 5, 0));
  ASSERT_EQ(client.lanes(), 1u);
  EXPECT_EQ(a_->stats().direct_ops, 1u) << "the read took the client's lane";

  // rxe0 goes while the client holds its lane, idle.
  Command del = delete_rxe0();
  EXPECT_EQ(wait_command(del, std::chrono::seconds(60)), 0)
      << "'rdma link delete rxe0' did not finish: the client's idle lane still holds the device";
  EXPECT_EQ(client.lanes(), 1u) << "the client still holds its (retired) lane";

  // The next read moves through the fallback.
  std::fill(dst.bytes.begin(), dst.bytes.end(), 0);
  read = client.read(*dst_local, src_at_b, Range::whole(), std::chrono::milliseconds(30000));
  ASSERT_TRUE(read.ok()) << read.error().to_string();
  EXPECT_EQ(read->path, kPathFallback);
  EXPECT_TRUE(holds_pattern(dst, 0, kRange, 5, 0));

  // rxe0 comes back: RDMA again.
  ManagerStats back = add_rxe0_back();
  ASSERT_EQ(back.device, "rxe0") << "not reopened within 60 s: " << back.no_rdma_reason;
  std::fill(dst.bytes.begin(), dst.bytes.end(), 0);
  read = client.read(*dst_local, src_at_b, Range::whole(), std::chrono::milliseconds(30000));
  ASSERT_TRUE(read.ok()) << read.error().to_string();
  EXPECT_EQ(read->path, kPathRdma);
  EXPECT_TRUE(holds_pattern(dst, 0, kRange, 5, 0));
}

}  // namespace
}  // namespace caf_rdma::testing
