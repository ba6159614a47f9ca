// Shared setup for the RdmaQueuePair tests (rdma_queue_pair_test and the qp_*_test files of
// its parts): two connected queue pairs `a_` and `b_` on the default device. Every test runs
// twice: with a CQ per queue pair (OwnCq) and with the queue pairs of the test's domain on one
// shared CQ (SharedCq, RdmaQueuePair invariant 10); instantiate with QUEUE_PAIR_TEST_SUITE.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>

#include "components/rdma_queue_pair.h"
#include "tests/components/component_fixture.h"

namespace caf_rdma::testing {

constexpr milliseconds kTimeout{30000};

class QueuePairTest : public ComponentTest, public ::testing::WithParamInterface<bool> {
protected:
  void SetUp() override {
    ComponentTest::SetUp();
    if (IsSkipped() || HasFatalFailure())
      return;
    if (GetParam()) {
      auto router = CompletionRouter::create(domain_->context(), 4096);
      ASSERT_TRUE(router.ok()) << router.error().to_string();
      router_ = *router;
    }
    ASSERT_NO_FATAL_FAILURE(new_pair());
  }
  void TearDown() override {
    a_.reset();
    b_.reset();
    if (router_) {
      // Every credit came back (or waits for the next empty poll: requests given up with a
      // destroyed QP): no work request is left holding a CQ entry.
      auto stats = router_->stats();
      EXPECT_EQ(stats.credits_free + stats.credits_parked, stats.credits);
      EXPECT_EQ(stats.attached, 0u);
    }
  }

  /// Replaces `a_` and `b_` with a new connected pair (a pair in ERR is not used again).
  void new_pair() {
    a_ = make_qp();
    b_ = make_qp();
    ASSERT_TRUE(a_ && b_);
    Status st = RdmaQueuePair::connect_pair(*a_, *b_);
    ASSERT_TRUE(st.ok()) << st.error().to_string();
  }

  /// A queue pair on the test's domain: on the shared CQ in the SharedCq run. On another
  /// domain, a CQ of its own.
  std::unique_ptr<RdmaQueuePair> make_qp(RdmaQueuePair::Options options = {},
                                         const std::shared_ptr<RdmaDomain>& domain = nullptr) {
    if (!domain && router_ && !options.completions)
      options.completions = router_;
    return ComponentTest::make_qp(options, domain);
  }

  std::shared_ptr<CompletionRouter> router_;
  std::unique_ptr<RdmaQueuePair> a_, b_;
};

inline void expect_same(const Registered& x, const Registered& y, uint64_t n) {
  ASSERT_EQ(std::memcmp(x.bytes.get(), y.bytes.get(), n), 0) << "data differs";
}

}  // namespace caf_rdma::testing

/// Runs every test of `suite` (a QueuePairTest) with a CQ of its own and on a shared CQ.
#define QUEUE_PAIR_TEST_SUITE(suite)                                                \
  INSTANTIATE_TEST_SUITE_P(Cq, suite, ::testing::Bool(),                            \
                           [](const ::testing::TestParamInfo<bool>& info) {         \
                             return std::string(info.param ? "SharedCq" : "OwnCq"); \
                           })
