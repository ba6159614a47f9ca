// CancelToken (actors/cancel_token.h) with RdmaClient's read, write and post between two nodes,
// on each transport: a token cancelled first makes its transfer answer `cancelled` and move
// nothing (invariant 3); a token serves one transfer (invariant 1); a cancel from another thread
// while the transfer runs answers what the transfer answered (invariant 2: kCancelled with the
// transfer's `cancelled`, or kFinished with its own result), and after a kCancelled answer no
// byte of the destination changes (watched for a second); what a cancelled list says landed is
// in place, byte for byte. Over RDMA the op runs on the client's direct lane and stops mid-way
// (its queue pair flushed); on the fallback the stream lane's connection is shut down, over TCP
// or the owner's same-host endpoint (its cross-memory copy ended), and the owner heard ending
// its side before the answer (components/stream_client.h invariant 8).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <future>
#include <numeric>
#include <random>
#include <thread>
#include <vector>

#include "actors/cancel_token.h"
#include "actors/rdma_client.h"
#include "tests/actors/cancel_checks.h"
#include "tests/actors/two_node_test.h"

namespace caf_rdma::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using State = CancelResult::State;

class CancelTest : public TwoNodeTest {};

TEST_F(CancelTest, ATokenCancelledFirstMovesNothing) {
  RdmaClient me(user_->node().system(), user_->manager());
  Memory theirs(1 << 20, 3);
  BufferHandle remote = remote_view(*owner_, *user_, theirs, "cancel-first");
  Memory mine(1 << 20, 0);
  auto local = me.register_buffer(mine.bytes.data(), mine.bytes.size());
  ASSERT_TRUE(local.ok()) << local.error().to_string();
  // Warm: lanes and endpoints known, so that nothing but the token decides.
  ASSERT_TRUE(me.read(local->handle(), remote, Range::of(8)).ok());
  mine.bytes.assign(mine.bytes.size(), 0);

  CancelToken read_token;
  CancelResult early = read_token.cancel();
  EXPECT_EQ(early.state, State::kNotStarted) << early.to_string();
  auto r = me.read(local->handle(), remote, Range::whole(), seconds(30), read_token);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), ErrorCode::kCancelled) << r.error().to_string();
  EXPECT_NE(r.error().message().find("before it started"), std::string::npos)
      << r.error().to_string();
  CancelResult after = read_token.cancel();
  EXPECT_EQ(after.state, State::kCancelled) << after.to_string();
  EXPECT_EQ(after.bytes, 0u);

  CancelToken write_token;
  (void)write_token.cancel();
  auto w = me.write(local->handle(), remote, Range::whole(), seconds(30), write_token);
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.error().code(), ErrorCode::kCancelled) << w.error().to_string();

  std::vector<ListRange> ranges(64);
  for (uint64_t i = 0; i < ranges.size(); ++i)
    ranges[i] = ListRange{i * 4096, (63 - i) * 4096, 4096};
  auto plan = me.prepare(TransferKind::kRead, local->handle(), remote, ranges);
  ASSERT_TRUE(plan.ok()) << plan.error().to_string();
  CancelToken list_token;
  (void)list_token.cancel();
  ListOutcome out = me.post(*plan, seconds(30), list_token);
  EXPECT_EQ(out.code, static_cast<uint8_t>(ErrorCode::kCancelled)) << out.message;
  EXPECT_EQ(out.landed, 0u);
  EXPECT_EQ(out.bytes, 0u);
  EXPECT_NE(out.message.find("cancelled after 0 ranges had landed"), std::string::npos)
      << out.message;

  for (uint64_t i = 0; i < mine.bytes.size(); ++i)
    ASSERT_EQ(mine.bytes[i], 0) << "local byte " << i << " moved";
  for (uint64_t i = 0; i < theirs.bytes.size(); ++i)
    ASSERT_EQ(theirs.bytes[i], pattern(i, 3)) << "remote byte " << i << " moved";
}

