// TwoNodeTest: a GoogleTest fixture with two nodes in this process, `owner_` and `user_`, that
// talk over TCP loopback. In the rdma lane without a device the test is skipped with the reason.
#pragma once

#include <gtest/gtest.h>

#include <memory>

#include "tests/actors/manager_fixture.h"
#include "tests/rdma_test.h"

namespace caf_rdma::testing {

class TwoNodeTest : public ::testing::Test {
protected:
  void SetUp() override {
    if (expected_path() == kPathRdma && !rdma_skip_reason().empty())
      GTEST_SKIP() << rdma_skip_reason();
    ASSERT_TRUE(restart());
  }
  void TearDown() override {
    user_.reset();  // the user first: its lanes and queue pairs go before the owner's side
    owner_.reset();
  }
  /// Both nodes (stopped first, if running) started again with `options`; false if one failed.
  [[nodiscard]] bool restart(const ManagerOptions& options = {}) {
    TearDown();
    owner_ = start_node(options);
    user_ = start_node(options);
    return owner_ && user_;
  }

  std::unique_ptr<TestNode> owner_, user_;
};

}  // namespace caf_rdma::testing
