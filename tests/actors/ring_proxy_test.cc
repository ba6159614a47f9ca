// RingProxy (actors/ring_proxy.h) between two nodes, on each transport: host threads stand in for
// a GPU kernel that writes descriptors into an OpRing (components/op_ring.h); the proxy moves each
// through the user's manager. Every byte moved is checked, and the ring's counters say what ended.
#include "actors/ring_proxy.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <thread>

#include "actors/rdma_client.h"
#include "tests/actors/two_node_test.h"
#include "tests/ring_memory.h"

namespace caf_rdma::testing {
namespace {

using std::chrono::milliseconds;

class RingProxyTest : public TwoNodeTest {};

// Invariant 1: 4 producer threads publish 10,000 puts of 8 bytes (each to its own place), then
// gets of what they put back into other places, and fetch-adds on 8 words; every descriptor
// ends well, and every byte and word is what they asked for.
TEST_F(RingProxyTest, TenThousandPutsGetsAndFetchAddsFromProducerThreadsAllLand) {
  constexpr uint64_t kPuts = 10000, kThreads = 4, kWords = 8, kAdds = 100;
  Memory theirs(kPuts * 8 + kWords * 8, 0);
  BufferHandle remote = remote_view(*owner_, *user_, theirs, "ring-target");
  Memory mine(2 * kPuts * 8 + kWords * kAdds * 8, 7);
  RdmaClient me(user_->node().system(), user_->manager());
  auto local = me.register_buffer(mine.bytes.data(), mine.bytes.size());
  ASSERT_TRUE(local.ok()) << local.error().to_string();
  RingMemory m(256);
  auto ring = OpRing::create(m.mem.get(), m.bytes, 256);
  ASSERT_TRUE(ring.ok()) << ring.error().to_string();
  auto proxy = RingProxy::start(user_->node().system(), user_->manager(), *ring,
                                {RingProxy::BufferPair{local->handle(), remote}});
  ASSERT_TRUE(proxy.ok()) << proxy.error().to_string();
  std::atomic<uint64_t> reserve{0};
  std::atomic<int> errors{0};
  auto produce = [&](auto each) {
    std::vector<std::thread> threads;
    for (uint64_t p = 0; p < kThreads; ++p)
      threads.emplace_back([&, p] {
        OpRingProducer producer(*ring, &reserve);
        for (uint64_t i = p; i < kPuts; i += kThreads)
          if (!each(producer, i).ok())
            ++errors;
      });
    for (auto& t : threads)
      t.join();
  };
  // Put i: my bytes [8i, 8i + 8) to their [8i, 8i + 8).
  produce([](OpRingProducer& p, uint64_t i) {
    return p.publish(RingOpKind::kPut, 0, i * 8, i * 8, 8, 0, milliseconds(30000));
  });
  OpRingProducer waiter(*ring, &reserve);
  ASSERT_TRUE(waiter.wait_ended(kPuts, milliseconds(120000)).ok());
  // Get i: their [8i, 8i + 8) back into my second half.
  produce([](OpRingProducer& p, uint64_t i) {
    return p.publish(RingOpKind::kGet, 0, (kPuts + i) * 8, i * 8, 8, 0, milliseconds(30000));
  });
  // Fetch-adds: kAdds on each word, old values into my third part (one slot per add).
  for (uint64_t a = 0; a < kAdds * kWords; ++a) {
    auto t = waiter.publish(RingOpKind::kFetchAdd, 0, (2 * kPuts + a) * 8, (kPuts + a % kWords) * 8,
                            8, a % kWords + 1, milliseconds(30000));
    ASSERT_TRUE(t.ok()) << t.error().to_string();
  }
  const uint64_t total = 2 * kPuts + kAdds * kWords;
  Status ended = waiter.wait_ended(total, milliseconds(120000));
  ASSERT_TRUE(ended.ok()) << ended.error().to_string();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(ring->failed(), 0u);
  EXPECT_EQ(ring->done(), total);
  EXPECT_EQ((*proxy)->taken(), total);
  const Memory before(mine.bytes.size(), 7);
  for (uint64_t i = 0; i < kPuts * 8; ++i)
    ASSERT_EQ(theirs.bytes[i], before.bytes[i]) << "put byte " << i;
  for (uint64_t i = 0; i < kPuts * 8; ++i)
    ASSERT_EQ(mine.bytes[kPuts * 8 + i], before.bytes[i]) << "get byte " << i;
  // Each word got 1 + 2 + ... : its index + 1 per add; the old values it handed out are each of
  // 0, w + 1, 2(w + 1), ..., once.
  for (uint64_t w = 0; w < kWords; ++w) {
    uint64_t word = 0;
    std::memcpy(&word, theirs.bytes.data() + (kPuts + w) * 8, 8);
    EXPECT_EQ(word, kAdds * (w + 1)) << "word " << w;
    std::vector<bool> old_seen(kAdds, false);
    for (uint64_t a = w; a < kAdds * kWords; a += kWords) {
      uint64_t old = 0;
      std::memcpy(&old, mine.bytes.data() + (2 * kPuts + a) * 8, 8);
      ASSERT_EQ(old % (w + 1), 0u) << "word " << w << " handed out " << old;
      ASSERT_LT(old / (w + 1), kAdds);
      EXPECT_FALSE(old_seen[old / (w + 1)]) << "word " << w << " handed out " << old << " twice";
      old_seen[old / (w + 1)] = true;
    }
  }
  proxy->reset();
  ASSERT_TRUE(owner_->release(remote.id));
}

// Invariant 1: a descriptor naming no pair, one of an unknown kind and one past the remote
// buffer's end fail (the first failure's code kept), the good ones still land, and the ring's
// counters add up.
TEST_F(RingProxyTest, BadDescriptorsFailWithTheirCodeAndTheRestLand) {
  Memory theirs(4096, 0);
  BufferHandle remote = remote_view(*owner_, *user_, theirs, "ring-bad");
  Memory mine(4096, 9);
  RdmaClient me(user_->node().system(), user_->manager());
  auto local = me.register_buffer(mine.bytes.data(), mine.bytes.size());
  ASSERT_TRUE(local.ok()) << local.error().to_string();
  RingMemory m(16);
  auto ring = OpRing::create(m.mem.get(), m.bytes, 16);
  ASSERT_TRUE(ring.ok());
  auto proxy = RingProxy::start(user_->node().system(), user_->manager(), *ring,
                                {RingProxy::BufferPair{local->handle(), remote}});
  ASSERT_TRUE(proxy.ok()) << proxy.error().to_string();
  std::atomic<uint64_t> reserve{0};
  OpRingProducer p(*ring, &reserve);
  ASSERT_TRUE(p.publish(RingOpKind::kPut, 0, 0, 0, 100, 0, milliseconds(5000)).ok());
  ASSERT_TRUE(p.publish(RingOpKind::kPut, 3, 0, 0, 100, 0, milliseconds(5000)).ok());  // no pair
  ASSERT_TRUE(p.publish(static_cast<RingOpKind>(9), 0, 0, 0, 8, 0, milliseconds(5000)).ok());
  ASSERT_TRUE(p.publish(RingOpKind::kPut, 0, 0, 4000, 100, 0, milliseconds(5000)).ok());  // past
  ASSERT_TRUE(p.publish(RingOpKind::kPut, 0, 200, 200, 100, 0, milliseconds(5000)).ok());
  Status ended = p.wait_ended(5, milliseconds(60000));
  ASSERT_TRUE(ended.ok()) << ended.error().to_string();
  EXPECT_EQ(ring->done(), 2u);
  EXPECT_EQ(ring->failed(), 3u);
  auto first = ring->first_failure();
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->first, 1u);
  EXPECT_EQ(first->second, ErrorCode::kInvalidArgument);
  auto why = (*proxy)->first_error();
  ASSERT_TRUE(why.has_value());
  EXPECT_NE(why->message().find("names buffer pair 3, but its proxy has 1"), std::string::npos)
      << why->message();
  for (uint64_t i = 0; i < 4096; ++i) {
    const bool put = i < 100 || (i >= 200 && i < 300);
    ASSERT_EQ(theirs.bytes[i], put ? mine.bytes[i] : 0) << "byte " << i;
  }
  proxy->reset();
  ASSERT_TRUE(owner_->release(remote.id));
}

// Invariant 3: a proxy destroyed while descriptors are on their way returns once each ended
// (the ring's memory may go right after), and nothing is taken after it.
TEST_F(RingProxyTest, AProxyDestroyedWithWorkOnItsWayReturnsOnceEachEnded) {
  Memory theirs(1 << 20, 0);
  BufferHandle remote = remote_view(*owner_, *user_, theirs, "ring-stop");
  Memory mine(1 << 20, 11);
  RdmaClient me(user_->node().system(), user_->manager());
  auto local = me.register_buffer(mine.bytes.data(), mine.bytes.size());
  ASSERT_TRUE(local.ok()) << local.error().to_string();
  RingMemory m(64);
  auto ring = OpRing::create(m.mem.get(), m.bytes, 64);
  ASSERT_TRUE(ring.ok());
  auto proxy = RingProxy::start(user_->node().system(), user_->manager(), *ring,
                                {RingProxy::BufferPair{local->handle(), remote}});
  ASSERT_TRUE(proxy.ok());
  std::atomic<uint64_t> reserve{0};
  OpRingProducer p(*ring, &reserve);
  for (uint64_t i = 0; i < 64; ++i)
    ASSERT_TRUE(
        p.publish(RingOpKind::kPut, 0, i * 16384, i * 16384, 16384, 0, milliseconds(5000)).ok());
  // At least one taken (its answer may still be on its way) before the proxy goes.
  for (auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
       ring->consumed() == 0 && std::chrono::steady_clock::now() < until;)
    std::this_thread::yield();
  ASSERT_GT(ring->consumed(), 0u) << "the proxy took nothing in 30 s";
  proxy->reset();  // some may still be on their way: the destructor waits for them
  const uint64_t taken = ring->consumed();
  EXPECT_EQ(ring->done() + ring->failed(), taken) << "the proxy returned before its work ended";
  EXPECT_EQ(ring->failed(), 0u);
  // Nothing is taken after it: a descriptor published now stays in the ring.
  ASSERT_TRUE(p.publish(RingOpKind::kPut, 0, 0, 0, 8, 0, milliseconds(5000)).ok());
  EXPECT_EQ(ring->consumed(), taken);
  for (uint64_t i = 0; i < taken * 16384; ++i)
    ASSERT_EQ(theirs.bytes[i], mine.bytes[i]) << "byte " << i;
  ASSERT_TRUE(owner_->release(remote.id));
}

// Invariant 4: a proxy that outlives its node takes what is published afterwards and fails it
// at once (peer_unavailable), and its destructor returns.
TEST_F(RingProxyTest, AProxyOutlivingItsNodeFailsWhatComesAfter) {
  Memory mine(4096, 13);
  RingMemory m(8);
  auto ring = OpRing::create(m.mem.get(), m.bytes, 8);
  ASSERT_TRUE(ring.ok());
  Memory theirs(4096, 0);
  BufferHandle remote = remote_view(*owner_, *user_, theirs, "ring-gone");
  BufferHandle local;
  {
    RdmaClient me(user_->node().system(), user_->manager());
    auto reg = me.request_buffer(mine.bytes.data(), mine.bytes.size());
    ASSERT_TRUE(reg.ok()) << reg.error().to_string();
    local = *reg;
  }
  auto proxy = RingProxy::start(user_->node().system(), user_->manager(), *ring,
                                {RingProxy::BufferPair{local, remote}});
  ASSERT_TRUE(proxy.ok());
  user_.reset();  // the node goes; the proxy lives on
  std::atomic<uint64_t> reserve{0};
  OpRingProducer p(*ring, &reserve);
  ASSERT_TRUE(p.publish(RingOpKind::kPut, 0, 0, 0, 64, 0, milliseconds(5000)).ok());
  Status ended = p.wait_ended(1, milliseconds(30000));
  ASSERT_TRUE(ended.ok()) << ended.error().to_string();
  EXPECT_EQ(ring->failed(), 1u);
  auto first = ring->first_failure();
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->second, ErrorCode::kPeerUnavailable);
  proxy->reset();
  for (uint64_t i = 0; i < 4096; ++i)
    ASSERT_EQ(theirs.bytes[i], 0) << "byte " << i;
}

}  // namespace
}  // namespace caf_rdma::testing