TEST_F(CancelTest, ATokenServesOneTransfer) {
  RdmaClient me(user_->node().system(), user_->manager());
  Memory theirs(64 << 10, 5);
  BufferHandle remote = remote_view(*owner_, *user_, theirs, "cancel-once");
  Memory mine(64 << 10, 0);
  auto local = me.register_buffer(mine.bytes.data(), mine.bytes.size());
  ASSERT_TRUE(local.ok()) << local.error().to_string();
  CancelToken token;
  CancelToken copy = token;  // copies share the transfer
  auto first = me.read(local->handle(), remote, Range::whole(), seconds(30), token);
  ASSERT_TRUE(first.ok()) << first.error().to_string();
  EXPECT_TRUE(holds_pattern(mine, 0, mine.bytes.size(), 5, 0));
  mine.bytes.assign(mine.bytes.size(), 0);
  auto again = me.read(local->handle(), remote, Range::whole(), seconds(30), copy);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.error().code(), ErrorCode::kInvalidArgument) << again.error().to_string();
  for (uint64_t i = 0; i < mine.bytes.size(); ++i)
    ASSERT_EQ(mine.bytes[i], 0) << "local byte " << i << " moved by a refused transfer";
  // A cancel after the end: the transfer's own answer, nothing done.
  CancelResult late = copy.cancel();
  EXPECT_EQ(late.state, State::kFinished) << late.to_string();
  EXPECT_TRUE(late.status.ok());
  EXPECT_EQ(late.bytes, mine.bytes.size());
  EXPECT_TRUE(copy.cancel_requested());
}

// A cancel from another thread as the transfer starts: whatever it found, it agrees with the
// transfer's answer; a kCancelled one is followed by no change at the destination.
TEST_F(CancelTest, ACancelWhileItRunsAgreesWithTheTransfer) {
  RdmaClient me(user_->node().system(), user_->manager());
  // Under stripe_min_bytes (4 MiB): the op is the client's direct lane's, not the manager's.
  const uint64_t n = 3 << 20;
  int stopped_mid_way = 0;
  Memory theirs(n, 7);
  BufferHandle remote = remote_view(*owner_, *user_, theirs, "cancel-running");
  Memory mine(n, 0);
  auto local = me.register_buffer(mine.bytes.data(), mine.bytes.size());
  ASSERT_TRUE(local.ok()) << local.error().to_string();
  ASSERT_TRUE(me.read(local->handle(), remote, Range::of(8)).ok());  // warm
  for (bool push : {false, true}) {
    SCOPED_TRACE(push ? "write" : "read");
    Memory& dest = push ? theirs : mine;
    Memory& src = push ? mine : theirs;
    for (uint64_t i = 0; i < n; ++i) {
      src.bytes[i] = pattern(i, push ? 9 : 7);
      dest.bytes[i] = 0;
    }
    CancelToken token;
    std::promise<void> started;
    std::atomic<bool> done{false};
    Result<TransferReply> got = Error(ErrorCode::kInternal, "not run");
    std::thread mover([&] {
      started.set_value();
      got = push ? me.write(local->handle(), remote, Range::whole(), seconds(60), token)
                 : me.read(local->handle(), remote, Range::whole(), seconds(60), token);
      done.store(true);
    });
    started.get_future().wait();
    wait_for_first_nic_bytes(dest.bytes.data(), [&] { return done.load(); });
    CancelResult c = token.cancel(seconds(120));
    mover.join();
    std::printf("%s of %llu bytes: cancel said %s\n", push ? "write" : "read",
                static_cast<unsigned long long>(n), c.to_string().c_str());
    ASSERT_NE(c.state, State::kStillRunning);
    if (c.state == State::kNotStarted || c.state == State::kCancelled) {
      ASSERT_FALSE(got.ok());
      EXPECT_EQ(got.error().code(), ErrorCode::kCancelled) << got.error().to_string();
      expect_still(dest, push ? "the remote buffer" : "the local buffer");
    } else {
      EXPECT_EQ(got.ok(), c.status.ok());
      if (got.ok()) {
        EXPECT_TRUE(holds_pattern(dest, 0, n, push ? 9 : 7, 0));
      } else {
        EXPECT_EQ(got.error().code(), c.status.error().code()) << got.error().to_string();
      }
    }
    if (c.state == State::kCancelled) {
      EXPECT_EQ(c.status.error().code(), ErrorCode::kCancelled);
      if (c.to_string().find("flushed") != std::string::npos)
        ++stopped_mid_way;
    }
  }
  // Over RDMA a cancel once the first bytes landed stops the op on the NIC (its queue pair
  // flushed): 3 MiB take a quarter of a millisecond on a fast NIC, 60 ms in the VM, the stop
  // microseconds.
  if (expected_path() == kPathRdma) {
    EXPECT_GE(stopped_mid_way, 1) << "no transfer was stopped mid-way";
  }
  // The client goes on: the next transfer moves every byte (a new lane where one was flushed).
  mine.bytes.assign(n, 0);
  ASSERT_TRUE(me.read(local->handle(), remote, Range::whole(), seconds(60)).ok());
  EXPECT_EQ(std::memcmp(mine.bytes.data(), theirs.bytes.data(), n), 0);
}

