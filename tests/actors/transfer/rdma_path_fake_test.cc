// RdmaPath (actors/transfer/rdma_path.h) on the fake transport (tests/actors/fake_nic.h) in the
// deterministic fixture: the manager's RDMA path with no device, where the test decides when each
// op completes, how, and when the clock moves. Transfers between two buffers of the manager take
// its loopback queue pair, a FakeQueuePair. Each case names the invariant it checks; the real
// path (ibverbs) is checked by rdma_path_test on the host's device and in the Soft-RoCE VM.
#include <gtest/gtest.h>

#include <memory>
#include <utility>
#include <vector>

#include "tests/actors/fake_nic.h"
#include "tests/actors/manager_logic.h"
#include "tests/fake_device_memory.h"

namespace caf_rdma::testing {
namespace {

using Mode = FakeNic::CompletionMode;

class RdmaPathOnFakeNic : public ManagerLogicTest {
protected:
  /// The manager on the fake NIC, RDMA only (no fallback: every op takes the RDMA path or fails).
  ManagerOptions options() {
    ManagerOptions o = fallback_options();
    o.mode = TransportMode::kRdma;
    o.open_nic = nic_->opener();
    o.drain_timeout = std::chrono::milliseconds(500);
    return o;
  }
  /// options() staging GPU memory `gpu` (which the fake NIC cannot register) through one
  /// bounce buffer of 2 * kChunk bytes: a chunk is a half, kChunk bytes.
  ManagerOptions staged_options(std::shared_ptr<FakeDeviceMemory> gpu) {
    ManagerOptions o = options();
    o.device_memory = std::move(gpu);
    o.staging_bytes = 2 * kChunk;
    o.staging_buffers = 1;
    return o;
  }
  /// The queue pair made last (the loopback QP), or a failed test.
  std::shared_ptr<FakeQueuePair> newest_qp() {
    auto qps = nic_->queue_pairs();
    if (qps.empty()) {
      ADD_FAILURE() << "the manager made no queue pair on the fake NIC";
      return nullptr;
    }
    return qps.back();
  }
  /// Moves the clock to the deadline of a 100 ms transfer on `qp`: not flushed a moment before,
  /// its deadline's timer the next to fire.
  void reach_deadline(const FakeQueuePair& qp) {
    advance(std::chrono::milliseconds(99));
    EXPECT_FALSE(qp.needs_recovery()) << "flushed before its deadline";
    ASSERT_TRUE(next_timeout()) << "no timer for the deadline";
  }
  /// `op` after `old` went into error: on a second queue pair, not `old`, where it completes
  /// when told and is answered as done (manager invariant 4).
  void again_on_a_new_queue_pair(const TransferOp& op, const std::shared_ptr<FakeQueuePair>& old) {
    auto again = transfer(op, 100);
    EXPECT_EQ(nic_->queue_pairs_made(), 2u);
    auto fresh = newest_qp();
    ASSERT_NE(fresh, old);
    EXPECT_EQ(fresh->complete_all(), 1u);
    run_jobs();
    auto ra = reply(again);
    ASSERT_NO_FATAL_FAILURE(expect_done(ra, op.length));
  }
  /// A reply that came and is a success, or a failed test naming what came instead.
  static void expect_done(std::optional<caf::expected<TransferReply>>& r, uint64_t bytes) {
    ASSERT_TRUE(r.has_value()) << "no reply";
    ASSERT_TRUE(*r) << error_message(r->error());
    EXPECT_EQ((*r)->path, kPathRdma);
    EXPECT_EQ((*r)->bytes, bytes);
  }

