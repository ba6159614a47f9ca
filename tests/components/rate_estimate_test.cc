// RateEstimate (components/rate_estimate.h): no estimate before enough samples of a useful size,
// then the weighted mean of their rates, newest weighing a quarter.
#include "components/rate_estimate.h"

#include <gtest/gtest.h>

#include <chrono>

namespace caf_rdma {
namespace {

using std::chrono::milliseconds;

TEST(RateEstimate, NoEstimateBeforeEnoughSamplesOfAUsefulSize) {
  RateEstimate r;
  EXPECT_FALSE(r.bytes_per_second().has_value());
  EXPECT_FALSE(r.time_for(1 << 20).has_value());
  // Small pieces and instant ones measure nothing (invariant 1).
  for (int i = 0; i < 10; ++i) {
    r.record(RateEstimate::kMinSampleBytes - 1, milliseconds(1));
    r.record(RateEstimate::kMinSampleBytes, milliseconds(0));
  }
  EXPECT_FALSE(r.bytes_per_second().has_value());
  for (uint32_t i = 0; i + 1 < RateEstimate::kMinSamples; ++i)
    r.record(1 << 20, milliseconds(1));
  EXPECT_FALSE(r.bytes_per_second().has_value());
  r.record(1 << 20, milliseconds(1));
  ASSERT_TRUE(r.bytes_per_second().has_value());
  EXPECT_DOUBLE_EQ(*r.bytes_per_second(), (1 << 20) * 1000.0);
  EXPECT_EQ(*r.time_for(4 << 20), milliseconds(4));
}

TEST(RateEstimate, TheNewestSampleWeighsAQuarter) {
  RateEstimate r;
  for (uint32_t i = 0; i < RateEstimate::kMinSamples; ++i)
    r.record(1 << 20, milliseconds(1));
  r.record(1 << 20, milliseconds(2));  // half the rate
  ASSERT_TRUE(r.bytes_per_second().has_value());
  const double rate = (1 << 20) * 1000.0;
  EXPECT_DOUBLE_EQ(*r.bytes_per_second(), rate + 0.25 * (rate / 2 - rate));
}

}  // namespace
}  // namespace caf_rdma
