// StagedPath (actors/transfer/staged_path.h): GPU memory the NIC cannot register moves through
// bounce buffers, with FakeDeviceMemory (tests/fake_device_memory.h) standing in for the GPU:
// path rdma-staged in the VM lane, fallback natively. Each case names the invariant of
// staged_path.h it checks.
#include <gtest/gtest.h>

#include <thread>

#include "actors/rdma_client.h"
#include "tests/actors/gpu_node_test.h"

namespace caf_rdma::testing {
namespace {

class StagedPathTest : public GpuNodeTest {};

TEST_F(StagedPathTest, GpuBufferTheNicCannotRegisterIsStagedInChunksBothWays) {
  SCOPED_TRACE("StagedPath invariant 1");
  auto gpu = std::make_shared<FakeDeviceMemory>(/*direct=*/false);
  auto a = node(gpu), b = node(nullptr);
  ASSERT_TRUE(a && b);
  // 33 chunks of 32 KiB: the halves of a 64 KiB bounce buffer (one copies while the NIC moves
  // the other).
  constexpr uint64_t kSize = (1 << 20) + 5;
  Memory device_mem(kSize, 3), host(kSize, 0);
  gpu->add_gpu_range(device_mem.bytes.data(), kSize, 0);
  auto g = a->request_buffer(device_mem);
  auto h = b->request_buffer(host);
  ASSERT_TRUE(g && h) << (g ? "" : error_message(g.error()));
  EXPECT_EQ(g->memory, static_cast<uint8_t>(BufferMemory::kGpuStaged));
  EXPECT_EQ(g->gpu, 0);
  EXPECT_NE(describe(*g).find("on GPU 0"), std::string::npos) << describe(*g);
  // GPU -> remote host.
  auto w = a->transfer(make_write(*g, *h));
  ASSERT_TRUE(w) << error_message(w.error());
  EXPECT_EQ(w->path, staged_path());
  EXPECT_EQ(w->bytes, kSize);
  EXPECT_EQ(host.bytes, device_mem.bytes);
  EXPECT_GE(gpu->to_host_bytes.load(), kSize) << "the GPU memory was not copied out";
  const ManagerStats after_write = a->stats();
  if (staged_path() == kPathRdmaStaged) {
    // Every copy out of the GPU but the first ran while the previous chunk was on the NIC.
    EXPECT_EQ(after_write.staged_chunks, 33u);
    EXPECT_EQ(after_write.staged_overlapped, 32u);
  }
  // Remote host -> GPU, at offsets.
  Memory fresh(kSize, 9);
  std::copy(fresh.bytes.begin(), fresh.bytes.end(), host.bytes.begin());
  auto r = a->transfer(make_read(*g, *h, kSize - 1000, 500, 1000));
  ASSERT_TRUE(r) << error_message(r.error());
  EXPECT_EQ(r->path, staged_path());
  EXPECT_TRUE(std::equal(device_mem.bytes.begin() + 500,
                         device_mem.bytes.begin() + 500 + kSize - 1000,
                         fresh.bytes.begin() + 1000));
  for (uint64_t i = 0; i < 500; ++i)
    ASSERT_EQ(device_mem.bytes[i], pattern(i, 3))
        << "byte " << i << " before the range was touched";
  for (uint64_t i = 500 + kSize - 1000; i < kSize; ++i)
    ASSERT_EQ(device_mem.bytes[i], pattern(i, 3)) << "byte " << i << " after the range was touched";
  EXPECT_GE(gpu->to_device_bytes.load(), kSize - 1000);
  if (staged_path() == kPathRdmaStaged) {
    // 32 chunks in: copies into the GPU ran while the NIC read the next chunk (completions
    // may come in another order, so not necessarily every one).
    const ManagerStats after_read = a->stats();
    EXPECT_EQ(after_read.staged_chunks - after_write.staged_chunks, 32u);
    EXPECT_GE(after_read.staged_overlapped - after_write.staged_overlapped, 16u);
    // Every GPU copy went through a page-locked bounce buffer (DMA, no driver staging copy),
    // and the manager unlocks them all when it goes.
    EXPECT_EQ(gpu->pageable_copy_bytes.load(), 0u);
    EXPECT_GE(gpu->pinned_copy_bytes.load(), 2 * kSize - 1000);
    EXPECT_GE(gpu->locked_buffers(), 1u);
  }
  a.reset();
  EXPECT_EQ(gpu->locked_buffers(), 0u) << "bounce buffers left page-locked";
  EXPECT_EQ(gpu->bad_unlocks.load(), 0u);
}

// A GPU copy failing in the middle of a staged transfer while the NIC still moves the other
// half's chunk: the transfer fails naming the copy (not before that chunk is back: the bounce
// buffer is not handed on while the NIC may use it), and the next transfers, through the same
// single bounce buffer, move every byte both ways.
TEST_F(StagedPathTest, ACopyFailingMidWayFailsItsTransferAndTheNextOnesMoveEveryByte) {
  SCOPED_TRACE("StagedPath invariant 2");
  if (staged_path() != kPathRdmaStaged)
    GTEST_SKIP() << "bounce buffers and their chunks are the rdma-staged path: the fallback "
                    "lane has no RDMA device";
  auto gpu = std::make_shared<FakeDeviceMemory>(/*direct=*/false);
  auto a = node(gpu, std::nullopt, /*bounce_buffers=*/1), b = node(nullptr);
  ASSERT_TRUE(a && b);
  constexpr uint64_t kSize = (512 << 10) + 9;  // 17 chunks of 32 KiB
  Memory device_mem(kSize, 4), host(kSize, 0);
  gpu->add_gpu_range(device_mem.bytes.data(), kSize, 0);
  auto g = a->request_buffer(device_mem);
  auto h = b->request_buffer(host);
  ASSERT_TRUE(g && h);
  for (bool is_read : {false, true}) {
    SCOPED_TRACE(is_read ? "read" : "write");
    gpu->fail_copies_after(5);  // the 6th chunk's copy fails
    auto x = a->transfer(is_read ? make_read(*g, *h) : make_write(*g, *h));
    EXPECT_RDMA_ERROR(x, ErrorCode::kCuda,
                      is_read ? "rdma-staged read into buffer" : "rdma-staged write from buffer");
    gpu->fail_copies(false);
    // Fresh bytes on the source side, then the whole range again: every byte arrives.
    Memory fresh(kSize, is_read ? 31 : 32);
    std::vector<uint8_t>& src = is_read ? host.bytes : device_mem.bytes;
    std::copy(fresh.bytes.begin(), fresh.bytes.end(), src.begin());
    auto y = a->transfer(is_read ? make_read(*g, *h) : make_write(*g, *h));
    ASSERT_TRUE(y) << error_message(y.error());
    EXPECT_EQ(y->path, kPathRdmaStaged);
    EXPECT_EQ(is_read ? device_mem.bytes : host.bytes, fresh.bytes);
  }
  const ManagerStats s = a->stats();
  EXPECT_EQ(s.errors, 2u);
  EXPECT_EQ(s.busy_buffers, 0u);
}

// A chunk the owner's NIC refuses in the middle of a staged write (a handle claiming more bytes
// than the owner registered: the chunks inside its region move, the first one beyond is refused
// while the next is on the NIC): the transfer fails with the owner's reason, not with a
// by-effect of the queue pair's error, no byte lands outside the region, and the manager moves
// the next transfer whole.
TEST_F(StagedPathTest, AChunkRefusedMidWayFailsWithTheOwnersReason) {
  SCOPED_TRACE("StagedPath invariant 3");
  if (staged_path() != kPathRdmaStaged)
    GTEST_SKIP() << "bounce buffers and their chunks are the rdma-staged path: the fallback "
                    "lane has no RDMA device";
  auto gpu = std::make_shared<FakeDeviceMemory>(/*direct=*/false);
  auto a = node(gpu, std::nullopt, /*bounce_buffers=*/1), b = node(nullptr);
  ASSERT_TRUE(a && b);
  constexpr uint64_t kRegistered = 256 << 10;  // 8 chunks of 32 KiB
  Memory device_mem(2 * kRegistered, 6);
  Memory host(2 * kRegistered, 0);  // only the first half is registered
  gpu->add_gpu_range(device_mem.bytes.data(), device_mem.bytes.size(), 0);
  auto g = a->request_buffer(device_mem);
  auto h = b->request_buffer(host.addr(), kRegistered);
  ASSERT_TRUE(g && h);
  BufferHandle forged = *h;
  forged.size = 2 * kRegistered;
  auto x = a->transfer(make_write(*g, forged));
  ASSERT_FALSE(x) << "a write beyond the owner's region succeeded";
  const std::string m = error_message(x.error());
  EXPECT_NE(m.find("refused by the owner of"), std::string::npos) << m;
  for (uint64_t i = kRegistered; i < 2 * kRegistered; ++i)
    ASSERT_EQ(host.bytes[i], 0) << "byte " << i << " beyond the registered region changed";
  auto y = a->transfer(make_write(*g, *h, kRegistered));
  ASSERT_TRUE(y) << error_message(y.error());
  EXPECT_EQ(y->path, kPathRdmaStaged);
  EXPECT_TRUE(
      std::equal(host.bytes.begin(), host.bytes.begin() + kRegistered, device_mem.bytes.begin()));
}

// Verify mode compares staged transfers too (the bytes that went through bounce buffers).
TEST_F(StagedPathTest, VerifyModeChecksStagedTransfers) {
  SCOPED_TRACE("StagedPath invariant 3");
  auto gpu = std::make_shared<FakeDeviceMemory>(/*direct=*/false);
  NodeOptions o;
  auto env = ManagerOptions::from_env();
  ASSERT_TRUE(env.ok());
  o.manager = *env;
  o.manager.device_memory = gpu;
  o.manager.staging_bytes = 64 << 10;
  o.manager.verify = true;
  auto started = RdmaNode::start(o);
  ASSERT_TRUE(started.ok()) << started.error().to_string();
  TestNode a(std::move(*started));
  auto b = node(nullptr);
  ASSERT_TRUE(b);
  constexpr uint64_t kSize = (300 << 10) + 1;
  Memory device_mem(kSize, 8), host(kSize, 0);
  gpu->add_gpu_range(device_mem.bytes.data(), kSize, 0);
  auto g = a.request_buffer(device_mem);
  auto h = b->request_buffer(host);
  ASSERT_TRUE(g && h);
  auto w = a.transfer(make_write(*g, *h));
  ASSERT_TRUE(w) << error_message(w.error());
  EXPECT_EQ(w->path, staged_path());
  EXPECT_EQ(host.bytes, device_mem.bytes);
  const uint64_t copied_out = gpu->to_host_bytes.load();
  Memory fresh(kSize, 10);
  std::copy(fresh.bytes.begin(), fresh.bytes.end(), host.bytes.begin());
  auto r = a.transfer(make_read(*g, *h));
  ASSERT_TRUE(r) << error_message(r.error());
  EXPECT_EQ(device_mem.bytes, fresh.bytes);
  if (staged_path() == kPathRdmaStaged) {  // the read's check copied the GPU range out again
    EXPECT_GE(gpu->to_host_bytes.load(), copied_out + kSize);
  }
}

TEST_F(StagedPathTest, StagingStillMovesEveryByteWhenBounceBuffersCannotBePageLocked) {
  SCOPED_TRACE("StagedPath invariant 1");
  auto gpu = std::make_shared<FakeDeviceMemory>(/*direct=*/false);
  gpu->fail_locks(true);
  auto a = node(gpu), b = node(nullptr);
  ASSERT_TRUE(a && b);
  constexpr uint64_t kSize = (256 << 10) + 7;
  Memory device_mem(kSize, 5), host(kSize, 0);
  gpu->add_gpu_range(device_mem.bytes.data(), kSize, 0);
  auto g = a->request_buffer(device_mem);
  auto h = b->request_buffer(host);
  ASSERT_TRUE(g && h);
  auto w = a->transfer(make_write(*g, *h));
  ASSERT_TRUE(w) << error_message(w.error());
  EXPECT_EQ(w->path, staged_path());
  EXPECT_EQ(host.bytes, device_mem.bytes);
  EXPECT_EQ(gpu->pinned_copy_bytes.load(), 0u);
  EXPECT_GE(gpu->pageable_copy_bytes.load(), kSize);
  EXPECT_EQ(gpu->locked_buffers(), 0u);
}

TEST_F(StagedPathTest, StagedOpsWithAHandleOfAnotherDeviceOpeningMoveThroughTheOwner) {
  SCOPED_TRACE("StagedPath invariant 3, RdmaPath invariant 7");
  // Staged GPU memory, remote handles whose incarnation is not their owner's current one (its
  // device went away and came back since; changed by hand here): each op took a bounce buffer,
  // then finds the queue pair's peer is another opening, gives the bounce buffer back and moves
  // through the owner (auto mode). More ops than bounce buffers: the waiters get them in turn.
  constexpr uint64_t kSize = 100 << 10;
  // Before the nodes: the memory outlives every buffer the nodes hold of it.
  Memory device_mem(kSize * 5, 6), host(kSize * 5);
  auto gpu = std::make_shared<FakeDeviceMemory>(/*direct=*/false);
  auto a = node(gpu, TransportMode::kAuto), b = node(nullptr, TransportMode::kAuto);
  ASSERT_TRUE(a && b);
  gpu->add_gpu_range(device_mem.bytes.data(), device_mem.bytes.size(), 0);
  auto g = a->request_buffer(device_mem);
  auto h = b->request_buffer(host);
  ASSERT_TRUE(g && h);
  BufferHandle stale = *h;
  stale.incarnation ^= 0x5a5a5a5a5a5a5a5aull;
  std::vector<TransferOp> ops;
  for (uint64_t i = 0; i < 4; ++i)  // 2 bounce buffers
    ops.push_back(make_write(*g, stale, kSize, i * kSize, i * kSize));
  auto out = a->batch(ops);
  ASSERT_TRUE(out) << error_message(out.error());
  for (const auto& o : *out) {
    ASSERT_TRUE(o.ok()) << o.message;
    EXPECT_EQ(o.path, kPathFallback);
  }
  EXPECT_TRUE(
      std::equal(host.bytes.begin(), host.bytes.begin() + 4 * kSize, device_mem.bytes.begin()));
  // The bounce buffers were given back: a staged write with the true handle runs.
  auto w = a->transfer(make_write(*g, *h, kSize, 4 * kSize, 4 * kSize));
  ASSERT_TRUE(w) << error_message(w.error());
  EXPECT_EQ(w->path, staged_path());
  EXPECT_EQ(host.bytes, device_mem.bytes);
}

TEST_F(StagedPathTest, MoreStagedTransfersThanBounceBuffersQueueAndAllComplete) {
  SCOPED_TRACE("StagedPath invariant 4");
  constexpr int kOps = 8;  // 2 bounce buffers
  // Before the nodes: the memory outlives every buffer the nodes hold of it.
  std::vector<std::unique_ptr<Memory>> devs, hosts;
  auto gpu = std::make_shared<FakeDeviceMemory>(/*direct=*/false);
  auto a = node(gpu), b = node(nullptr);
  ASSERT_TRUE(a && b);
  std::vector<TransferOp> ops;
  for (int i = 0; i < kOps; ++i) {
    devs.push_back(std::make_unique<Memory>(200 << 10, 20 + i));
    hosts.push_back(std::make_unique<Memory>(200 << 10, 0));
    gpu->add_gpu_range(devs.back()->bytes.data(), devs.back()->bytes.size(), 0);
    auto g = a->request_buffer(*devs.back());
    auto h = b->request_buffer(*hosts.back());
    ASSERT_TRUE(g && h);
    ops.push_back(make_write(*g, *h));
  }
  auto out = a->batch(ops, 60000);
  ASSERT_TRUE(out) << error_message(out.error());
  for (int i = 0; i < kOps; ++i) {
    EXPECT_TRUE((*out)[i].ok()) << i << ": " << (*out)[i].message;
    EXPECT_EQ((*out)[i].path, staged_path());
    EXPECT_EQ(hosts[i]->bytes, devs[i]->bytes) << "op " << i;
  }
}

// A list of 500 small GPU ranges: on the rdma-staged path each range takes a piece of a shared
// bounce buffer (16 of 4 KiB in each 64 KiB buffer), not a buffer of its own; every byte lands
// both ways, in scattered places, and the bytes between the ranges stay as they were.
TEST_F(StagedPathTest, AListsSmallRangesGatherIntoSharedBounceBuffersAndMoveEveryByte) {
  SCOPED_TRACE("StagedPath invariant 5");
  constexpr uint64_t kCount = 500, kBlock = 4096, kGap = 100;
  auto gpu = std::make_shared<FakeDeviceMemory>(/*direct=*/false);
  Memory device_mem(kCount * (kBlock + kGap), 7), host(kCount * kBlock, 0);
  gpu->add_gpu_range(device_mem.bytes.data(), device_mem.bytes.size(), 0);
  auto a = node(gpu), b = node(nullptr);
  ASSERT_TRUE(a && b);
  auto g = a->request_buffer(device_mem);
  auto h = b->request_buffer(host);
  ASSERT_TRUE(g && h) << (g ? "" : error_message(g.error()));
  // GPU block i (kGap bytes apart) to host block kCount - 1 - i.
  std::vector<ListRange> ranges;
  for (uint64_t i = 0; i < kCount; ++i)
    ranges.push_back(ListRange{i * (kBlock + kGap), (kCount - 1 - i) * kBlock, kBlock});
  RdmaClient me(a->node().system(), a->manager());
  const ManagerStats before = a->stats();
  auto push = me.prepare(TransferKind::kWrite, *g, *h, ranges);
  ASSERT_TRUE(push.ok()) << push.error().to_string();
  ListOutcome got = me.post(*push, std::chrono::seconds(60));
  ASSERT_TRUE(got.ok()) << got.status().error().to_string();
  EXPECT_EQ(got.landed, kCount);
  EXPECT_EQ(got.path, staged_path());
  for (uint64_t i = 0; i < kCount; ++i)
    ASSERT_TRUE(std::equal(host.bytes.begin() + (kCount - 1 - i) * kBlock,
                           host.bytes.begin() + (kCount - i) * kBlock,
                           device_mem.bytes.begin() + i * (kBlock + kGap)))
        << "range " << i;
  // Back from another pattern into the GPU's blocks; the gaps keep theirs.
  for (uint64_t i = 0; i < host.bytes.size(); ++i)
    host.bytes[i] = pattern(i, 8);
  auto pull = me.prepare(TransferKind::kRead, *g, *h, ranges);
  ASSERT_TRUE(pull.ok()) << pull.error().to_string();
  got = me.post(*pull, std::chrono::seconds(60));
  ASSERT_TRUE(got.ok()) << got.status().error().to_string();
  EXPECT_EQ(got.landed, kCount);
  for (uint64_t i = 0; i < kCount; ++i) {
    const uint64_t at = i * (kBlock + kGap);
    for (uint64_t k = 0; k < kBlock; ++k)
      ASSERT_EQ(device_mem.bytes[at + k], pattern((kCount - 1 - i) * kBlock + k, 8))
          << "range " << i << " byte " << k;
    for (uint64_t k = kBlock; k < kBlock + kGap; ++k)
      ASSERT_EQ(device_mem.bytes[at + k], pattern(at + k, 7)) << "gap byte " << at + k;
  }
  if (staged_path() == kPathRdmaStaged) {
    const ManagerStats after = a->stats();
    EXPECT_EQ(after.staged_pieces - before.staged_pieces, 2 * kCount)
        << "a small range took a bounce buffer of its own";
    EXPECT_EQ(after.staged_chunks - before.staged_chunks, 2 * kCount);
  }
}

}  // namespace
}  // namespace caf_rdma::testing
