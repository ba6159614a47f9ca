// AdmissionQueue (components/admission_queue.h): who makes room for a newcomer.
#include "components/admission_queue.h"

#include <gtest/gtest.h>

namespace caf_rdma {
namespace {

constexpr uint32_t kA = 0x7f000001, kB = 0x7f000002, kC = 0x7f000003;

// Invariant 1: below both limits a newcomer fits; an address at its share gives up its own
// oldest entry; a full queue gives up the oldest entry of the address holding the most.
TEST(AdmissionQueue, ANewcomerDisplacesTheOldestOfItsOwnAddressOrOfTheLargest) {
  AdmissionQueue q(/*max_total=*/5, /*max_per_host=*/3);
  EXPECT_TRUE(q.fits(kA));
  EXPECT_EQ(q.room_for(kA), -1);
  q.add(10, kA);
  q.add(11, kA);
  q.add(12, kB);
  q.add(13, kA);
  EXPECT_EQ(q.from(kA), 3u);
  EXPECT_FALSE(q.fits(kA));
  EXPECT_EQ(q.room_for(kA), 10) << "A is at its share: its own oldest";
  EXPECT_TRUE(q.fits(kB));
  EXPECT_EQ(q.room_for(kB), -1);
  q.add(14, kB);  // 5 in all
  EXPECT_FALSE(q.fits(kC));
  EXPECT_EQ(q.room_for(kC), 10) << "full: the oldest of the address holding the most (A)";
  EXPECT_EQ(q.room_for(kB), 10) << "B below its share, all full: still A's oldest";
  EXPECT_TRUE(q.remove(10));
  EXPECT_FALSE(q.remove(10)) << "invariant 2: gone once";
  EXPECT_TRUE(q.fits(kC));
  q.add(15, kC);
  const int v = q.room_for(kC);
  EXPECT_TRUE(v == 11 || v == 12) << "A and B hold 2 each: the oldest of one of them, not " << v;
  EXPECT_EQ(q.size(), 5u);
  q.add(15, kC);  // invariant 2: no second entry for one fd
  EXPECT_EQ(q.size(), 5u);
  EXPECT_EQ(q.from(kC), 1u);
}

}  // namespace
}  // namespace caf_rdma
