// The slices of a striped op (actors/transfer/stripe_plan.h, its invariants 1-3) and the
// device list of CAF_RDMA_DEVICES (ManagerOptions::from_env). No device needed.
#include "actors/transfer/stripe_plan.h"

#include <gtest/gtest.h>

#include <cstdlib>

#include "actors/rdma_manager_actor.h"
#include "tests/scoped_env.h"

namespace caf_rdma::detail {
namespace {

TEST(StripePlanTest, SlicesCoverTheRangeOnceAlignedAndEven) {
  const uint64_t lengths[] = {
      1,       kSliceAlign - 1, kSliceAlign, kSliceAlign + 1, 3 * kSliceAlign, (16 << 20) + 4097,
      64 << 20};
  for (uint64_t length : lengths) {
    for (size_t lanes = 1; lanes <= 8; ++lanes) {
      auto slices = plan_slices(length, lanes);
      ASSERT_FALSE(slices.empty());
      EXPECT_LE(slices.size(), lanes);
      uint64_t at = 0, shortest = UINT64_MAX, longest = 0;
      for (size_t i = 0; i < slices.size(); ++i) {
        EXPECT_EQ(slices[i].offset, at) << length << " over " << lanes;  // invariant 1
        EXPECT_GT(slices[i].length, 0u);
        if (i + 1 < slices.size()) {  // invariant 2
          EXPECT_EQ(slices[i].length % kSliceAlign, 0u);
          shortest = std::min(shortest, slices[i].length);
          longest = std::max(longest, slices[i].length);
        }
        at += slices[i].length;
      }
      EXPECT_EQ(at, length);
      if (slices.size() > 2) {
        EXPECT_LE(longest - shortest, kSliceAlign);  // invariant 3
      }
      // As many slices as lanes whenever each can have a whole unit.
      if (length >= lanes * kSliceAlign) {
        EXPECT_EQ(slices.size(), lanes);
      }
    }
  }
  EXPECT_TRUE(plan_slices(0, 4).empty());
}

TEST(StripePlanTest, DeviceListsAreCheckedAndNamed) {
  auto two = parse_devices("mlx5_0,mlx5_1");
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(*two, (std::vector<std::string>{"mlx5_0", "mlx5_1"}));
  auto all = parse_devices("all");
  ASSERT_TRUE(all.ok());
  EXPECT_TRUE(all->empty());
  for (const char* bad : {"mlx5_0,", ",mlx5_0", "a,,b", "a,b,a"}) {
    auto r = parse_devices(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.error().code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(r.error().message().find(std::string("CAF_RDMA_DEVICES='") + bad + "'"),
              std::string::npos)
        << r.error().message();
  }
  Result<ManagerOptions> o = Error(ErrorCode::kInternal, "not read");
  {
    caf_rdma::testing::ScopedEnv devices(kEnvDevices, "rxe0,rxe2");
    o = ManagerOptions::from_env();
  }
  ASSERT_TRUE(o.ok()) << o.error().to_string();
  EXPECT_EQ(o->ibverbs.device_name, "rxe0");
  EXPECT_EQ(o->rail_devices, std::vector<std::string>{"rxe2"});
}

}  // namespace
}  // namespace caf_rdma::detail
