// Splitting transfers into work requests: message-size and SGE limits, order, remote offsets.
#include "components/work_request_plan.h"

#include <gtest/gtest.h>

namespace caf_rdma {
namespace {

uint64_t total(const std::vector<PlannedWorkRequest>& wrs) {
  uint64_t n = 0;
  for (const auto& w : wrs) {
    uint64_t s = 0;
    for (const auto& g : w.sges)
      s += g.length;
    EXPECT_EQ(s, w.length);
    n += w.length;
  }
  return n;
}

TEST(WorkRequestPlan, FitsInOneRequest) {
  auto p = plan_work_requests({{0x1000, 4096, 7}}, 0x9000, 1 << 20, 4);
  ASSERT_TRUE(p.ok());
  ASSERT_EQ(p->size(), 1u);
  EXPECT_EQ((*p)[0].remote_addr, 0x9000u);
  EXPECT_EQ((*p)[0].sges[0].lkey, 7u);
}

TEST(WorkRequestPlan, SplitsAtMaxMessageWithContiguousRemoteAddresses) {
  const uint64_t kLen = 64ull << 20, kMax = 64 << 10;
  auto p = plan_work_requests({{0x10000000, kLen, 1}}, 0x80000000, kMax, 30);
  ASSERT_TRUE(p.ok());
  ASSERT_EQ(p->size(), kLen / kMax);
  EXPECT_EQ(total(*p), kLen);
  for (size_t i = 0; i < p->size(); ++i) {
    EXPECT_EQ((*p)[i].remote_addr, 0x80000000 + i * kMax);
    EXPECT_EQ((*p)[i].sges[0].addr, 0x10000000 + i * kMax);
    EXPECT_LE((*p)[i].length, kMax);
  }
}

TEST(WorkRequestPlan, GatherListRespectsMaxSge) {
  std::vector<LocalSegment> segs;
  segs.reserve(10);
  for (uint64_t i = 0; i < 10; ++i)
    segs.push_back({0x1000u + i * 0x1000u, 100, 3});
  auto p = plan_work_requests(segs, 0, 1 << 20, 4);
  ASSERT_TRUE(p.ok());
  ASSERT_EQ(p->size(), 3u);  // 4 + 4 + 2 SGEs
  EXPECT_EQ((*p)[0].sges.size(), 4u);
  EXPECT_EQ((*p)[2].sges.size(), 2u);
  EXPECT_EQ((*p)[1].remote_addr, 400u);
  EXPECT_EQ((*p)[2].remote_addr, 800u);
  EXPECT_EQ(total(*p), 1000u);
}

TEST(WorkRequestPlan, SegmentsSplitAcrossRequests) {
  auto p = plan_work_requests({{0, 150, 1}, {1000, 150, 2}}, 5000, 100, 8);
  ASSERT_TRUE(p.ok());
  ASSERT_EQ(p->size(), 3u);
  // [0,100) | [100,150)+[1000,1050) | [1050,1150)
  EXPECT_EQ((*p)[1].sges.size(), 2u);
  EXPECT_EQ((*p)[1].sges[0].addr, 100u);
  EXPECT_EQ((*p)[1].sges[1].addr, 1000u);
  EXPECT_EQ((*p)[1].sges[1].lkey, 2u);
  EXPECT_EQ((*p)[2].remote_addr, 5200u);
  EXPECT_EQ(total(*p), 300u);
}

TEST(WorkRequestPlan, RejectsNonsense) {
  EXPECT_FALSE(plan_work_requests({{0, 10, 1}}, 0, 0, 1).ok());
  EXPECT_FALSE(plan_work_requests({{0, 10, 1}}, 0, 10, 0).ok());
  auto empty = plan_work_requests({{0, 0, 1}}, 0, 10, 1);
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.error().code(), ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace caf_rdma
