// GpuNodeTest: the base of the tests of the manager with GPU memory (gpu_memory_test.cc, and
// transfer/staged_path_test.cc): nodes whose manager uses FakeDeviceMemory
// (tests/fake_device_memory.h), a stand-in GPU named as such, so they run without one; on the
// RDMA transport without a device they skip with the reason (fail under --config=rxe).
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>

#include "tests/actors/manager_fixture.h"
#include "tests/fake_device_memory.h"
#include "tests/rdma_test.h"

namespace caf_rdma::testing {

class GpuNodeTest : public ::testing::Test {
protected:
  void SetUp() override {
    if (expected_path() == kPathRdma && !rdma_skip_reason().empty())
      CAF_RDMA_SKIP_OR_FAIL(rdma_skip_reason());
  }

  /// A node whose manager sees `gpu` as its GPU support; small bounce buffers force chunking.
  std::unique_ptr<TestNode> node(std::shared_ptr<FakeDeviceMemory> gpu,
                                 std::optional<TransportMode> mode = std::nullopt,
                                 uint32_t bounce_buffers = 2) {
    NodeOptions o;
    auto env = ManagerOptions::from_env();
    EXPECT_TRUE(env.ok());
    o.manager = *env;
    if (mode)
      o.manager.mode = *mode;
    o.manager.device_memory = std::move(gpu);
    o.manager.staging_bytes = 64 << 10;
    o.manager.staging_buffers = bounce_buffers;
    auto n = RdmaNode::start(o);
    EXPECT_TRUE(n.ok()) << n.error().to_string();
    return n.ok() ? std::make_unique<TestNode>(std::move(*n)) : nullptr;
  }

  std::string staged_path() const {
    return expected_path() == kPathRdma ? kPathRdmaStaged : kPathFallback;
  }
};

}  // namespace caf_rdma::testing
