// Base fixture for rdma-tagged tests: skips the test, with the reason, when the host has no
// RDMA device (rdma_test_main.cc decides, and fails instead under CAF_RDMA_REQUIRE_DEVICE=1).
#pragma once

#include <gtest/gtest.h>

#include <string>

namespace caf_rdma::testing {

/// Why rdma tests cannot run on this host; empty when a device is present.
const std::string& rdma_skip_reason();

/// True under --config=rxe (CAF_RDMA_REQUIRE_DEVICE=1): there, a test that cannot run fails.
bool rdma_required();

/// Skips the current test with `reason`, or fails it when rdma_required(). Use with `return`.
#define CAF_RDMA_SKIP_OR_FAIL(reason)                                       \
  do {                                                                      \
    if (::caf_rdma::testing::rdma_required())                               \
      FAIL() << "cannot run under CAF_RDMA_REQUIRE_DEVICE=1: " << (reason); \
    else                                                                    \
      GTEST_SKIP() << (reason);                                             \
  } while (false)

class RdmaTest : public ::testing::Test {
protected:
  void SetUp() override {
    if (!rdma_skip_reason().empty())
      GTEST_SKIP() << rdma_skip_reason();
  }
};

}  // namespace caf_rdma::testing
