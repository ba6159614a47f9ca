// A list op on a real device (RdmaQueuePair invariant 13, qp_posting.h invariant 6,
// qp_validation.h invariant 5): many ranges of one local and one remote buffer as one op, every
// byte checked; a range cut into several work requests; a refused range that moves nothing; a
// list failing midway that says which ranges landed; no allocation per range (the global
// operator new of this test counted).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <numeric>
#include <random>
#include <vector>

#include "tests/components/queue_pair_fixture.h"

namespace {

std::atomic<uint64_t> g_allocations{0};

}  // namespace

void* operator new(std::size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n == 0 ? 1 : n))
    return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}

namespace caf_rdma::testing {
namespace {

using Table = std::shared_ptr<const std::vector<ListEntry>>;

class QpListTest : public QueuePairTest {
protected:
  /// `count` ranges of `block` bytes: range i between local block i and remote block perm[i]
  /// (a shuffled permutation: the remote side scattered, as a paged cache's blocks are).
  static Table scattered(size_t count, uint64_t block, uint32_t seed) {
    std::vector<uint64_t> perm(count);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), std::mt19937_64(seed));
    auto table = std::make_shared<std::vector<ListEntry>>(count);
    for (size_t i = 0; i < count; ++i)
      (*table)[i] = ListEntry{perm[i] * block, i * block, block};
    return table;
  }
  /// Every byte of every range of `table` [0, upto) is the same on both sides; `local` and
  /// `remote` are the two buffers' memory.
  static void expect_ranges_equal(const Table& table, size_t upto, const Registered& local,
                                  const Registered& remote) {
    for (size_t i = 0; i < upto; ++i) {
      const ListEntry& e = (*table)[i];
      ASSERT_EQ(
          std::memcmp(local.bytes.get() + e.peer_offset, remote.bytes.get() + e.offset, e.length),
          0)
          << "range " << i << " differs";
    }
  }
};

TEST_P(QpListTest, AListOfOneRangeAndOfAHundredThousandMovesEveryByte) {
  for (size_t count : {size_t{1}, size_t{100000}}) {
    SCOPED_TRACE(count);
    const uint64_t block = 64;
    Registered remote = make(count * block, 11);
    Registered local = make(count * block, 0);
    Table table = scattered(count, block, 5);
    const uint64_t wrs_before = a_->stats().work_requests;
    OpResult r = a_->execute(
        RdmaOp::list_of(true, local.buffer, remote.buffer.remote(), OpList::of(table, 0, count)),
        kTimeout);
    ASSERT_TRUE(r.status.ok()) << r.status.error().to_string();
    EXPECT_EQ(r.list_landed, count);
    EXPECT_EQ(r.bytes, count * block);
    ASSERT_NO_FATAL_FAILURE(expect_ranges_equal(table, count, local, remote));
    EXPECT_EQ(a_->stats().work_requests - wrs_before, count) << "one work request per range";
    // And back: the local blocks written to a zeroed remote buffer at the same places.
    Registered back = make(count * block, 0);
    OpResult w = a_->execute(
        RdmaOp::list_of(false, local.buffer, back.buffer.remote(), OpList::of(table, 0, count)),
        kTimeout);
    ASSERT_TRUE(w.status.ok()) << w.status.error().to_string();
    EXPECT_EQ(w.list_landed, count);
    ASSERT_NO_FATAL_FAILURE(expect_same(remote, back, count * block));
  }
  EXPECT_LT(a_->stats().signaled, a_->stats().work_requests / 2) << "selective signaling";
}

// A window of a table: only its ranges move.
TEST_P(QpListTest, AWindowOfATableMovesOnlyItsRanges) {
  const uint64_t block = 256;
  Registered remote = make(64 * block, 3);
  Registered local = make(64 * block, 0);
  Table table = scattered(64, block, 9);
  OpResult r = a_->execute(
      RdmaOp::list_of(true, local.buffer, remote.buffer.remote(), OpList::of(table, 10, 20)),
      kTimeout);
  ASSERT_TRUE(r.status.ok()) << r.status.error().to_string();
  EXPECT_EQ(r.list_landed, 20u);
  EXPECT_EQ(r.bytes, 20 * block);
  for (size_t i = 0; i < 64; ++i) {
    const ListEntry& e = (*table)[i];
    const bool in = i >= 10 && i < 30;
    for (uint64_t k = 0; k < block; ++k)
      ASSERT_EQ(local.bytes[e.peer_offset + k], in ? remote.bytes[e.offset + k] : 0)
          << "range " << i << " byte " << k;
  }
}

// qp_posting.h invariant 6: a range over the maximum message is several work requests.
TEST_P(QpListTest, ARangeOverTheMaximumMessageIsCutIntoSeveralRequests) {
  RdmaQueuePair::Options options;
  options.max_message_bytes = 16 << 10;
  auto x = make_qp(options);
  auto y = make_qp(options);
  ASSERT_TRUE(RdmaQueuePair::connect_pair(*x, *y).ok());
  const uint64_t size = 128 << 10;
  Registered src = make(size, 21);
  Registered dst = make(size, 0);
  auto table = std::make_shared<std::vector<ListEntry>>(std::vector<ListEntry>{
      {0, 1000, 40 << 10}, {50 << 10, 7, 1}, {60 << 10, 64 << 10, 16 << 10}, {90 << 10, 90, 100}});
  OpResult w = x->execute(
      RdmaOp::list_of(false, src.buffer, dst.buffer.remote(), OpList::of(table, 0, table->size())),
      kTimeout);
  ASSERT_TRUE(w.status.ok()) << w.status.error().to_string();
  EXPECT_EQ(w.list_landed, 4u);
  EXPECT_EQ(x->stats().work_requests, 3u + 1 + 1 + 1);
  ASSERT_NO_FATAL_FAILURE(expect_ranges_equal(table, table->size(), src, dst));
  // Nothing outside the ranges was written.
  std::vector<bool> inside(size, false);
  for (const ListEntry& e : *table)
    std::fill(inside.begin() + e.offset, inside.begin() + e.offset + e.length, true);
  for (uint64_t i = 0; i < size; ++i)
    if (!inside[i])
      ASSERT_EQ(dst.bytes[i], 0) << "byte " << i << " outside every range";
}

