// QpBlocking (components/qp_blocking.h) on a real device: execute and execute_batch, and what
// a timeout does. Test names refer to its invariants.
#include "components/qp_blocking.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "tests/components/queue_pair_fixture.h"

namespace caf_rdma::testing {
namespace {

class QpBlockingTest : public QueuePairTest {};

// Invariants 1 and 2: a timeout flushes and returns; the QP stays in ERR and refuses more
// blocking calls at once.
TEST_P(QpBlockingTest, TimeoutFlushesAndTheQueuePairStaysInErr) {
  auto x = make_qp();
  auto dead = make_qp();
  ASSERT_TRUE(x && dead);
  // x is connected to `dead`, which is destroyed: nobody answers x's requests.
  ASSERT_TRUE(x->connect(dead->local_info()).ok());
  dead.reset();
  Registered src = make(1 << 20, 6);
  Registered dst = make(1 << 20, 0);
  auto t0 = std::chrono::steady_clock::now();
  OpResult w =
      x->execute(RdmaOp::write({src.buffer, 0, 1 << 20}, dst.buffer.remote()), milliseconds(100));
  auto took = std::chrono::steady_clock::now() - t0;
  ASSERT_FALSE(w.status.ok());
  EXPECT_EQ(w.status.error().code(), ErrorCode::kTimeout) << w.status.error().to_string();
  EXPECT_NE(w.status.error().message().find("drained"), std::string::npos);
  EXPECT_LT(took, std::chrono::seconds(10));
  EXPECT_EQ(x->outstanding_work_requests(), 0u) << "nothing left for the NIC to touch";
  EXPECT_TRUE(x->needs_recovery());
  std::vector<RdmaOp> two;
  two.push_back(RdmaOp::write({src.buffer, 0, 4096}, dst.buffer.remote()));
  two.push_back(RdmaOp::write({src.buffer, 4096, 4096}, dst.buffer.remote(), 4096));
  auto refused = x->execute_batch(std::move(two), kTimeout);
  ASSERT_EQ(refused.size(), 2u);
  for (const OpResult& r : refused) {
    ASSERT_FALSE(r.status.ok());
    EXPECT_NE(r.status.error().message().find("is in ERR"), std::string::npos)
        << r.status.error().message();
  }
  EXPECT_TRUE(x->idle()) << "refused ops were never accepted";
}

// Invariant 4: a stop set by another thread ends the call as its deadline would (flushed, in
// ERR, nothing outstanding), answering kCancelled; a stop set before the call ends it at once.
TEST_P(QpBlockingTest, AStopEndsTheCallFlushedAndCancelled) {
  auto x = make_qp();
  auto dead = make_qp();
  ASSERT_TRUE(x && dead);
  ASSERT_TRUE(x->connect(dead->local_info()).ok());
  dead.reset();  // nobody answers: the op waits until stopped
  Registered src = make(1 << 20, 6);
  Registered dst = make(1 << 20, 0);
  std::atomic<bool> stop{false};
  std::atomic<bool> returned{false};
  std::thread stopper([&] {
    // Stops once the write is on the NIC (no sleep: the queue pair says so); a call that
    // returned first (a failure) ends the wait too.
    while (x->outstanding_work_requests() == 0 && !returned.load())
      std::this_thread::yield();
    stop.store(true);
  });
  OpResult w = x->execute_or_stop(RdmaOp::write({src.buffer, 0, 1 << 20}, dst.buffer.remote()),
                                  std::chrono::seconds(60), &stop);
  returned.store(true);
  stopper.join();
  ASSERT_FALSE(w.status.ok());
  EXPECT_EQ(w.status.error().code(), ErrorCode::kCancelled) << w.status.error().to_string();
  EXPECT_NE(w.status.error().message().find("drained"), std::string::npos);
  EXPECT_EQ(x->outstanding_work_requests(), 0u) << "nothing left for the NIC to touch";
  EXPECT_TRUE(x->needs_recovery());
  // A stop already set: nothing posted, the queue pair untouched.
  std::atomic<bool> stopped{true};
  OpResult r = a_->execute_or_stop(RdmaOp::read({dst.buffer, 0, 4096}, src.buffer.remote()),
                                   kTimeout, &stopped);
  ASSERT_FALSE(r.status.ok());
  EXPECT_EQ(r.status.error().code(), ErrorCode::kCancelled) << r.status.error().to_string();
  EXPECT_NE(r.status.error().message().find("before it was posted"), std::string::npos);
  EXPECT_FALSE(a_->needs_recovery());
  for (size_t i = 0; i < 4096; ++i)
    ASSERT_EQ(dst.bytes[i], 0) << "byte " << i << " was read";
}

TEST_P(QpBlockingTest, BatchReportsEachOpsResult) {
  Registered src = make(uint64_t{3} * 4096, 12);
  Registered dst = make(uint64_t{3} * 4096, 0);
  std::vector<RdmaOp> ops;
  ops.push_back(RdmaOp::write({src.buffer, 0, 4096}, dst.buffer.remote(), 0));
  ops.push_back(RdmaOp::write({src.buffer, 4096, 4096}, dst.buffer.remote(), 9000));  // OOB
  ops.push_back(RdmaOp::write({src.buffer, 8192, 4096}, dst.buffer.remote(), 8192));
  auto results = a_->execute_batch(std::move(ops), kTimeout);
  ASSERT_EQ(results.size(), 3u);
  EXPECT_TRUE(results[0].status.ok());
  ASSERT_FALSE(results[1].status.ok());
  EXPECT_EQ(results[1].status.error().code(), ErrorCode::kOutOfBounds);
  EXPECT_TRUE(results[2].status.ok());
  EXPECT_EQ(std::memcmp(dst.bytes.get(), src.bytes.get(), 4096), 0);
  EXPECT_EQ(std::memcmp(dst.bytes.get() + 8192, src.bytes.get() + 8192, 4096), 0);
}

QUEUE_PAIR_TEST_SUITE(QpBlockingTest);

}  // namespace
}  // namespace caf_rdma::testing
