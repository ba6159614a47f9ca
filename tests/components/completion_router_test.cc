// CompletionRouter: queue pairs of one device on one shared completion queue, on a real device
// (rxe in the VM lane). Every transfer is verified byte for byte. Names refer to the invariants
// in components/completion_router.h and RdmaQueuePair invariant 10.
#include "components/completion_router.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <thread>

#include "components/completion_poller.h"
#include "tests/components/component_fixture.h"

namespace caf_rdma::testing {
namespace {

constexpr milliseconds kTimeout{30000};

using QpPair = std::pair<std::shared_ptr<RdmaQueuePair>, std::shared_ptr<RdmaQueuePair>>;

class CompletionRouterTest : public ComponentTest {
protected:
  std::shared_ptr<CompletionRouter> make_router(int entries) {
    auto r = CompletionRouter::create(domain_->context(), entries);
    EXPECT_TRUE(r.ok()) << r.error().to_string();
    return r.ok() ? *r : nullptr;
  }

  QpPair make_pair(const std::shared_ptr<CompletionRouter>& router) {
    RdmaQueuePair::Options o;
    o.completions = router;
    std::shared_ptr<RdmaQueuePair> x = make_qp(o);
    std::shared_ptr<RdmaQueuePair> y = make_qp(o);
    if (!x || !y)
      return {};
    Status st = RdmaQueuePair::connect_pair(*x, *y);
    EXPECT_TRUE(st.ok()) << st.error().to_string();
    return {x, y};
  }

