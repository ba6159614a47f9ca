// Base fixture for rdma-tagged tests: skips the test, with the reason, when the host has no
// RDMA device (rdma_test_main.cc decides, and fails instead under CAF_RDMA_REQUIRE_DEVICE=1).
#pragma once

#include <gtest/gtest.h>

#include <string>

namespace caf_rdma::testing {

/// Why rdma tests cannot run on this host; empty when a device is present.
const std::string& rdma_skip_reason();

class RdmaTest : public ::testing::Test {
protected:
  void SetUp() override {
    if (!rdma_skip_reason().empty())
      GTEST_SKIP() << rdma_skip_reason();
  }
};

}  // namespace caf_rdma::testing