// On the fallback, a transfer of 128 MiB cancelled once its first bytes landed, read and write,
// over the owner's same-host endpoint (a cross-memory copy) and over TCP: the cancel and the
// transfer agree; a kCancelled one says it stopped on the stream lane, and then no byte of the
// destination changes; every byte of it is either untouched or the source's (never another).
// Stopped mid-way at least once of the four: 128 MiB take tens of milliseconds here, the stop
// a socket's shutdown.
TEST_F(CancelTest, AStreamTransferStopsMidWayOnTheFallback) {
  if (expected_path() == kPathRdma)
    return;  // the direct lane's stop: ACancelWhileItRunsAgreesWithTheTransfer
  const uint64_t n = 128ull << 20;
  int stopped_mid_way = 0;
  for (bool same_host : {true, false}) {
    SCOPED_TRACE(same_host ? "same-host endpoint" : "over TCP");
    ManagerOptions options;
    options.same_host = same_host;
    ASSERT_TRUE(restart(options));
    RdmaClient me(user_->node().system(), user_->manager());
    // The owner's memory a read's worker sends from (it may read on for a moment after the
    // cancel, as after a timeout: never written while registered), and the one writes go to.
    Memory theirs_out(n, 12), theirs_in(n, 0);
    BufferHandle out_of = remote_view(*owner_, *user_, theirs_out, "cancel-stream-out");
    BufferHandle into = remote_view(*owner_, *user_, theirs_in, "cancel-stream-in");
    Memory mine(n, 0);
    auto local = me.register_buffer(mine.bytes.data(), mine.bytes.size());
    ASSERT_TRUE(local.ok()) << local.error().to_string();
    ASSERT_TRUE(me.read(local->handle(), out_of, Range::of(8)).ok());  // warm: the endpoint
    for (bool push : {false, true}) {
      SCOPED_TRACE(push ? "write" : "read");
      Memory& dest = push ? theirs_in : mine;
      const uint32_t seed = arrange_direction(dest, mine, push);
      Result<TransferReply> got = Error(ErrorCode::kInternal, "not run");
      double ms = 0;
      CancelResult c =
          move_and_cancel(me, push, local->handle(), push ? into : out_of, dest, &got, &ms);
      std::printf("%s, %s of %llu bytes: cancel answered in %.2f ms: %s\n",
                  same_host ? "same-host" : "tcp", push ? "write" : "read",
                  static_cast<unsigned long long>(n), ms, c.to_string().c_str());
      ASSERT_NE(c.state, State::kStillRunning);
      ASSERT_NE(c.state, State::kNotStarted);
      EXPECT_EQ(got.ok(), c.status.ok());
      if (c.state == State::kCancelled) {
        ASSERT_FALSE(got.ok());
        EXPECT_EQ(got.error().code(), ErrorCode::kCancelled) << got.error().to_string();
        EXPECT_NE(got.error().message().find("cancelled on the stream channel"), std::string::npos)
            << got.error().to_string();
        expect_still(dest, push ? "the remote buffer" : "the local buffer");
        uint64_t landed = 0;
        ASSERT_TRUE(only_untouched_or_source(dest, seed, &landed));
        std::printf("  %llu of its bytes had landed (not 0)\n",
                    static_cast<unsigned long long>(landed));
        ++stopped_mid_way;
      } else if (got.ok()) {
        EXPECT_TRUE(holds_pattern(dest, 0, n, seed, 0));
      } else {
        EXPECT_EQ(got.error().code(), c.status.error().code()) << got.error().to_string();
      }
    }
    // The client goes on: the next transfer moves every byte (its connection was not pooled).
    mine.bytes.assign(n, 0);
    auto again = me.read(local->handle(), out_of, Range::whole(), seconds(60));
    ASSERT_TRUE(again.ok()) << again.error().to_string();
    EXPECT_TRUE(holds_pattern(mine, 0, n, 12, 0));
    // The owner's release waits for its workers: then its memory may go.
    EXPECT_TRUE(owner_->release(out_of.id));
    EXPECT_TRUE(owner_->release(into.id));
  }
  EXPECT_GE(stopped_mid_way, 1) << "no stream transfer was stopped mid-way";
}

