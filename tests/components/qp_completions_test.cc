// QpCompletions (components/qp_completions.h) on a real device: error completions, the ERR
// state, and flushes. Test names refer to its invariants.
#include "components/qp_completions.h"

#include <gtest/gtest.h>

#include <atomic>
#include <vector>

#include "tests/components/queue_pair_fixture.h"

namespace caf_rdma::testing {
namespace {

class QpCompletionsTest : public QueuePairTest {};

// Invariant 3: a remote access error is reported clearly and puts the pair in ERR, where it
// stays (its user makes a new one, RdmaQueuePair invariant 5); the new pair works.
TEST_P(QpCompletionsTest, WrongRkeyIsAClearErrorAndThePairStaysInErr) {
  Registered src = make(4096, 8);
  Registered dst = make(4096, 0);
  RemoteBuffer bad = dst.buffer.remote();
  bad.rkey ^= 0x5a5a00;
  OpResult w = a_->execute(RdmaOp::write({src.buffer, 0, 4096}, bad), kTimeout);
  ASSERT_FALSE(w.status.ok());
  EXPECT_EQ(w.status.error().code(), ErrorCode::kWorkCompletion);
  EXPECT_EQ(w.fault, OpFault::kRemoteAccess);
  const std::string& m = w.status.error().message();
  EXPECT_NE(m.find("remote access error"), std::string::npos) << m;
  EXPECT_NE(m.find("wrong rkey"), std::string::npos) << m;
  EXPECT_TRUE(a_->needs_recovery());
  OpResult refused =
      a_->execute(RdmaOp::write({src.buffer, 0, 4096}, dst.buffer.remote()), kTimeout);
  ASSERT_FALSE(refused.status.ok());
  EXPECT_NE(refused.status.error().message().find("is in ERR"), std::string::npos)
      << refused.status.error().message();
  EXPECT_EQ(dst.bytes[0], 0);
  ASSERT_NO_FATAL_FAILURE(new_pair());
  OpResult ok = a_->execute(RdmaOp::write({src.buffer, 0, 4096}, dst.buffer.remote()), kTimeout);
  ASSERT_TRUE(ok.status.ok()) << ok.status.error().to_string();
  expect_same(src, dst, 4096);
  Registered back = make(4096, 0);
  OpResult r = b_->execute(RdmaOp::read({back.buffer, 0, 4096}, src.buffer.remote()), kTimeout);
  ASSERT_TRUE(r.status.ok()) << r.status.error().to_string();
  expect_same(src, back, 4096);
}

TEST_P(QpCompletionsTest, ADeregisteredRemoteRegionFailsCleanly) {
  Registered src = make(4096, 2);
  Registered dst = make(4096, 0);
  RemoteBuffer remote = dst.buffer.remote();
  // Once the last reference goes, the region is deregistered and its rkey dies.
  uint64_t live_before = domain_->registration_stats().live_regions;
  dst.buffer.release();
  EXPECT_EQ(domain_->registration_stats().live_regions, live_before - 1) << "dst deregistered";
  OpResult stale = a_->execute(RdmaOp::write({src.buffer, 0, 16}, remote), kTimeout);
  ASSERT_FALSE(stale.status.ok());
  EXPECT_NE(stale.status.error().message().find("remote access error"), std::string::npos)
      << stale.status.error().message();
  EXPECT_EQ(dst.bytes[0], 0) << "no byte reached the deregistered region";
  // A new pair works.
  ASSERT_NO_FATAL_FAILURE(new_pair());
  Registered dst2 = make(4096, 0);
  OpResult ok = a_->execute(RdmaOp::write({src.buffer, 0, 4096}, dst2.buffer.remote()), kTimeout);
  ASSERT_TRUE(ok.status.ok()) << ok.status.error().to_string();
  expect_same(src, dst2, 4096);
}

// A queue pair that entered ERR (here: aborted) and is destroyed before its flush completions
// were polled: each outstanding op completes once, as flushed (retryable on a new QP, the
// error naming why the QP entered ERR), not as a failure of its own. The manager retries such
// ops; reported otherwise, an op beside a refused one in a batch failed (seen 1 in 5 VM runs of
// RevocationTest.OpsBesideARefusedOneSucceed).
TEST_P(QpCompletionsTest, OpsOutstandingWhenAnErroredPairIsDestroyedAreFlushed) {
  constexpr int kOps = 16;
  constexpr uint64_t kBytes = 256 << 10;
  Registered src = make(kOps * kBytes, 5);
  Registered dst = make(kOps * kBytes, 0);
  std::vector<std::atomic<int>> calls(kOps);
  std::vector<OpResult> results(kOps);
  for (int i = 0; i < kOps; ++i) {
    Status st =
        a_->submit(RdmaOp::write({src.buffer, i * kBytes, kBytes}, dst.buffer.remote(), i * kBytes),
                   [&, i](const OpResult& r) {
                     results[i] = r;
                     calls[i]++;
                   });
    ASSERT_TRUE(st.ok()) << st.error().to_string();
  }
  ASSERT_TRUE(a_->abort("aborted by the test").ok());
  a_.reset();  // nothing polled since the submits
  for (int i = 0; i < kOps; ++i) {
    ASSERT_EQ(calls[i].load(), 1) << "op " << i;
    EXPECT_EQ(results[i].fault, OpFault::kFlushed) << "op " << i;
    const std::string m = results[i].status.error().message();
    EXPECT_NE(m.find("aborted by the test"), std::string::npos) << m;
  }
}

QUEUE_PAIR_TEST_SUITE(QpCompletionsTest);

}  // namespace
}  // namespace caf_rdma::testing