  std::shared_ptr<FakeNic> nic_ = FakeNic::make();
};

TEST_F(RdmaPathOnFakeNic, Inv1_ASmallSingleTransferIsPolledForOnTheManagersThread) {
  SCOPED_TRACE("RdmaPath invariant 1");
  nic_->set_completion(Mode::kOnProgress);
  ManagerOptions o = options();
  o.inline_poll = std::chrono::seconds(5);  // ends at the first poll that finds the completion
  ASSERT_NO_FATAL_FAILURE(start_manager(o));
  EXPECT_EQ(nic_->opens(), 1u);
  std::vector<uint8_t> a = patterned(4 * kChunk, 31), b(4 * kChunk, 0);
  BufferHandle ha = register_buffer(a);
  BufferHandle hb = register_buffer(b);
  ASSERT_EQ(ha.device, "fake0");
  const auto t0 = now();
  // At most kInlinePollMaxBytes, alone: the manager polls for it itself (the fake completes it
  // at a progress() on this thread, which is the manager's here) and its reply is in the
  // mailbox when the handler ends.
  auto w = transfer(make_write(ha, hb, kInlinePollMaxBytes, 0, 0), 1000);
  auto rw = reply(w);
  ASSERT_NO_FATAL_FAILURE(expect_done(rw, kInlinePollMaxBytes));
  auto qp = newest_qp();
  ASSERT_NE(qp, nullptr);
  const size_t polls = qp->progress_calls();
  EXPECT_GE(polls, 1u);
  EXPECT_TRUE(same_bytes(b, 0, a, 0, kInlinePollMaxBytes));
  EXPECT_TRUE(all_zero(b, kInlinePollMaxBytes, b.size() - kInlinePollMaxBytes));
  // Larger: left to the poller (here: to the test), no inline poll.
  auto big = transfer(make_read(hb, ha, 2 * kInlinePollMaxBytes, kChunk, kChunk), 1000);
  EXPECT_FALSE(reply(big).has_value()) << "replied before its completion";
  EXPECT_EQ(qp->progress_calls(), polls) << "a large transfer was polled for inline";
  EXPECT_EQ(qp->complete_all(), 1u);
  run_jobs();
  auto rbig = reply(big);
  ASSERT_NO_FATAL_FAILURE(expect_done(rbig, 2 * kInlinePollMaxBytes));
  EXPECT_TRUE(same_bytes(b, kChunk, a, kChunk, 2 * kInlinePollMaxBytes));
  // A batch of small ones: posted together, not polled for one by one.
  auto batch = ask<std::vector<TransferOutcome>>(
      manager(), batch_atom::value,
      std::vector<TransferOp>{make_write(ha, hb, 512, 3 * kChunk, 3 * kChunk),
                              make_write(ha, hb, 512, 3 * kChunk + 512, 3 * kChunk + 512)},
      uint32_t{1000});
  EXPECT_EQ(qp->progress_calls(), polls) << "a batch's op was polled for inline";
  EXPECT_EQ(qp->complete_all(), 2u);
  run_jobs();
  auto rb = reply(batch);
  ASSERT_TRUE(rb && *rb) << (rb ? error_message(rb->error()) : "no reply");
  ASSERT_EQ((*rb)->size(), 2u);
  for (const TransferOutcome& out : **rb)
    EXPECT_TRUE(out.ok()) << out.message;
  EXPECT_TRUE(same_bytes(b, 3 * kChunk, a, 3 * kChunk, 1024));
  EXPECT_TRUE(all_zero(b, 3 * kChunk + 1024, kChunk - 1024));
  EXPECT_EQ(now(), t0) << "the clock moved";
  EXPECT_EQ(nic_->queue_pairs_made(), 1u) << "one loopback queue pair for all";
  EXPECT_TRUE(quiet());
}

TEST_F(RdmaPathOnFakeNic, Inv6_AtTheDeadlineTheReplyWaitsForTheFlush) {
  SCOPED_TRACE("RdmaPath invariant 6 (manager invariant 5)");
  nic_->set_flush_on_abort(false);
  ASSERT_NO_FATAL_FAILURE(start_manager(options()));
  std::vector<uint8_t> a = patterned(2 * kChunk, 32), b(2 * kChunk, 0);
  BufferHandle ha = register_buffer(a);
  BufferHandle hb = register_buffer(b);
  auto w = transfer(make_write(ha, hb, 2 * kChunk, 0, 0), 100);
  auto qp = newest_qp();
  ASSERT_NE(qp, nullptr);
  EXPECT_EQ(qp->pending_ops(), 1u);
  ASSERT_NO_FATAL_FAILURE(reach_deadline(*qp));
  // Due: the queue pair is put in error (flushed), and the reply waits for the flush.
  EXPECT_TRUE(qp->needs_recovery()) << "the op's queue pair was not flushed at its deadline";
  EXPECT_FALSE(reply(w).has_value()) << "replied before the NIC let go of the op";
  EXPECT_EQ(qp->flush(), 1u);
  run_jobs();
  auto rw = reply(w);
  ASSERT_TRUE(rw.has_value()) << "no reply after the flush";
  EXPECT_RDMA_ERROR((*rw), ErrorCode::kTimeout, "100 ms");
  EXPECT_TRUE(all_zero(b, 0, b.size())) << "the fake moved bytes it was never told to";
  // The next op does not use the flushed queue pair: a new one (manager invariant 4).
  ASSERT_NO_FATAL_FAILURE(again_on_a_new_queue_pair(make_write(ha, hb, 2 * kChunk, 0, 0), qp));
  EXPECT_EQ(qp->pending_ops(), 0u);
  EXPECT_EQ(a, b);
  EXPECT_TRUE(quiet());
}

TEST_F(RdmaPathOnFakeNic,
       Inv6Inv8_AFlushThatOverrunsDestroysTheQueuePairAndALateCompletionIsIgnored) {
  SCOPED_TRACE("RdmaPath invariants 6 and 8");
  nic_->set_flush_on_abort(false);
  ASSERT_NO_FATAL_FAILURE(start_manager(options()));
  std::vector<uint8_t> a = patterned(2 * kChunk, 33), b(2 * kChunk, 0);
  BufferHandle ha = register_buffer(a);
  BufferHandle hb = register_buffer(b);
  auto w = transfer(make_read(hb, ha, 2 * kChunk, 0, 0), 100);
  auto qp = newest_qp();
  ASSERT_NE(qp, nullptr);
  ASSERT_NO_FATAL_FAILURE(reach_deadline(*qp));
  EXPECT_TRUE(qp->needs_recovery());
  EXPECT_FALSE(reply(w).has_value());
  // The flush never comes: at drain_timeout the queue pair is dropped, then the reply.
  advance(std::chrono::milliseconds(499));
  EXPECT_FALSE(reply(w).has_value()) << "replied before drain_timeout";
  ASSERT_TRUE(next_timeout()) << "no timer for the drain";
  auto rw = reply(w);
  ASSERT_TRUE(rw.has_value()) << "no reply once the flush overran drain_timeout";
  EXPECT_RDMA_ERROR((*rw), ErrorCode::kTimeout, "queue pair was destroyed");
  // The manager holds it no more (only this test and perhaps the poller's last sweep do).
  EXPECT_EQ(qp->pending_ops(), 1u);
  // Invariant 8: its completion, late, for an op that ended: ignored, no second reply.
  EXPECT_EQ(qp->flush(), 1u);
  run_jobs();
  EXPECT_TRUE(quiet()) << "a late completion made a second reply";
  EXPECT_TRUE(all_zero(b, 0, b.size()));
  // The next op makes a new queue pair and moves every byte.
  ASSERT_NO_FATAL_FAILURE(again_on_a_new_queue_pair(make_read(hb, ha, 2 * kChunk, 0, 0), qp));
  EXPECT_EQ(a, b);
  qp.reset();
  nic_->deliver_late();
  run_jobs();
  EXPECT_TRUE(quiet());
}

TEST_F(RdmaPathOnFakeNic, AnOpThatCompletedBeforeItsFlushIsAnsweredAsDoneNotAsATimeout) {
  SCOPED_TRACE("RdmaPath invariant 6: an answer says what happened");
  // The deadline came while the NIC was finishing the op: the flush found it complete. Its
  // bytes are in place, so the answer is success, never `timeout`.
  nic_->set_flush_on_abort(false);
  ASSERT_NO_FATAL_FAILURE(start_manager(options()));
  std::vector<uint8_t> a = patterned(2 * kChunk, 34), b(2 * kChunk, 0);
  BufferHandle ha = register_buffer(a);
  BufferHandle hb = register_buffer(b);
  auto w = transfer(make_write(ha, hb, 2 * kChunk, 0, 0), 100);
  auto qp = newest_qp();
  ASSERT_NE(qp, nullptr);
  ASSERT_NO_FATAL_FAILURE(reach_deadline(*qp));
  EXPECT_TRUE(qp->needs_recovery());
  EXPECT_FALSE(reply(w).has_value());
  EXPECT_TRUE(qp->complete_next());
  run_jobs();
  auto rw = reply(w);
  ASSERT_NO_FATAL_FAILURE(expect_done(rw, 2 * kChunk));
  EXPECT_EQ(a, b);
  EXPECT_TRUE(quiet());
}

TEST_F(RdmaPathOnFakeNic, Inv5_AnOpFlushedByAnotherOpsErrorRunsOnceMoreOnANewQueuePair) {
  SCOPED_TRACE("RdmaPath invariant 5");
  ASSERT_NO_FATAL_FAILURE(start_manager(options()));
  std::vector<uint8_t> a = patterned(4 * kChunk, 35), b(4 * kChunk, 0);
  BufferHandle ha = register_buffer(a);
  BufferHandle hb = register_buffer(b);
  auto first = transfer(make_write(ha, hb, 2 * kChunk, 0, 0), 1000);
  auto second = transfer(make_write(ha, hb, 2 * kChunk, 2 * kChunk, 2 * kChunk), 1000);
  auto qp = newest_qp();
  ASSERT_NE(qp, nullptr);
  EXPECT_EQ(qp->pending_ops(), 2u);
  // The first fails at the NIC (not an access the owner refused): the QP enters error and the
  // second is flushed, through no fault of its own.
  ASSERT_TRUE(qp->fail_next(OpFault::kOther, "transport retry counter exceeded"));
  run_jobs();
  auto r1 = reply(first);
  ASSERT_TRUE(r1.has_value());
  EXPECT_RDMA_ERROR((*r1), ErrorCode::kWorkCompletion, "transport retry counter exceeded");
  EXPECT_FALSE(reply(second).has_value()) << "the flushed op failed instead of running again";
  EXPECT_EQ(nic_->queue_pairs_made(), 2u);
  auto fresh = newest_qp();
  ASSERT_NE(fresh, qp);
  EXPECT_EQ(fresh->pending_ops(), 1u);
  EXPECT_EQ(fresh->complete_all(), 1u);
  run_jobs();
  auto r2 = reply(second);
  ASSERT_NO_FATAL_FAILURE(expect_done(r2, 2 * kChunk));
  EXPECT_TRUE(all_zero(b, 0, 2 * kChunk)) << "the failed op's bytes moved";
  EXPECT_TRUE(same_bytes(b, 2 * kChunk, a, 2 * kChunk, 2 * kChunk));
  EXPECT_TRUE(quiet());
}

TEST_F(RdmaPathOnFakeNic,
       StagedPath_GpuMemoryTheNicCannotRegisterMovesChunkByChunkThroughBounceBuffers) {
  SCOPED_TRACE("StagedPath invariants 1-3 (manager invariant 9)");
  // GPU memory the (fake) NIC cannot register: each chunk is copied out of the GPU into a
  // bounce buffer and the NIC moves it from there (a write), or lands there and is copied in
  // (a read). The chunks reach the NIC one by one, as the test completes them.
  auto gpu = std::make_shared<FakeDeviceMemory>(/*direct=*/false);
  ASSERT_NO_FATAL_FAILURE(start_manager(staged_options(gpu)));
  std::vector<uint8_t> g = patterned(6 * kChunk, 36), host(6 * kChunk, 0);
  gpu->add_gpu_range(g.data(), g.size());
  BufferHandle hg = register_buffer(g);
  BufferHandle hh = register_buffer(host);
  ASSERT_NE(hg.id, 0u);
  EXPECT_EQ(hg.memory, static_cast<uint8_t>(BufferMemory::kGpuStaged));
  auto w = transfer(make_write(hg, hh, 6 * kChunk, 0, 0), 1000);
  auto qp = newest_qp();
  ASSERT_NE(qp, nullptr);
  size_t chunks = 0;
  std::optional<caf::expected<TransferReply>> rw;
  for (int i = 0; i < 64 && !rw; ++i) {
    EXPECT_LE(qp->pending_ops(), 2u) << "more chunks on the NIC than halves of the bounce buffer";
    chunks += qp->complete_all();
    run_jobs();
    rw = reply(w);
  }
  ASSERT_TRUE(rw.has_value()) << "the staged write never ended";
  ASSERT_TRUE(*rw) << error_message(rw->error());
  EXPECT_EQ((*rw)->path, kPathRdmaStaged);
  EXPECT_EQ(chunks, 6u) << "not one chunk per kChunk bytes";
  EXPECT_EQ(host, g);
  EXPECT_EQ(gpu->to_host_bytes.load(), 6 * kChunk) << "the GPU copies did not happen";
  // Back: the host bytes (changed) read into the GPU memory, chunk by chunk.
  for (size_t i = 0; i < host.size(); ++i)
    host[i] = det_pattern(i, 37);
  auto r = transfer(make_read(hg, hh, 6 * kChunk, 0, 0), 1000);
  std::optional<caf::expected<TransferReply>> rr;
  for (int i = 0; i < 64 && !rr; ++i) {
    qp->complete_all();
    run_jobs();
    rr = reply(r);
  }
  ASSERT_TRUE(rr.has_value()) << "the staged read never ended";
  ASSERT_TRUE(*rr) << error_message(rr->error());
  EXPECT_EQ((*rr)->path, kPathRdmaStaged);
  EXPECT_EQ(g, host);
  EXPECT_EQ(gpu->to_device_bytes.load(), 6 * kChunk);
  EXPECT_TRUE(quiet());
}

TEST_F(RdmaPathOnFakeNic, StagedPath_SmallOpsOfABatchGatherIntoSharedBounceBuffers) {
  SCOPED_TRACE("StagedPath invariants 2, 4 and 5");
  // One bounce buffer of 2 * kChunk bytes: 8 pieces of 1000 bytes (1024 each, aligned). A batch
  // of 12 small GPU writes puts 8 on the NIC at once from that one buffer; the other 4 wait
  // until every piece's chunk is back (none is cut twice), then go. Then a big read takes the
  // whole buffer while small reads wait behind it.
  auto gpu = std::make_shared<FakeDeviceMemory>(/*direct=*/false);
  ASSERT_NO_FATAL_FAILURE(start_manager(staged_options(gpu)));
  constexpr uint64_t kOps = 12, kSmall = 1000, kPerBuffer = 8;
  std::vector<uint8_t> g = patterned(kOps * kSmall + 3 * kChunk, 41);
  std::vector<uint8_t> host(kOps * kSmall + 3 * kChunk, 0);
  gpu->add_gpu_range(g.data(), g.size());
  BufferHandle hg = register_buffer(g);
  BufferHandle hh = register_buffer(host);
  ASSERT_EQ(hg.memory, static_cast<uint8_t>(BufferMemory::kGpuStaged));
  // Op i: GPU range i to host range kOps - 1 - i (so a piece's place is not the range's).
  std::vector<TransferOp> writes;
  for (uint64_t i = 0; i < kOps; ++i)
    writes.push_back(make_write(hg, hh, kSmall, i * kSmall, (kOps - 1 - i) * kSmall));
  auto w = ask<std::vector<TransferOutcome>>(manager(), batch_atom::value, writes, uint32_t{1000});
  run_jobs();
  auto qp = newest_qp();
  ASSERT_NE(qp, nullptr);
  EXPECT_EQ(qp->pending_ops(), kPerBuffer) << "the batch's small ops did not share the buffer";
  for (uint64_t i = 0; i + 1 < kPerBuffer; ++i)
    ASSERT_TRUE(qp->complete_next());
  run_jobs();
  EXPECT_EQ(qp->pending_ops(), 1u) << "a piece was cut again while a chunk was on the NIC";
  EXPECT_FALSE(reply(w).has_value());
  ASSERT_TRUE(qp->complete_next());  // the buffer's last chunk: the waiters take pieces
  run_jobs();
  EXPECT_EQ(qp->pending_ops(), kOps - kPerBuffer);
  EXPECT_EQ(qp->complete_all(), kOps - kPerBuffer);
  run_jobs();
  auto rw = reply(w);
  ASSERT_TRUE(rw && *rw) << (rw ? error_message(rw->error()) : "no reply");
  ASSERT_EQ((*rw)->size(), kOps);
  for (const TransferOutcome& out : **rw)
    EXPECT_TRUE(out.ok()) << out.message;
  for (uint64_t i = 0; i < kOps; ++i)
    EXPECT_TRUE(same_bytes(host, (kOps - 1 - i) * kSmall, g, i * kSmall, kSmall)) << "op " << i;
  EXPECT_TRUE(all_zero(host, kOps * kSmall, 3 * kChunk));
  EXPECT_EQ(gpu->to_host_bytes.load(), kOps * kSmall);
  // Back into the GPU: a read longer than a chunk holds the buffer (both halves); three small
  // reads queued behind it get pieces once it is done.
  for (size_t i = 0; i < host.size(); ++i)
    host[i] = det_pattern(i, 42);
  std::vector<TransferOp> reads{make_read(hg, hh, 3 * kChunk, kOps * kSmall, kOps * kSmall)};
  for (uint64_t i = 0; i < 3; ++i)
    reads.push_back(make_read(hg, hh, kSmall, i * kSmall, (5 + i) * kSmall));
  auto r = ask<std::vector<TransferOutcome>>(manager(), batch_atom::value, reads, uint32_t{1000});
  run_jobs();
  EXPECT_EQ(qp->pending_ops(), 2u) << "the big read's two halves, and nothing else";
  std::optional<caf::expected<std::vector<TransferOutcome>>> rr;
  for (int i = 0; i < 16 && !rr; ++i) {
    qp->complete_all();
    run_jobs();
    rr = reply(r);
  }
  ASSERT_TRUE(rr && *rr) << (rr ? error_message(rr->error()) : "no reply");
  for (const TransferOutcome& out : **rr)
    EXPECT_TRUE(out.ok()) << out.message;
  EXPECT_TRUE(same_bytes(g, kOps * kSmall, host, kOps * kSmall, 3 * kChunk));
  for (uint64_t i = 0; i < 3; ++i)
    EXPECT_TRUE(same_bytes(g, i * kSmall, host, (5 + i) * kSmall, kSmall)) << "read " << i;
  auto st = ask<ManagerStats>(manager(), stats_atom::value);
  auto stats = reply(st);
  ASSERT_TRUE(stats && *stats);
  EXPECT_EQ((*stats)->staged_pieces, kOps + 3);
  EXPECT_TRUE(quiet());
}

TEST_F(RdmaPathOnFakeNic, StagedPath_ASmallOpPassesALargeWaiterOnlyWithRoomTheWaiterCannotUse) {
  SCOPED_TRACE("StagedPath invariants 4 and 5");
  // One bounce buffer: a small write takes a piece of it; a large write (a whole buffer) then
  // waits; a small write after it queues behind it and takes the room the large one cannot
  // use. The large one gets the buffer once both small ones are done with it.
  auto gpu = std::make_shared<FakeDeviceMemory>(/*direct=*/false);
  ASSERT_NO_FATAL_FAILURE(start_manager(staged_options(gpu)));
  std::vector<uint8_t> g = patterned(6 * kChunk, 43), host(6 * kChunk, 0);
  gpu->add_gpu_range(g.data(), g.size());
  BufferHandle hg = register_buffer(g);
  BufferHandle hh = register_buffer(host);
  const std::vector<TransferOp> ops{make_write(hg, hh, 1000, 0, 5 * kChunk),
                                    make_write(hg, hh, 3 * kChunk, kChunk, 0),
                                    make_write(hg, hh, 1000, 5 * kChunk, 4 * kChunk)};
  auto w = ask<std::vector<TransferOutcome>>(manager(), batch_atom::value, ops, uint32_t{1000});
  run_jobs();
  auto qp = newest_qp();
  ASSERT_NE(qp, nullptr);
  EXPECT_EQ(qp->pending_ops(), 2u) << "the two small writes, and not the large one";
  EXPECT_EQ(qp->complete_all(), 2u);
  run_jobs();
  EXPECT_EQ(qp->pending_ops(), 2u) << "the large write's two halves, once the buffer was free";
  std::optional<caf::expected<std::vector<TransferOutcome>>> r;
  for (int i = 0; i < 8 && !r; ++i) {
    qp->complete_all();
    run_jobs();
    r = reply(w);
  }
  ASSERT_TRUE(r && *r) << (r ? error_message(r->error()) : "no reply");
  for (const TransferOutcome& out : **r)
    EXPECT_TRUE(out.ok()) << out.message;
  EXPECT_TRUE(same_bytes(host, 5 * kChunk, g, 0, 1000));
  EXPECT_TRUE(same_bytes(host, 0, g, kChunk, 3 * kChunk));
  EXPECT_TRUE(same_bytes(host, 4 * kChunk, g, 5 * kChunk, 1000));
  EXPECT_TRUE(all_zero(host, 3 * kChunk, kChunk));
  EXPECT_TRUE(all_zero(host, 4 * kChunk + 1000, kChunk - 1000));
  EXPECT_TRUE(all_zero(host, 5 * kChunk + 1000, kChunk - 1000));
  EXPECT_TRUE(quiet());
}

}  // namespace
}  // namespace caf_rdma::testing
