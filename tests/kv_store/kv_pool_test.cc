// KvPool: first-fit allocation, alignment, coalescing, and blocks returning on last release.
#include <gtest/gtest.h>

#include <memory>

#include "systems/kv_store/kv_pool.h"

namespace caf_rdma::kv {
namespace {

TEST(KvPoolTest, AllocatesAlignedBlocksUntilFullAndReportsTheLargestFreeBlock) {
  KvPool pool(1000, 64);
  EXPECT_EQ(pool.capacity(), 960u);  // rounded down to the alignment
  auto a = pool.allocate(1);
  auto b = pool.allocate(65);
  auto c = pool.allocate(700);
  ASSERT_TRUE(a && b && c);
  EXPECT_EQ(*a, 0u);
  EXPECT_EQ(*b, 64u);
  EXPECT_EQ(*c, 192u);
  EXPECT_EQ(pool.used(), 64u + 128u + 704u);
  EXPECT_EQ(pool.largest_free(), 64u);
  EXPECT_FALSE(pool.allocate(65));
  EXPECT_FALSE(pool.allocate(0));
  EXPECT_TRUE(pool.allocate(64));
  EXPECT_EQ(pool.largest_free(), 0u);
}

TEST(KvPoolTest, FreedNeighboursCoalesceSoALargeValueFitsAgain) {
  KvPool pool(4096, 64);
  auto a = pool.allocate(1024), b = pool.allocate(1024), c = pool.allocate(1024),
       d = pool.allocate(1024);
  ASSERT_TRUE(a && b && c && d);
  pool.free(*b, 1024);
  pool.free(*d, 1024);
  EXPECT_EQ(pool.largest_free(), 1024u);  // two holes, not adjacent
  EXPECT_FALSE(pool.allocate(2048));
  pool.free(*c, 1024);  // joins b's and d's holes
  EXPECT_EQ(pool.largest_free(), 3072u);
  pool.free(*a, 1024);
  EXPECT_EQ(pool.largest_free(), 4096u);
  EXPECT_EQ(pool.used(), 0u);
  EXPECT_EQ(pool.allocate(4096), std::optional<uint64_t>(0));
}

TEST(KvPoolTest, ABlockReturnsToThePoolWhenItsLastHolderLetsGo) {
  auto pool = std::make_shared<KvPool>(4096, 64);
  auto at = pool->allocate(4000);
  ASSERT_TRUE(at);
  auto block = std::make_shared<const KvBlock>(pool, *at, 4000);
  auto reader = block;  // e.g. a GET still writing from it
  block.reset();        // the index dropped it (replaced or deleted)
  EXPECT_FALSE(pool->allocate(4000));
  reader.reset();
  EXPECT_TRUE(pool->allocate(4000));
}

}  // namespace
}  // namespace caf_rdma::kv
