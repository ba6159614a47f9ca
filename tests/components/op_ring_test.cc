// OpRing (components/op_ring.h): host threads standing in for a GPU kernel's producers, one
// consumer; each case names the invariant it checks.
#include "components/op_ring.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "tests/ring_memory.h"

namespace caf_rdma {
namespace {

using std::chrono::milliseconds;

TEST(OpRingTest, ABadRingIsRefusedNamingWhatIsWrong) {
  RingMemory m(8);
  auto odd = OpRing::create(m.mem.get(), m.bytes, 6);
  ASSERT_FALSE(odd.ok());
  EXPECT_EQ(odd.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(odd.error().message().find("power of two"), std::string::npos);
  auto small = OpRing::create(m.mem.get(), m.bytes - 1, 8);
  ASSERT_FALSE(small.ok());
  EXPECT_NE(small.error().message().find("needs " + std::to_string(m.bytes)), std::string::npos)
      << small.error().message();
  auto misaligned = OpRing::create(m.mem.get() + 8, m.bytes - 8, 2);
  ASSERT_FALSE(misaligned.ok());
  EXPECT_NE(misaligned.error().message().find("aligned"), std::string::npos);
  std::memset(m.mem.get(), 0, m.bytes);
  auto none = OpRing::attach(m.mem.get(), m.bytes);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.error().message().find("no op ring here"), std::string::npos);
  ASSERT_TRUE(OpRing::create(m.mem.get(), m.bytes, 8).ok());
  auto shrunk = OpRing::attach(m.mem.get(), op_ring_bytes(4));
  ASSERT_FALSE(shrunk.ok()) << "a view smaller than the ring its header describes";
  auto ok = OpRing::attach(m.mem.get(), m.bytes);
  ASSERT_TRUE(ok.ok()) << ok.error().to_string();
  EXPECT_EQ(ok->capacity(), 8u);
}

// Invariants 1-3: four producers publish 5000 descriptors each through 64 slots (the ring wraps
// hundreds of times, producers wait for room); the consumer sees every ticket once, in order,
// each slot's fields as its producer wrote them, and what it finishes is what the counters say.
TEST(OpRingTest, ProducersAndAConsumerMeetEveryDescriptorOnceThroughAWrappingRing) {
  constexpr uint64_t kCapacity = 64, kPerThread = 5000;
  constexpr uint32_t kThreads = 4;
  RingMemory m(kCapacity);
  auto ring = OpRing::create(m.mem.get(), m.bytes, kCapacity);
  ASSERT_TRUE(ring.ok()) << ring.error().to_string();
  std::atomic<uint64_t> reserve{0};
  std::vector<std::thread> producers;
  std::atomic<int> producer_errors{0};
  for (uint32_t p = 0; p < kThreads; ++p)
    producers.emplace_back([&, p] {
      OpRingProducer producer(*ring, &reserve);
      for (uint64_t i = 0; i < kPerThread; ++i) {
        // Each field says who wrote it: a torn descriptor would not add up.
        auto t = producer.publish(RingOpKind::kPut, p, i, i * 3 + p, i + 1, i ^ 0x5a5a,
                                  milliseconds(20000));
        if (!t.ok())
          ++producer_errors;
      }
    });
  OpRingConsumer consumer(*ring);
  std::vector<std::vector<bool>> seen(kThreads, std::vector<bool>(kPerThread, false));
  uint64_t expected_ticket = 0, failed = 0, first_failed = UINT64_MAX;
  std::string bad;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (expected_ticket < kThreads * kPerThread && std::chrono::steady_clock::now() < until) {
    uint64_t t = 0;
    auto s = consumer.take(&t);
    if (!s) {
      std::this_thread::yield();
      continue;
    }
    if (t != expected_ticket && bad.empty())
      bad =
          "ticket " + std::to_string(t) + " where " + std::to_string(expected_ticket) + " was due";
    ++expected_ticket;
    const uint64_t i = s->local_offset;
    if (s->seq != t + 1 || s->kind != static_cast<uint32_t>(RingOpKind::kPut) ||
        s->pair >= kThreads || i >= kPerThread || s->remote_offset != i * 3 + s->pair ||
        s->length != i + 1 || s->operand != (i ^ 0x5a5a) || seen[s->pair][i]) {
      if (bad.empty())
        bad = "ticket " + std::to_string(t) + " is torn or seen twice";
      continue;
    }
    seen[s->pair][i] = true;
    const bool ok = t % 7 != 3;
    if (!ok) {
      ++failed;
      first_failed = std::min(first_failed, t);
    }
    ring->finish(t, ok, ErrorCode::kReleased);
  }
  for (auto& th : producers)
    th.join();
  EXPECT_EQ(bad, "");
  EXPECT_EQ(producer_errors.load(), 0);
  ASSERT_EQ(expected_ticket, kThreads * kPerThread) << "descriptors were lost";
  for (uint32_t p = 0; p < kThreads; ++p)
    for (uint64_t i = 0; i < kPerThread; ++i)
      ASSERT_TRUE(seen[p][i]) << "producer " << p << "'s descriptor " << i << " never seen";
  EXPECT_EQ(ring->consumed(), kThreads * kPerThread);
  EXPECT_EQ(ring->failed(), failed);
  EXPECT_EQ(ring->done(), kThreads * kPerThread - failed);
  OpRingProducer waiter(*ring, &reserve);
  EXPECT_TRUE(waiter.wait_ended(kThreads * kPerThread, milliseconds(1000)).ok());
  auto first = ring->first_failure();
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->first, first_failed);
  EXPECT_EQ(first->second, ErrorCode::kReleased);
}

// Invariants 2 and 4: with nobody consuming, a producer finds room for `capacity` descriptors
// and then times out saying so; a wait for completions that do not come times out too.
TEST(OpRingTest, WaitsEndAtTheirDeadlineSayingWhy) {
  RingMemory m(2);
  auto ring = OpRing::create(m.mem.get(), m.bytes, 2);
  ASSERT_TRUE(ring.ok());
  std::atomic<uint64_t> reserve{0};
  OpRingProducer producer(*ring, &reserve);
  for (int i = 0; i < 2; ++i)
    ASSERT_TRUE(producer.publish(RingOpKind::kGet, 0, 0, 0, 8, 0, milliseconds(100)).ok());
  auto full = producer.publish(RingOpKind::kGet, 0, 0, 0, 8, 0, milliseconds(50));
  ASSERT_FALSE(full.ok());
  EXPECT_EQ(full.error().code(), ErrorCode::kTimeout);
  EXPECT_NE(full.error().message().find("found no room"), std::string::npos)
      << full.error().message();
  EXPECT_NE(full.error().message().find("capacity 2, taken 0"), std::string::npos)
      << full.error().message();
  EXPECT_NE(full.error().message().find("nothing was published"), std::string::npos);
  Status waited = producer.wait_ended(1, milliseconds(50));
  ASSERT_FALSE(waited.ok());
  EXPECT_EQ(waited.error().code(), ErrorCode::kTimeout);
  EXPECT_FALSE(ring->first_failure().has_value());
  // Invariant 2: the producer that gave up holds no ticket: once one is taken, the next
  // descriptor goes into the free slot and the consumer meets it in order.
  OpRingConsumer consumer(*ring);
  uint64_t t = 0;
  ASSERT_TRUE(consumer.take(&t).has_value());
  auto again = producer.publish(RingOpKind::kPut, 1, 2, 3, 4, 0, milliseconds(1000));
  ASSERT_TRUE(again.ok()) << again.error().to_string();
  EXPECT_EQ(*again, 2u);
  ASSERT_TRUE(consumer.take(&t).has_value());
  auto third = consumer.take(&t);
  ASSERT_TRUE(third.has_value()) << "the ring stalled behind a ticket nobody published";
  EXPECT_EQ(t, 2u);
  EXPECT_EQ(third->pair, 1u);
}

// Invariant 3: a new consumer of a ring goes on where the last one stopped; nothing is taken
// twice.
TEST(OpRingTest, ANewConsumerGoesOnWhereTheLastStopped) {
  RingMemory m(8);
  auto ring = OpRing::create(m.mem.get(), m.bytes, 8);
  ASSERT_TRUE(ring.ok());
  std::atomic<uint64_t> reserve{0};
  OpRingProducer producer(*ring, &reserve);
  for (uint64_t i = 0; i < 5; ++i)
    ASSERT_TRUE(producer.publish(RingOpKind::kGet, 0, i, i, 8, 0, milliseconds(1000)).ok());
  uint64_t t = 0;
  {
    OpRingConsumer first(*ring);
    for (int i = 0; i < 3; ++i)
      ASSERT_TRUE(first.take(&t).has_value());
  }
  OpRingConsumer second(*ring);
  auto next = second.take(&t);
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(t, 3u);
  EXPECT_EQ(next->local_offset, 3u);
  ASSERT_TRUE(second.take(&t).has_value());
  EXPECT_FALSE(second.take(&t).has_value());
  EXPECT_EQ(ring->consumed(), 5u);
}

}  // namespace
}  // namespace caf_rdma
