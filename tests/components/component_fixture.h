// Shared setup for rdma-tagged component tests: a domain on the default device and helpers to
// allocate registered, patterned memory.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <vector>

#include "components/rdma_domain.h"
#include "components/rdma_queue_pair.h"
#include "tests/components/byte_pattern.h"
#include "tests/rdma_test.h"

namespace caf_rdma::testing {

using std::chrono::milliseconds;

/// Memory plus its registration.
struct Registered {
  std::unique_ptr<uint8_t[]> bytes;
  uint64_t size = 0;
  RdmaBuffer buffer;
};

class ComponentTest : public RdmaTest {
protected:
  void SetUp() override {
    RdmaTest::SetUp();
    if (IsSkipped())
      return;
    auto config = IbverbsConfig::from_env();
    ASSERT_TRUE(config.ok()) << config.error().to_string();
    auto d = RdmaDomain::open(*config);
    ASSERT_TRUE(d.ok()) << d.error().to_string();
    domain_ = *d;
  }

  Registered make(uint64_t size, uint32_t seed, Access access = Access::kReadWrite,
                  const std::shared_ptr<RdmaDomain>& domain = nullptr) {
    Registered r;
    r.bytes.reset(new uint8_t[size]);
    r.size = size;
    for (uint64_t i = 0; i < size; ++i)
      r.bytes[i] = seed == 0 ? 0 : pattern(i, seed);
    auto b = (domain ? domain : domain_)->register_buffer(r.bytes.get(), size, access);
    EXPECT_TRUE(b.ok()) << b.error().to_string();
    if (b.ok())
      r.buffer = *b;
    return r;
  }

  std::unique_ptr<RdmaQueuePair> make_qp(const RdmaQueuePair::Options& options = {},
                                         const std::shared_ptr<RdmaDomain>& domain = nullptr) {
    auto q = RdmaQueuePair::create(domain ? domain : domain_, options);
    EXPECT_TRUE(q.ok()) << q.error().to_string();
    return q.ok() ? std::move(*q) : nullptr;
  }

  std::shared_ptr<RdmaDomain> domain_;
};

}  // namespace caf_rdma::testing
