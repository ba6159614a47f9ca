// The byte pattern the components' tests fill memory with and check every byte against: a
// seed's pattern differs from another seed's in (nearly) every byte. One definition for every
// test of this folder (component_fixture.h includes it too).
#pragma once

#include <cstdint>
#include <vector>

namespace caf_rdma {

inline uint8_t pattern(uint64_t i, uint32_t seed) {
  // The seed is spread over the high bits: patterns of two seeds differ in (nearly) every byte.
  return static_cast<uint8_t>((i * 2654435761u + seed * 0x9E3779B97F4A7C15u) >> 13);
}

/// `n` bytes of pattern `seed`.
inline std::vector<uint8_t> filled(uint64_t n, uint32_t seed) {
  std::vector<uint8_t> v(n);
  for (uint64_t i = 0; i < n; ++i)
    v[i] = pattern(i, seed);
  return v;
}

}  // namespace caf_rdma