// A list cancelled as it runs: the outcome and the cancel agree on how many ranges landed, those
// are in place, and after a kCancelled answer the destination stays still.
TEST_F(CancelTest, ACancelledListSaysWhatLandedAndNothingLandsLater) {
  RdmaClient me(user_->node().system(), user_->manager());
  const uint64_t blocks = 8192, block = 4096, n = blocks * block;
  Memory theirs(n, 11);
  BufferHandle remote = remote_view(*owner_, *user_, theirs, "cancel-list");
  Memory mine(n, 0);
  auto local = me.register_buffer(mine.bytes.data(), mine.bytes.size());
  ASSERT_TRUE(local.ok()) << local.error().to_string();
  std::vector<uint64_t> place(blocks);
  std::iota(place.begin(), place.end(), 0);
  std::shuffle(place.begin(), place.end(), std::mt19937(3));
  std::vector<ListRange> ranges(blocks);
  for (uint64_t i = 0; i < blocks; ++i)
    ranges[i] = ListRange{i * block, place[i] * block, block};
  auto plan = me.prepare(TransferKind::kRead, local->handle(), remote, ranges);
  ASSERT_TRUE(plan.ok()) << plan.error().to_string();
  ASSERT_TRUE(me.post(*plan).ok());  // warm: lanes and endpoints
  mine.bytes.assign(n, 0);
  CancelToken token;
  std::promise<void> started;
  std::atomic<bool> done{false};
  ListOutcome out;
  std::thread poster([&] {
    started.set_value();
    out = me.post(*plan, seconds(60), token);
    done.store(true);
  });
  started.get_future().wait();
  wait_for_first_nic_bytes(mine.bytes.data(),
                           [&] { return done.load(); });  // range 0 is the first 4 KiB
  CancelResult c = token.cancel(seconds(120));
  poster.join();
  std::printf("list of %llu ranges: cancel said %s\n", static_cast<unsigned long long>(blocks),
              c.to_string().c_str());
  ASSERT_NE(c.state, State::kStillRunning);
  if (c.state != State::kNotStarted) {
    EXPECT_EQ(c.landed, out.landed);
    EXPECT_EQ(c.bytes, out.bytes);
    EXPECT_EQ(c.status.ok(), out.ok());
  }
  if (!out.ok()) {
    EXPECT_EQ(out.code, static_cast<uint8_t>(ErrorCode::kCancelled)) << out.message;
    expect_still(mine, "the local buffer");
  } else {
    EXPECT_EQ(out.landed, blocks);
  }
  // Over RDMA the list is one op on the direct lane (32 MiB: milliseconds on a fast NIC, a
  // second in the VM), stopped mid-way once its first range landed.
  if (expected_path() == kPathRdma) {
    EXPECT_EQ(c.state, State::kCancelled) << c.to_string();
    EXPECT_LT(out.landed, blocks);
  }
  uint64_t bytes = 0;
  for (uint64_t r = 0; r < out.landed; ++r) {
    ASSERT_EQ(std::memcmp(&mine.bytes[r * block], &theirs.bytes[place[r] * block], block), 0)
        << "range " << r << " of the " << out.landed << " reported landed differs";
    bytes += block;
  }
  EXPECT_EQ(out.bytes, bytes);
}

}  // namespace
}  // namespace caf_rdma::testing
