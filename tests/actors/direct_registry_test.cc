// DirectRegistry: the release of a buffer waits for the direct lanes' ops on it (invariant 2
// of actors/direct_registry.h), without a device (the entries' regions are empty), and which
// lane may take which buffer (invariant 1).
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "actors/direct_registry.h"

namespace caf_rdma {
namespace {

/// Host memory without a NIC registration (as on a node without a device).
DirectRegistry::Entry host_entry(uint64_t size, BufferAccess access) {
  return DirectRegistry::Entry{RdmaBuffer{},        size,        access, 0, 0, 0x1000,
                               BufferMemory::kHost, Withdrawal{}};
}

// Invariant 1: a direct lane takes only NIC-registered buffers, a stream lane only host memory.
TEST(DirectRegistryTest, EachLaneTakesOnlyTheBuffersItCanMove) {
  DirectRegistry r;
  r.add(1, host_entry(64, BufferAccess::kReadWrite));
  EXPECT_FALSE(r.acquire(1)) << "no NIC registration: no direct lane";
  auto h = r.acquire_host(1);
  ASSERT_TRUE(h);
  EXPECT_EQ(h->addr, 0x1000u);
  EXPECT_FALSE(r.done(1));
  DirectRegistry::Entry gpu = host_entry(64, BufferAccess::kReadWrite);
  gpu.memory = BufferMemory::kGpuDirect;
  r.add(2, gpu);
  EXPECT_FALSE(r.acquire_host(2)) << "GPU memory is not for the stream lane";
}

TEST(DirectRegistryTest, ReleaseRefusesNewUsesAndWaitsForRunningOnes) {
  DirectRegistry r;
  r.add(7, host_entry(4096, BufferAccess::kReadOnly));
  EXPECT_FALSE(r.acquire_host(8)) << "unknown ids are the manager's to answer";
  auto a = r.acquire_host(7);
  auto b = r.acquire_host(7);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->size, 4096u);
  EXPECT_EQ(a->access, BufferAccess::kReadOnly);
  EXPECT_TRUE(r.busy(7));
  EXPECT_FALSE(r.release(7)) << "two ops still use it";
  EXPECT_FALSE(r.acquire_host(7)) << "released: no new op may start on it";
  EXPECT_FALSE(r.done(7)) << "one op still uses it";
  EXPECT_TRUE(r.busy(7));
  EXPECT_TRUE(r.done(7)) << "the last use of a released buffer is reported";
  EXPECT_FALSE(r.busy(7));
  EXPECT_FALSE(r.done(7)) << "reported once";
}

TEST(DirectRegistryTest, IdleBufferIsReleasedAtOnce) {
  DirectRegistry r;
  r.add(1, host_entry(64, BufferAccess::kReadWrite));
  auto a = r.acquire_host(1);
  ASSERT_TRUE(a);
  EXPECT_FALSE(r.done(1)) << "not released: nothing to report";
  EXPECT_TRUE(r.release(1));
  EXPECT_FALSE(r.acquire_host(1));
  EXPECT_TRUE(r.release(99)) << "unknown here: nothing to wait for";
}

TEST(DirectRegistryTest, ExactlyOneLastUseUnderConcurrentLanes) {
  // 8 threads acquire and finish ops while the buffer is released: exactly one `done` (or the
  // release itself) reports that nobody uses it any more, and no acquire succeeds after it.
  for (int round = 0; round < 50; ++round) {
    DirectRegistry r;
    r.add(3, host_entry(8, BufferAccess::kReadWrite));
    std::atomic<int> last{0};
    std::atomic<bool> go{false};
    std::vector<std::thread> lanes;
    lanes.reserve(8);
    for (int t = 0; t < 8; ++t)
      lanes.emplace_back([&] {
        while (!go)
          std::this_thread::yield();
        for (int k = 0; k < 200; ++k) {
          if (!r.acquire_host(3))
            return;
          if (r.done(3))
            ++last;
        }
      });
    go = true;
    if (r.release(3))
      ++last;
    for (auto& t : lanes)
      t.join();
    EXPECT_EQ(last.load(), 1) << "round " << round;
    EXPECT_FALSE(r.busy(3));
    EXPECT_FALSE(r.acquire_host(3));
  }
}

TEST(DirectRegistryTest, CountsOpsBytesAndErrors) {
  DirectRegistry r;
  r.count(true, 100);
  r.count(true, 28);
  r.count(false, 5);
  auto c = r.counters();
  EXPECT_EQ(c.ops, 2u);
  EXPECT_EQ(c.bytes, 128u);
  EXPECT_EQ(c.errors, 1u);
}

}  // namespace
}  // namespace caf_rdma