// qp_validation.h invariant 5: a refused list names its range and moves nothing.
TEST_P(QpListTest, ARangePastTheEndOrEmptyIsRefusedAtSubmitAndNothingMoves) {
  Registered src = make(4096, 4);
  Registered dst = make(4096, 0);
  auto past = std::make_shared<std::vector<ListEntry>>(
      std::vector<ListEntry>{{0, 0, 1024}, {1024, 1024, 1024}, {4000, 2048, 200}});
  Status st = a_->submit(
      RdmaOp::list_of(false, src.buffer, dst.buffer.remote(), OpList::of(past, 0, 3)), nullptr);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code(), ErrorCode::kOutOfBounds) << st.error().to_string();
  EXPECT_NE(st.error().message().find("range 2 of 3"), std::string::npos) << st.error().to_string();
  auto empty = std::make_shared<std::vector<ListEntry>>(
      std::vector<ListEntry>{{0, 0, 1024}, {1024, 1024, 0}});
  st = a_->submit(RdmaOp::list_of(false, src.buffer, dst.buffer.remote(), OpList::of(empty, 0, 2)),
                  nullptr);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message().find("range 1 of 2"), std::string::npos) << st.error().to_string();
  OpResult none = a_->execute(
      RdmaOp::list_of(false, src.buffer, dst.buffer.remote(), OpList::of(empty, 0, 0)), kTimeout);
  EXPECT_FALSE(none.status.ok()) << "a list of no ranges";
  for (uint64_t i = 0; i < 4096; ++i)
    ASSERT_EQ(dst.bytes[i], 0) << "byte " << i << " was written by a refused list";
  EXPECT_EQ(a_->stats().work_requests, 0u);
}

// RdmaQueuePair invariant 13: a list that fails midway says which ranges landed, and they did.
// The remote handle claims more than its owner registered (a stale or forged size): the NIC
// refuses the first range past the registration; the ranges before it completed.
TEST_P(QpListTest, AListFailingMidwaySaysWhichRangesLandedAndTheyDid) {
  const uint64_t block = 4096;
  const size_t count = 40, inside = 25;
  Registered remote = make(inside * block, 8);
  Registered local = make(count * block, 0);
  RemoteBuffer claimed = remote.buffer.remote();
  claimed.size = count * block;
  auto table = std::make_shared<std::vector<ListEntry>>(count);
  for (size_t i = 0; i < count; ++i)
    (*table)[i] = ListEntry{i * block, (count - 1 - i) * block, block};
  OpResult r = a_->execute(
      RdmaOp::list_of(true, local.buffer, claimed, OpList::of(table, 0, count)), kTimeout);
  ASSERT_FALSE(r.status.ok()) << "a range past the remote registration was read";
  EXPECT_EQ(r.fault, OpFault::kRemoteAccess) << r.status.error().to_string();
  EXPECT_EQ(r.list_landed, inside) << r.status.error().to_string();
  ASSERT_NO_FATAL_FAILURE(expect_ranges_equal(table, r.list_landed, local, remote));
}

// qp_posting.h invariant 6 and transfer_plan.h invariant 2 on the RDMA path: a list posted
// again allocates nothing per range (the queue pair's posting vectors and in-flight ring warm).
TEST_P(QpListTest, APostedListAllocatesNothingPerRange) {
  const uint64_t block = 64;
  const size_t big = 16384, small = 16;
  Registered remote = make(big * block, 6);
  Registered local = make(big * block, 0);
  Table table = scattered(big, block, 2);
  auto allocations = [&](size_t count) {
    RdmaOp op =
        RdmaOp::list_of(true, local.buffer, remote.buffer.remote(), OpList::of(table, 0, count));
    const uint64_t before = g_allocations.load();
    OpResult r = a_->execute(std::move(op), kTimeout);
    const uint64_t n = g_allocations.load() - before;
    EXPECT_TRUE(r.status.ok()) << r.status.error().to_string();
    EXPECT_EQ(r.list_landed, count);
    return n;
  };
  allocations(big);  // warm: the chain's vectors and the in-flight ring reach their size
  const uint64_t few = allocations(small);
  const uint64_t many = allocations(big);
  std::printf("allocations of one list posted again: %zu ranges %llu, %zu ranges %llu\n", small,
              static_cast<unsigned long long>(few), big, static_cast<unsigned long long>(many));
  EXPECT_LE(many, few) << small << " ranges: " << few << " allocations, " << big << ": " << many;
  ASSERT_NO_FATAL_FAILURE(expect_ranges_equal(table, big, local, remote));
}

QUEUE_PAIR_TEST_SUITE(QpListTest);

}  // namespace
}  // namespace caf_rdma::testing