  /// Polls (through `qp`, which polls the shared CQ for all its QPs) until `done()` or the
  /// timeout; true if done.
  static bool progress_until(RdmaQueuePair& qp, const std::function<bool()>& done) {
    auto deadline = std::chrono::steady_clock::now() + kTimeout;
    while (!done() && std::chrono::steady_clock::now() < deadline)
      if (qp.progress() == 0)
        std::this_thread::yield();
    return done();
  }
};

/// Counts callbacks: each op must complete exactly once.
struct Tally {
  explicit Tally(size_t n) : calls(n), failed(n) {}
  OpCallback callback(size_t i) {
    return [this, i](const OpResult& r) {
      if (!r.status.ok()) {
        failed[i] = true;
        std::lock_guard<std::mutex> guard(mu);
        errors.push_back(r.status.error().message());
      }
      calls[i]++;
      std::lock_guard<std::mutex> guard(mu);
      finished++;
      cv.notify_all();
    };
  }
  bool all() const { return finished.load() == calls.size(); }
  /// Waits (kTimeout at most) for every callback, made by another thread (a poller).
  bool wait_all() {
    std::unique_lock<std::mutex> guard(mu);
    return cv.wait_for(guard, kTimeout, [this] { return all(); });
  }
  std::condition_variable cv;
  std::vector<std::atomic<int>> calls;
  std::vector<std::atomic<bool>> failed;
  std::atomic<size_t> finished{0};
  std::mutex mu;
  std::vector<std::string> errors;
};

// RdmaQueuePair invariant 10 and CompletionPoller invariant 4: eight queue pairs, one CQ, one
// poll per sweep; every op completes once through the poller thread.
TEST_F(CompletionRouterTest, ManyQueuePairsShareOneCompletionQueueAndOnePoll) {
  auto router = make_router(4096);
  ASSERT_TRUE(router);
  std::vector<QpPair> pairs;
  CompletionPoller poller;
  for (int i = 0; i < 4; ++i) {
    pairs.push_back(make_pair(router));
    ASSERT_TRUE(pairs.back().first);
    poller.add(pairs.back().first);
    poller.add(pairs.back().second);
    EXPECT_EQ(pairs.back().first->limits().completion_entries,
              router->completion_queue()->entries());
  }
  EXPECT_EQ(router->stats().attached, 8u);
  constexpr uint64_t kChunk = 4096;
  constexpr size_t kOpsPerPair = 300;
  std::vector<Registered> src, dst, back;
  for (int i = 0; i < 4; ++i) {
    src.push_back(make(kChunk * kOpsPerPair, static_cast<uint32_t>(7 + i)));
    dst.push_back(make(kChunk * kOpsPerPair, 0));
    back.push_back(make(kChunk * kOpsPerPair, 0));
  }
  // Writes on each pair's first QP, then reads of what they wrote on its second; only the
  // poller thread polls.
  auto run_all = [&](bool write, Tally& tally) {
    for (size_t p = 0; p < 4; ++p)
      for (size_t k = 0; k < kOpsPerPair; ++k) {
        RdmaOp op = write ? RdmaOp::write({src[p].buffer, k * kChunk, kChunk},
                                          dst[p].buffer.remote(), k * kChunk)
                          : RdmaOp::read({back[p].buffer, k * kChunk, kChunk},
                                         dst[p].buffer.remote(), k * kChunk);
        auto& qp = write ? pairs[p].first : pairs[p].second;
        Status st = qp->submit(std::move(op), tally.callback(p * kOpsPerPair + k));
        if (!st.ok())
          return ::testing::AssertionFailure() << st.error().to_string();
      }
    poller.wake();
    if (!tally.wait_all())
      return ::testing::AssertionFailure()
             << tally.finished.load() << " of " << tally.calls.size() << " completed";
    return ::testing::AssertionSuccess();
  };
  Tally writes(4 * kOpsPerPair);
  ASSERT_TRUE(run_all(true, writes));
  Tally reads(4 * kOpsPerPair);
  ASSERT_TRUE(run_all(false, reads));
  for (size_t i = 0; i < writes.calls.size(); ++i) {
    EXPECT_EQ(writes.calls[i].load(), 1) << "write " << i;
    EXPECT_EQ(reads.calls[i].load(), 1) << "read " << i;
  }
  EXPECT_TRUE(writes.errors.empty()) << writes.errors.front();
  EXPECT_TRUE(reads.errors.empty()) << reads.errors.front();
  for (size_t p = 0; p < 4; ++p) {
    ASSERT_EQ(std::memcmp(src[p].bytes.get(), dst[p].bytes.get(), kChunk * kOpsPerPair), 0)
        << "pair " << p << " wrote other bytes";
    ASSERT_EQ(std::memcmp(src[p].bytes.get(), back[p].bytes.get(), kChunk * kOpsPerPair), 0)
        << "pair " << p << " read back other bytes";
  }
  EXPECT_EQ(poller.sources(), 1u) << "one sweep polls the shared CQ once for its 8 QPs";
  auto stats = router->stats();
  EXPECT_GT(stats.completions, 0u);
  EXPECT_EQ(stats.unrouted, 0u);
  EXPECT_EQ(stats.credits_free, stats.credits);
  for (auto& [x, y] : pairs) {
    poller.remove(x.get());
    poller.remove(y.get());
  }
}

// Invariant 1: the queue pairs together never post more work requests than the shared CQ has
// credits for (a CQ of 16 entries, 12 credits, against send queues of hundreds); the ones that
// found none are resumed as credits come back, and every op completes exactly once.
TEST_F(CompletionRouterTest, CreditsBoundWhatIsPostedAcrossQueuePairs) {
  auto router = make_router(16);
  ASSERT_TRUE(router);
  const uint64_t credits = router->stats().credits;
  std::vector<QpPair> pairs;
  for (int i = 0; i < 3; ++i) {
    pairs.push_back(make_pair(router));
    ASSERT_TRUE(pairs.back().first);
    EXPECT_GT(pairs.back().first->limits().send, credits) << "the send queue alone would overflow";
  }
  constexpr uint64_t kChunk = 64;
  constexpr size_t kOps = 400;
  std::vector<Registered> src, dst;
  for (int i = 0; i < 3; ++i) {
    src.push_back(make(kChunk * kOps, static_cast<uint32_t>(21 + i)));
    dst.push_back(make(kChunk * kOps, 0));
  }
  Tally tally(3 * kOps);
  for (size_t k = 0; k < kOps; ++k)
    for (size_t p = 0; p < 3; ++p) {
      Status st = pairs[p].first->submit(
          RdmaOp::write({src[p].buffer, k * kChunk, kChunk}, dst[p].buffer.remote(), k * kChunk),
          tally.callback(p * kOps + k));
      ASSERT_TRUE(st.ok()) << st.error().to_string();
    }
  // One QP's progress drives them all (they share the CQ).
  ASSERT_TRUE(progress_until(*pairs[2].second, [&] { return tally.all(); }))
      << tally.finished.load() << " of " << tally.calls.size() << " completed";
  for (size_t i = 0; i < tally.calls.size(); ++i)
    EXPECT_EQ(tally.calls[i].load(), 1) << "op " << i;
  EXPECT_TRUE(tally.errors.empty()) << tally.errors.front();
  for (size_t p = 0; p < 3; ++p)
    ASSERT_EQ(std::memcmp(src[p].bytes.get(), dst[p].bytes.get(), kChunk * kOps), 0)
        << "pair " << p;
  auto stats = router->stats();
  EXPECT_GT(stats.credit_waits, 0u) << "the credits, not the send queues, held posts back";
  EXPECT_EQ(stats.credits_free, credits);
}

// Invariant 5: a queue pair with a long backlog does not keep the credits from one that asks
// for a few after it: the waiting ones take turns, one batch each.
TEST_F(CompletionRouterTest, AQueuePairWithABacklogDoesNotStarveTheOthers) {
  auto router = make_router(16);
  ASSERT_TRUE(router);
  QpPair busy = make_pair(router);
  QpPair late = make_pair(router);
  ASSERT_TRUE(busy.first && late.first);
  constexpr uint64_t kChunk = 64;
  constexpr size_t kBacklog = 2000;
  constexpr size_t kFew = 24;
  Registered src = make(kChunk * kBacklog, 61);
  Registered dst = make(kChunk * kBacklog, 0);
  Registered lsrc = make(kChunk * kFew, 62);
  Registered ldst = make(kChunk * kFew, 0);
  Tally backlog(kBacklog);
  for (size_t k = 0; k < kBacklog; ++k)
    ASSERT_TRUE(busy.first
                    ->submit(RdmaOp::write({src.buffer, k * kChunk, kChunk}, dst.buffer.remote(),
                                           k * kChunk),
                             backlog.callback(k))
                    .ok());
  Tally few(kFew);
  std::atomic<size_t> backlog_done_then{kBacklog};
  for (size_t k = 0; k < kFew; ++k) {
    OpCallback count = few.callback(k);
    ASSERT_TRUE(late.first
                    ->submit(RdmaOp::write({lsrc.buffer, k * kChunk, kChunk}, ldst.buffer.remote(),
                                           k * kChunk),
                             [&, count, k](OpResult r) {
                               if (k + 1 == kFew)  // RC completes in order: the last of them
                                 backlog_done_then = backlog.finished.load();
                               count(std::move(r));
                             })
                    .ok());
  }
  ASSERT_TRUE(progress_until(*busy.second, [&] { return backlog.all() && few.all(); }))
      << backlog.finished.load() << " + " << few.finished.load() << " completed";
  EXPECT_TRUE(backlog.errors.empty()) << backlog.errors.front();
  EXPECT_TRUE(few.errors.empty()) << few.errors.front();
  ASSERT_EQ(std::memcmp(src.bytes.get(), dst.bytes.get(), kChunk * kBacklog), 0);
  ASSERT_EQ(std::memcmp(lsrc.bytes.get(), ldst.bytes.get(), kChunk * kFew), 0);
  std::printf("the late queue pair's %zu ops were done when %zu of the backlog's %zu were\n", kFew,
              backlog_done_then.load(), kBacklog);
  EXPECT_LT(backlog_done_then.load(), kBacklog / 2)
      << "the late queue pair waited for most of the backlog";
  EXPECT_EQ(router->stats().credits_free, router->stats().credits);
}

// Invariants 2 and 3: a queue pair destroyed with requests in flight leaves the shared CQ to the
// others: their ops, and those of a queue pair made after it, complete with the right bytes.
TEST_F(CompletionRouterTest, AQueuePairDestroyedWithWorkInFlightDisturbsNoOther) {
  auto router = make_router(4096);
  ASSERT_TRUE(router);
  QpPair doomed = make_pair(router);
  QpPair other = make_pair(router);
  ASSERT_TRUE(doomed.first && other.first);
  constexpr uint64_t kBig = 256 << 10;
  constexpr size_t kOps = 32;
  Registered dsrc = make(kBig * kOps, 41);
  Registered ddst = make(kBig * kOps, 0);
  Registered osrc = make(kBig * kOps, 42);
  Registered odst = make(kBig * kOps, 0);
  Tally dtally(kOps);
  Tally otally(kOps);
  for (size_t k = 0; k < kOps; ++k) {
    ASSERT_TRUE(
        doomed.first
            ->submit(RdmaOp::write({dsrc.buffer, k * kBig, kBig}, ddst.buffer.remote(), k * kBig),
                     dtally.callback(k))
            .ok());
    ASSERT_TRUE(
        other.first
            ->submit(RdmaOp::write({osrc.buffer, k * kBig, kBig}, odst.buffer.remote(), k * kBig),
                     otally.callback(k))
            .ok());
  }
  // Destroyed at once, its requests (mostly) still in flight: every op completes now, once.
  doomed.first.reset();
  ASSERT_TRUE(dtally.all()) << "the destructor completes every op";
  ASSERT_TRUE(progress_until(*other.first, [&] { return otally.all(); }));
  size_t destroyed = 0;
  for (size_t k = 0; k < kOps; ++k) {
    EXPECT_EQ(dtally.calls[k].load(), 1) << "op " << k;
    EXPECT_EQ(otally.calls[k].load(), 1) << "op " << k;
    if (dtally.failed[k])
      ++destroyed;
    else
      EXPECT_EQ(std::memcmp(dsrc.bytes.get() + k * kBig, ddst.bytes.get() + k * kBig, kBig), 0)
          << "op " << k << " succeeded with other bytes";
  }
  EXPECT_TRUE(otally.errors.empty()) << otally.errors.front();
  ASSERT_EQ(std::memcmp(osrc.bytes.get(), odst.bytes.get(), kBig * kOps), 0);
  // A new pair on the same CQ (its QP numbers may be the destroyed one's).
  QpPair fresh = make_pair(router);
  ASSERT_TRUE(fresh.first);
  Registered fdst = make(kBig * kOps, 0);
  Registered fback = make(kBig * kOps, 0);
  OpResult w = fresh.first->execute(
      RdmaOp::write({osrc.buffer, 0, kBig * kOps}, fdst.buffer.remote()), kTimeout);
  ASSERT_TRUE(w.status.ok()) << w.status.error().to_string();
  OpResult r = other.second->execute(
      RdmaOp::read({fback.buffer, 0, kBig * kOps}, fdst.buffer.remote()), kTimeout);
  ASSERT_TRUE(r.status.ok()) << r.status.error().to_string();
  ASSERT_EQ(std::memcmp(osrc.bytes.get(), fdst.bytes.get(), kBig * kOps), 0);
  ASSERT_EQ(std::memcmp(osrc.bytes.get(), fback.bytes.get(), kBig * kOps), 0);
  auto stats = router->stats();
  std::printf("destroyed with %zu of %zu ops in flight; completions dropped for no QP: %llu\n",
              destroyed, kOps, static_cast<unsigned long long>(stats.unrouted));
  EXPECT_EQ(stats.credits_free, stats.credits)
      << "the destroyed QP's credits came back after a poll found the CQ empty (parked: "
      << stats.credits_parked << ")";
  EXPECT_EQ(stats.credits_parked, 0u);
  EXPECT_EQ(stats.attached, 5u);
}

// An error on one queue pair (a wrong rkey puts it in ERR; its flushed completions go through
// the shared CQ) fails only its op; the other pair's ops on the same CQ complete, and a new
// pair in place of the first works (a pair in ERR stays so: RdmaQueuePair invariant 5).
TEST_F(CompletionRouterTest, AnErrorOnOneQueuePairLeavesTheOthersWorking) {
  auto router = make_router(4096);
  ASSERT_TRUE(router);
  QpPair bad = make_pair(router);
  QpPair good = make_pair(router);
  ASSERT_TRUE(bad.first && good.first);
  Registered src = make(1 << 20, 51);
  Registered dst = make(1 << 20, 0);
  RemoteBuffer wrong = dst.buffer.remote();
  wrong.rkey ^= 0x5a5a00;
  Tally tally(16);
  for (size_t k = 0; k < 16; ++k)
    ASSERT_TRUE(
        good.first
            ->submit(RdmaOp::write({src.buffer, k << 16, 1 << 16}, dst.buffer.remote(), k << 16),
                     tally.callback(k))
            .ok());
  OpResult failed = bad.first->execute(RdmaOp::write({src.buffer, 0, 4096}, wrong), kTimeout);
  ASSERT_FALSE(failed.status.ok());
  EXPECT_NE(failed.status.error().message().find("remote access error"), std::string::npos)
      << failed.status.error().message();
  ASSERT_TRUE(progress_until(*good.second, [&] { return tally.all(); }));
  EXPECT_TRUE(tally.errors.empty()) << tally.errors.front();
  ASSERT_EQ(std::memcmp(src.bytes.get(), dst.bytes.get(), 1 << 20), 0);
  EXPECT_FALSE(good.first->needs_recovery());
  EXPECT_TRUE(bad.first->needs_recovery());
  bad = make_pair(router);
  ASSERT_TRUE(bad.first);
  Registered back = make(1 << 20, 0);
  OpResult again =
      bad.first->execute(RdmaOp::read({back.buffer, 0, 1 << 20}, dst.buffer.remote()), kTimeout);
  ASSERT_TRUE(again.status.ok()) << again.status.error().to_string();
  ASSERT_EQ(std::memcmp(src.bytes.get(), back.bytes.get(), 1 << 20), 0);
  EXPECT_EQ(router->stats().credits_free, router->stats().credits);
}

// A QP and its CQ must share a device context: a router made on another opening is refused by
// name, before anything is created.
TEST_F(CompletionRouterTest, AQueuePairRefusesTheSharedQueueOfAnotherContext) {
  auto config = IbverbsConfig::from_env();
  ASSERT_TRUE(config.ok()) << config.error().to_string();
  auto other = RdmaDomain::open(*config);
  ASSERT_TRUE(other.ok()) << other.error().to_string();
  auto foreign = CompletionRouter::create((*other)->context(), 64);
  ASSERT_TRUE(foreign.ok()) << foreign.error().to_string();
  RdmaQueuePair::Options o;
  o.completions = *foreign;
  auto q = RdmaQueuePair::create(domain_, o);
  ASSERT_FALSE(q.ok());
  EXPECT_EQ(q.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(q.error().message().find("another opening of a device"), std::string::npos)
      << q.error().message();
  EXPECT_NE(q.error().message().find(domain_->device_name()), std::string::npos)
      << q.error().message();
  auto tiny = CompletionRouter::create(domain_->context(), 2);
  ASSERT_FALSE(tiny.ok());
  EXPECT_NE(tiny.error().message().find("not 2"), std::string::npos) << tiny.error().message();
}

}  // namespace
}  // namespace caf_rdma::testing
