// RateEstimate: the recent rate of one kind of work (bytes per second per worker), learned from
// the pieces of it that ended, so that a queue can refuse up front what cannot end by its
// deadline (StreamClient invariant 9). No locking: its owner's. No CAF here.
//
// Invariants:
//  1. No estimate before kMinSamples samples of at least kMinSampleBytes each were recorded
//     (smaller pieces measure their round trips, not the rate): a queue without an estimate
//     admits everything.
//  2. The estimate is the exponentially weighted mean of the samples' rates, the newest
//     weighing kNewestWeight: it follows a changed link within a few pieces.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>

namespace caf_rdma {

class RateEstimate {
public:
  static constexpr uint32_t kMinSamples = 4;
  static constexpr uint64_t kMinSampleBytes = 1 << 20;
  static constexpr double kNewestWeight = 0.25;

  /// One piece of `bytes` that took `took` (ignored when too small or instant: invariant 1).
  void record(uint64_t bytes, std::chrono::nanoseconds took);
  /// Bytes per second (invariant 2); none before invariant 1's samples.
  std::optional<double> bytes_per_second() const;
  /// How long `bytes` take at the estimate; none without one.
  std::optional<std::chrono::nanoseconds> time_for(uint64_t bytes) const;

private:
  uint32_t samples_ = 0;
  double rate_ = 0;  ///< bytes per second
};

}  // namespace caf_rdma
