// RdmaPath (actors/transfer/rdma_path.h) with real nodes: two nodes in one process talking over
// TCP loopback (handles serialized, the owner a network proxy). Built twice like the manager's
// tests: `rdma_path_rdma_test` (rdma-tagged: on the host's device or in the Soft-RoCE VM, the
// fallback forbidden, so every op takes this path or fails) and `rdma_path_fallback_test` (no
// device: the same requests take the fallback, and still move every byte). Each case names the
// invariant it checks.
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "tests/actors/manager_fixture.h"
#include "tests/actors/two_node_test.h"
#include "tests/rdma_test.h"

namespace caf_rdma::testing {
namespace {

class RdmaPathTest : public TwoNodeTest {
protected:
  /// Registers `m` at the owner and returns its handle as the user node sees it.
  BufferHandle owner_buffer(const Memory& m, const std::string& name) {
    return remote_view(*owner_, *user_, m, name, BufferAccess::kReadWrite);
  }
};

TEST_F(RdmaPathTest, HandleOfAnotherDeviceOpeningNeverReachesTheNic) {
  SCOPED_TRACE("RdmaPath invariant 7");
  // A handle names the opening (incarnation) of its owner's device that registered it; one of
  // another opening (its owner's device went away and came back since) carries a remote key
  // that may now name other memory: it must not be posted. Here the user changes it.
  Memory remote_mem(64 << 10, 3), src(64 << 10, 21);
  BufferHandle remote = owner_buffer(remote_mem, "inc");
  ASSERT_NE(remote.id, 0u);
  auto local = user_->request_buffer(src);
  ASSERT_TRUE(local);
  auto warm = user_->transfer(make_read(*local, remote, 1));  // the queue pair exists
  ASSERT_TRUE(warm) << error_message(warm.error());
  BufferHandle other = remote;
  other.incarnation ^= 0x5a5a5a5a5a5a5a5aull;
  auto w = user_->transfer(make_write(*local, other));
  if (expected_path() == kPathRdma) {
    // CAF_RDMA_TRANSPORT=rdma: no fallback to move it through its owner.
    EXPECT_RDMA_ERROR(w, ErrorCode::kNoDevice, "went away and came back", "rdma forbids");
    for (uint64_t i = 0; i < remote_mem.bytes.size(); ++i)
      ASSERT_EQ(remote_mem.bytes[i], pattern(i, 3)) << "byte " << i << " was written";
  } else {
    ASSERT_TRUE(w) << error_message(w.error());
    EXPECT_EQ(w->path, kPathFallback);
    EXPECT_EQ(remote_mem.bytes, src.bytes);
  }
}

TEST_F(RdmaPathTest, BatchReportsEveryOp) {
  SCOPED_TRACE("RdmaPath invariant 2");
  Memory remote_mem(8192), src(8192, 5);
  BufferHandle remote = owner_buffer(remote_mem, "batch");
  auto local = user_->request_buffer(src);
  ASSERT_TRUE(local);
  std::vector<TransferOp> ops{make_write(*local, remote, 4096, 0, 0),
                              make_write(*local, remote, 4096, 0, 6000),  // out of range
                              make_write(*local, remote, 4096, 4096, 4096)};
  auto out = user_->batch(ops);
  ASSERT_TRUE(out) << error_message(out.error());
  ASSERT_EQ(out->size(), 3u);
  EXPECT_TRUE((*out)[0].ok()) << (*out)[0].message;
  EXPECT_EQ((*out)[1].code, uint8_t(ErrorCode::kOutOfBounds));
  EXPECT_NE((*out)[1].message.find("remote offset 6000"), std::string::npos) << (*out)[1].message;
  EXPECT_TRUE((*out)[2].ok()) << (*out)[2].message;
  EXPECT_EQ((*out)[2].path, expected_path());
  EXPECT_EQ(remote_mem.bytes, src.bytes);
}

TEST_F(RdmaPathTest, ConcurrentFirstTransfersMakeOneQueuePair) {
  SCOPED_TRACE("RdmaPath invariant 3 (manager invariant 3)");
  Memory remote_mem(uint64_t{64} * 1024), src(uint64_t{64} * 1024, 9);
  BufferHandle remote = owner_buffer(remote_mem, "conc");
  auto local = user_->request_buffer(src);
  ASSERT_TRUE(local);
  constexpr int kN = 16;
  std::vector<caf::expected<TransferReply>> replies(kN, caf::expected<TransferReply>{caf::error{}});
  {
    std::vector<std::thread> threads;
    threads.reserve(kN);
    for (int i = 0; i < kN; ++i)
      threads.emplace_back([&, i] {
        caf::scoped_actor s{user_->node().system()};
        s->request(user_->manager(), 30s, transfer_atom::value,
                   make_write(*local, remote, 4096, uint64_t(i) * 4096, uint64_t(i) * 4096),
                   uint32_t{20000})
            .receive([&](TransferReply& r) { replies[i] = r; },
                     [&](caf::error& e) { replies[i] = e; });
      });
    for (auto& t : threads)
      t.join();
  }
  for (int i = 0; i < kN; ++i)
    ASSERT_TRUE(replies[i]) << i << ": " << error_message(replies[i].error());
  EXPECT_EQ(remote_mem.bytes, src.bytes);
  auto s = user_->stats();
  if (expected_path() == kPathRdma) {
    EXPECT_EQ(s.handshakes, 1u) << "one queue pair for the peer";
    EXPECT_EQ(s.live_qps, 1u);
    EXPECT_EQ(owner_->stats().live_qps, 1u);
    // Both on their device's shared CQ; the user's poller sweeps that one CQ.
    EXPECT_EQ(s.shared_cq_qps, 1u);
    EXPECT_EQ(s.polled_cqs, 1u);
    EXPECT_EQ(owner_->stats().shared_cq_qps, 1u);
  } else {
    EXPECT_EQ(s.handshakes, 0u);
  }
}

TEST_F(RdmaPathTest, EachClassRunsOnQueuePairsOfItsOwnAndMovesEveryByte) {
  SCOPED_TRACE("manager invariant 26 (manager/rails.h)");
  // With a traffic class and service level set for the latency and background classes (what a
  // fabric with QoS is given; Soft-RoCE takes and carries them).
  ManagerOptions o;
  o.latency_traffic = QpTraffic{106, 3};
  o.background_traffic = QpTraffic{8, 1};
  ASSERT_TRUE(restart(o));
  constexpr uint64_t kN = 256 << 10;
  Memory remote_mem(kN, 4), mine(kN, 31);
  BufferHandle remote = owner_buffer(remote_mem, "classes");
  auto local = user_->request_buffer(mine);
  ASSERT_TRUE(local);
  // A bulk write of the first quarter, a latency read of the second, a background write of the
  // third: each on its class's queue pair over RDMA; the last quarter untouched on both sides.
  const uint64_t q = kN / 4;
  auto bulk = user_->transfer(make_write(*local, remote, Range::of(q)));
  ASSERT_TRUE(bulk) << error_message(bulk.error());
  auto urgent = user_->transfer(
      make_read(*local, remote, Range::of(q).at_local(q).at_remote(q).as(Priority::kLatency)));
  ASSERT_TRUE(urgent) << error_message(urgent.error());
  auto quiet = user_->transfer(make_write(
      *local, remote, Range::of(q).at_local(2 * q).at_remote(2 * q).as(Priority::kBackground)));
  ASSERT_TRUE(quiet) << error_message(quiet.error());
  for (uint64_t i = 0; i < kN; ++i) {
    const bool written = i < q || (i >= 2 * q && i < 3 * q);
    ASSERT_EQ(remote_mem.bytes[i], written ? pattern(i, 31) : pattern(i, 4))
        << "owner's byte " << i;
    const bool read = i >= q && i < 2 * q;
    ASSERT_EQ(mine.bytes[i], read ? pattern(i, 4) : pattern(i, 31)) << "user's byte " << i;
  }
  auto s = user_->stats();
  if (expected_path() == kPathRdma) {
    EXPECT_EQ(bulk->path, kPathRdma);
    EXPECT_EQ(urgent->path, kPathRdma);
    EXPECT_EQ(quiet->path, kPathRdma);
    EXPECT_EQ(s.handshakes, 3u) << "the managers' queue pair, the latency and background ones";
    EXPECT_EQ(s.live_qps, 3u);
    EXPECT_EQ(owner_->stats().live_qps, 3u) << "the owner accepted each";
    // Again: no more handshakes, one queue pair per peer and class.
    auto again = user_->transfer(
        make_read(*local, remote, Range::of(8).at_local(q).at_remote(q).as(Priority::kLatency)));
    ASSERT_TRUE(again) << error_message(again.error());
    EXPECT_EQ(user_->stats().handshakes, 3u);
  } else {
    EXPECT_EQ(s.handshakes, 0u);
  }
}

}  // namespace
}  // namespace caf_rdma::testing
