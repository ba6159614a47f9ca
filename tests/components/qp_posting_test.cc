// QpPosting (components/qp_posting.h) on a real device: splitting, flow control, selective
// signaling, inline data, chains, SEND/RECV and atomics. Test names refer to the invariants in
// components/rdma_queue_pair.h unless they say otherwise.
#include "components/qp_posting.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

#include "tests/components/queue_pair_fixture.h"

namespace caf_rdma::testing {
namespace {

class QpPostingTest : public QueuePairTest {};

// Invariant 3: a transfer larger than the (forced small) maximum message size is split, and
// more work requests than max_send_wr are queued in software and all complete.
TEST_P(QpPostingTest, SplitTransferNeedsMoreRequestsThanTheSendQueueHolds) {
  RdmaQueuePair::Options options;
  options.max_message_bytes = 16 << 10;
  auto x = make_qp(options);
  auto y = make_qp(options);
  ASSERT_TRUE(RdmaQueuePair::connect_pair(*x, *y).ok());
  const uint64_t size = 32 << 20;  // 2048 requests of 16 KiB, max_send_wr is 512
  Registered src = make(size, 3);
  Registered dst = make(size, 0);
  OpResult w = x->execute(RdmaOp::write({src.buffer, 0, size}, dst.buffer.remote()), kTimeout);
  ASSERT_TRUE(w.status.ok()) << w.status.error().to_string();
  expect_same(src, dst, size);
  auto stats = x->stats();
  EXPECT_GE(stats.work_requests, size / (16 << 10));
  EXPECT_LT(stats.signaled, stats.work_requests / 2) << "selective signaling";
  EXPECT_EQ(x->outstanding_work_requests(), 0u);
}

TEST_P(QpPostingTest, ThousandsOfAsyncOpsCompleteExactlyOnce) {
  constexpr int kOps = 3000;  // > max_send_wr (512)
  Registered src = make(uint64_t{kOps} * 64, 9);
  Registered dst = make(uint64_t{kOps} * 64, 0);
  std::vector<std::atomic<int>> calls(kOps);
  std::atomic<int> failures{0};
  for (int i = 0; i < kOps; ++i) {
    Status st = a_->submit(
        RdmaOp::write({src.buffer, uint64_t(i) * 64, 64}, dst.buffer.remote(), uint64_t(i) * 64),
        [&, i](const OpResult& r) {
          calls[i]++;
          if (!r.status.ok())
            failures++;
        });
    ASSERT_TRUE(st.ok()) << st.error().to_string();
  }
  auto deadline = std::chrono::steady_clock::now() + kTimeout;
  auto all_done = [&] {
    for (auto& c : calls)
      if (c.load() == 0)
        return false;
    return true;
  };
  while (!all_done() && std::chrono::steady_clock::now() < deadline)
    a_->progress();
  ASSERT_TRUE(all_done()) << "not every op completed within the timeout";
  for (int i = 0; i < kOps; ++i)
    EXPECT_EQ(calls[i].load(), 1) << "op " << i;
  EXPECT_EQ(failures.load(), 0);
  expect_same(src, dst, uint64_t{kOps} * 64);
  EXPECT_LT(a_->stats().signaled, uint64_t(kOps)) << "batched posts signal once per chain";
}

// Invariant 7: the CQ holds a completion for every work request the QP may have outstanding,
// even when IbverbsConfig::cq_entries asks for fewer and the device grants more work requests
// than asked (rxe: 64 -> 127). Every request is signaled here, so each makes a completion; an
// overflowing CQ would lose them (the ops would time out) and error the QP.
TEST_P(QpPostingTest, CompletionQueueHoldsEveryRequestTheQueuesTake) {
  auto config = IbverbsConfig::from_env();
  ASSERT_TRUE(config.ok()) << config.error().to_string();
  config->cq_entries = 8;
  config->max_send_wr = 64;
  config->max_recv_wr = 64;
  auto small = RdmaDomain::open(*config);
  ASSERT_TRUE(small.ok()) << small.error().to_string();
  RdmaQueuePair::Options every;
  every.signal_interval = 1;
  auto x = make_qp(every, *small);
  auto y = make_qp(every, *small);
  ASSERT_TRUE(x && y);
  ASSERT_TRUE(RdmaQueuePair::connect_pair(*x, *y).ok());
  const RdmaQueuePair::Limits limits = x->limits();
  EXPECT_GE(limits.send, 64u);
  EXPECT_GE(uint64_t(limits.completion_entries), uint64_t{limits.send} + limits.receive)
      << "CQ of " << limits.completion_entries << " entries for " << limits.send << " sends and "
      << limits.receive << " receives";
  const uint32_t ops = limits.send;
  Registered src = make(uint64_t{ops} * 100, 23, Access::kReadWrite, *small);
  Registered dst = make(uint64_t{ops} * 100, 0, Access::kReadWrite, *small);
  std::vector<RdmaOp> batch;
  for (uint32_t i = 0; i < ops; ++i)
    batch.push_back(RdmaOp::write({src.buffer, uint64_t{i} * 100, 100}, dst.buffer.remote(),
                                  uint64_t{i} * 100));
  std::vector<OpResult> results = x->execute_batch(std::move(batch), kTimeout);
  ASSERT_EQ(results.size(), ops);
  for (uint32_t i = 0; i < ops; ++i)
    ASSERT_TRUE(results[i].status.ok())
        << "op " << i << ": " << results[i].status.error().to_string();
  expect_same(src, dst, uint64_t{ops} * 100);
  EXPECT_EQ(x->stats().signaled, ops) << "every request signaled";
  EXPECT_FALSE(x->needs_recovery());
}

// Invariant 8: WRITEs up to the granted inline size go inside the work request, larger ones by
// DMA; both arrive whole, and nothing beyond them is touched.
TEST_P(QpPostingTest, SmallWritesGoInline) {
  const uint32_t limit = a_->limits().inline_bytes;
  ASSERT_GE(limit, domain_->config().max_inline_data)
      << "the device granted less inline data than IbverbsConfig::max_inline_data";
  Registered src = make(limit + 1, 31);
  Registered dst = make(limit + 1, 0);
  uint64_t before = a_->stats().inline_requests;
  for (uint64_t size : {uint64_t{1}, uint64_t{17}, uint64_t{limit}}) {
    SCOPED_TRACE("size " + std::to_string(size));
    std::memset(dst.bytes.get(), 0, limit + 1);
    OpResult w = a_->execute(RdmaOp::write({src.buffer, 0, size}, dst.buffer.remote()), kTimeout);
    ASSERT_TRUE(w.status.ok()) << w.status.error().to_string();
    EXPECT_EQ(std::memcmp(src.bytes.get(), dst.bytes.get(), size), 0);
    for (uint64_t i = size; i < limit + 1; ++i)
      ASSERT_EQ(dst.bytes[i], 0) << "byte " << i << " beyond the write changed";
  }
  EXPECT_EQ(a_->stats().inline_requests - before, 3u);
  OpResult big = a_->execute(
      RdmaOp::write({src.buffer, 0, uint64_t{limit} + 1}, dst.buffer.remote()), kTimeout);
  ASSERT_TRUE(big.status.ok()) << big.status.error().to_string();
  expect_same(src, dst, uint64_t{limit} + 1);
  EXPECT_EQ(a_->stats().inline_requests - before, 3u) << "one byte over the limit goes by DMA";
}

TEST_P(QpPostingTest, QueuedOpsWaitForPostQueuedAndGoAsOneChain) {
  constexpr int kOps = 40;
  Registered src = make(uint64_t{kOps} * 4096, 13);
  Registered dst = make(uint64_t{kOps} * 4096, 0);
  std::atomic<int> ok{0}, failed{0};
  for (int i = 0; i < kOps; ++i) {
    Status st = a_->submit_queued(RdmaOp::write({src.buffer, uint64_t(i) * 4096, 4096},
                                                dst.buffer.remote(), uint64_t(i) * 4096),
                                  [&](const OpResult& r) { (r.status.ok() ? ok : failed)++; });
    ASSERT_TRUE(st.ok()) << st.error().to_string();
  }
  auto before = a_->stats();
  EXPECT_EQ(a_->outstanding_work_requests(), 0u) << "queued ops are not posted yet";
  a_->post_queued();
  auto after = a_->stats();
  EXPECT_EQ(after.work_requests - before.work_requests, uint64_t(kOps));
  EXPECT_EQ(after.signaled - before.signaled, 1u) << "one chain, one signaled request";
  auto deadline = std::chrono::steady_clock::now() + kTimeout;
  while (ok + failed < kOps && std::chrono::steady_clock::now() < deadline)
    a_->progress();
  EXPECT_EQ(ok.load(), kOps);
  EXPECT_EQ(failed.load(), 0);
  expect_same(src, dst, uint64_t{kOps} * 4096);
}

TEST_P(QpPostingTest, AtomicsFetchAddAndCompareSwap) {
  Registered word = make(64, 0);
  uint64_t* value = reinterpret_cast<uint64_t*>(word.bytes.get() + 8);
  *value = 40;
  OpResult fa = a_->execute(RdmaOp::fetch_add(word.buffer.remote(), 8, 2), kTimeout);
  ASSERT_TRUE(fa.status.ok()) << fa.status.error().to_string();
  EXPECT_EQ(fa.atomic_value, 40u);
  EXPECT_EQ(*value, 42u);
  OpResult miss = a_->execute(RdmaOp::compare_swap(word.buffer.remote(), 8, 7, 100), kTimeout);
  ASSERT_TRUE(miss.status.ok());
  EXPECT_EQ(miss.atomic_value, 42u);
  EXPECT_EQ(*value, 42u) << "compare failed, no swap";
  OpResult hit = a_->execute(RdmaOp::compare_swap(word.buffer.remote(), 8, 42, 100), kTimeout);
  ASSERT_TRUE(hit.status.ok());
  EXPECT_EQ(hit.atomic_value, 42u);
  EXPECT_EQ(*value, 100u);
  // Concurrent fetch-adds from both QPs: no lost update.
  std::vector<std::thread> threads;
  for (RdmaQueuePair* q : {a_.get(), b_.get()})
    threads.emplace_back([q, &word] {
      for (int i = 0; i < 200; ++i)
        (void)q->execute(RdmaOp::fetch_add(word.buffer.remote(), 8, 1), kTimeout);
    });
  for (auto& t : threads)
    t.join();
  EXPECT_EQ(*value, 500u);
}

TEST_P(QpPostingTest, SendAndReceive) {
  Registered msg = make(3000, 4);
  Registered inbox = make(4096, 0);
  std::atomic<bool> got{false};
  OpResult received;
  ASSERT_TRUE(b_->submit(RdmaOp::recv({inbox.buffer, 0, 4096}), [&](OpResult r) {
                  received = std::move(r);
                  got = true;
                }).ok());
  OpResult s = a_->execute(RdmaOp::send({msg.buffer, 0, 3000}), kTimeout);
  ASSERT_TRUE(s.status.ok()) << s.status.error().to_string();
  auto deadline = std::chrono::steady_clock::now() + kTimeout;
  while (!got && std::chrono::steady_clock::now() < deadline)
    b_->progress();
  ASSERT_TRUE(got);
  ASSERT_TRUE(received.status.ok()) << received.status.error().to_string();
  EXPECT_EQ(received.bytes, 3000u);
  expect_same(msg, inbox, 3000);
}

// RdmaOp::with_imm: a write's last request carries the immediate; the peer's posted receive
// completes with it, and with the write's length, only once its bytes are in place; a zero-byte
// write with immediate touches no byte. (Owner-attested write notices rest on this.)
TEST_P(QpPostingTest, WriteWithImmediateCompletesThePeersReceiveAfterItsBytes) {
  const uint64_t kBig = 3 * 1024 * 1024 + 17;
  Registered src = make(kBig, 9);
  Registered dst = make(kBig + 64, 0);
  Registered sink = make(64, 0);
  struct Got {
    std::atomic<bool> done{false};
    OpResult result;
  };
  auto post_receive = [&](Got& g) {
    return b_->submit(RdmaOp::recv({sink.buffer, 0, 64}), [&g](OpResult r) {
      g.result = std::move(r);
      g.done = true;
    });
  };
  auto wait = [&](Got& g) {
    auto deadline = std::chrono::steady_clock::now() + kTimeout;
    while (!g.done && std::chrono::steady_clock::now() < deadline)
      b_->progress();
    return g.done.load();
  };
  Got first, second;
  ASSERT_TRUE(post_receive(first).ok());
  ASSERT_TRUE(post_receive(second).ok());
  RdmaOp w = RdmaOp::write({src.buffer, 0, kBig}, dst.buffer.remote(), 0);
  w.with_imm = true;
  w.imm = 0xC0FFEE01u;
  OpResult s = a_->execute(std::move(w), kTimeout);
  ASSERT_TRUE(s.status.ok()) << s.status.error().to_string();
  ASSERT_TRUE(wait(first));
  ASSERT_TRUE(first.result.status.ok()) << first.result.status.error().to_string();
  EXPECT_TRUE(first.result.with_imm);
  EXPECT_EQ(first.result.imm, 0xC0FFEE01u);
  EXPECT_GT(first.result.bytes, 0u);  // the last request's length
  EXPECT_LE(first.result.bytes, kBig);
  expect_same(src, dst, kBig);
  // Zero bytes: the immediate alone; nothing of the destination changes.
  std::vector<uint8_t> before(dst.bytes.get(), dst.bytes.get() + kBig + 64);
  OpResult z = a_->execute(RdmaOp::write_imm(dst.buffer.remote(), kBig, 0xFFFFFFFFu), kTimeout);
  ASSERT_TRUE(z.status.ok()) << z.status.error().to_string();
  ASSERT_TRUE(wait(second));
  ASSERT_TRUE(second.result.status.ok()) << second.result.status.error().to_string();
  EXPECT_TRUE(second.result.with_imm);
  EXPECT_EQ(second.result.imm, 0xFFFFFFFFu);
  EXPECT_EQ(second.result.bytes, 0u);
  EXPECT_TRUE(std::equal(before.begin(), before.end(), dst.bytes.get()));
  // A plain SEND completes a receive without an immediate.
  Got third;
  ASSERT_TRUE(post_receive(third).ok());
  ASSERT_TRUE(a_->execute(RdmaOp::send({src.buffer, 0, 8}), kTimeout).status.ok());
  ASSERT_TRUE(wait(third));
  EXPECT_FALSE(third.result.with_imm);
  EXPECT_EQ(third.result.bytes, 8u);
  // Only a write carries one.
  RdmaOp bad = RdmaOp::read({dst.buffer, 0, 8}, src.buffer.remote(), 0);
  bad.with_imm = true;
  Status refused = a_->submit(std::move(bad), [](OpResult) {});
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message().find("cannot carry an immediate"), std::string::npos);
}

// RdmaQueuePair invariant 11 (AtomicScratch invariant 1): a queue pair registers the words for
// atomics' results with its first atomic, once, and not before.
TEST_P(QpPostingTest, AtomicScratchIsRegisteredWithTheFirstAtomic) {
  auto registered = [this] {
    RegistrationStats s = domain_->registration_stats();
    return s.registrations + s.cache_hits;
  };
  Registered word = make(64, 0);
  const uint64_t before = registered();
  auto x = make_qp();
  auto y = make_qp();
  ASSERT_TRUE(x && y);
  ASSERT_TRUE(RdmaQueuePair::connect_pair(*x, *y).ok());
  Registered zeros = make(64, 0);
  const uint64_t with_buffer = registered();
  EXPECT_EQ(with_buffer, before + 1) << "only the test's buffer: the new QPs registered nothing";
  OpResult w = x->execute(RdmaOp::write({zeros.buffer, 0, 64}, word.buffer.remote()), kTimeout);
  ASSERT_TRUE(w.status.ok()) << w.status.error().to_string();
  EXPECT_EQ(registered(), with_buffer) << "a write needs no atomic scratch";
  for (int i = 0; i < 3; ++i) {
    OpResult fa = x->execute(RdmaOp::fetch_add(word.buffer.remote(), 0, 1), kTimeout);
    ASSERT_TRUE(fa.status.ok()) << fa.status.error().to_string();
    EXPECT_EQ(fa.atomic_value, uint64_t(i));
  }
  EXPECT_EQ(registered(), with_buffer + 1) << "one registration, with the first atomic";
}

QUEUE_PAIR_TEST_SUITE(QpPostingTest);

}  // namespace
}  // namespace caf_rdma::testing
