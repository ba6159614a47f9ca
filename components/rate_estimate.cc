// RateEstimate (see rate_estimate.h).
#include "components/rate_estimate.h"

namespace caf_rdma {

void RateEstimate::record(uint64_t bytes, std::chrono::nanoseconds took) {
  if (bytes < kMinSampleBytes || took.count() <= 0)
    return;  // invariant 1
  const double rate = static_cast<double>(bytes) * 1e9 / static_cast<double>(took.count());
  rate_ = samples_ == 0 ? rate : rate_ + kNewestWeight * (rate - rate_);  // invariant 2
  if (samples_ < kMinSamples)
    ++samples_;
}

std::optional<double> RateEstimate::bytes_per_second() const {
  if (samples_ < kMinSamples)
    return std::nullopt;
  return rate_;
}

std::optional<std::chrono::nanoseconds> RateEstimate::time_for(uint64_t bytes) const {
  auto rate = bytes_per_second();
  if (!rate)
    return std::nullopt;
  return std::chrono::nanoseconds(static_cast<int64_t>(static_cast<double>(bytes) * 1e9 / *rate));
}

}  // namespace caf_rdma
