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
    owner_ = start_node();
    user_ = start_node();
    ASSERT_TRUE(owner_ && user_);
  }
  void TearDown() override {
    user_.reset();  // the user first: its lanes and queue pairs go before the owner's side
    owner_.reset();
  }

  std::unique_ptr<TestNode> owner_, user_;
};

}  // namespace caf_rdma::testing
