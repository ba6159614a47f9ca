// Direct lanes (actors/direct_lane.h) through RdmaClient: two nodes in one process, the owner's
// handles arriving through a network proxy. Built twice: `direct_lane_rdma_test` (rdma-tagged,
// in the VM: transfers take a lane) and `direct_lane_fallback_test` (native: no lane can be
// had, RdmaClient goes through the manager and nothing changes for the caller).
#include <gtest/gtest.h>

#include <optional>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <thread>

#include "actors/direct_lane.h"
#include "actors/rdma_client.h"
#include "tests/actors/manager_fixture.h"
#include "tests/actors/two_node_test.h"
#include "tests/rdma_test.h"
#include "tests/scoped_env.h"

namespace caf_rdma::testing {
namespace {

bool rdma_lane() {
  return expected_path() == kPathRdma;
}

class DirectLaneTest : public TwoNodeTest {
protected:
  std::unique_ptr<RdmaClient> client(bool direct = true) {
    return std::make_unique<RdmaClient>(user_->node().system(), user_->manager(), direct);
  }

  /// Polls `pred` for up to 10 s.
  template <class Pred>
  bool eventually(Pred pred) {
    auto deadline = std::chrono::steady_clock::now() + 10s;
    while (std::chrono::steady_clock::now() < deadline) {
      if (pred())
        return true;
      std::this_thread::sleep_for(10ms);
    }
    return pred();
  }
};

TEST_F(DirectLaneTest, ReadsAndWritesGoOverOneLaneOfTheClient) {
  constexpr uint64_t kSize = (3 << 20) + 5;
  Memory remote_mem(kSize), src(kSize, 31), back(kSize);
  BufferHandle remote = remote_view(*owner_, *user_, remote_mem, "lane");
  auto hs = user_->request_buffer(src);
  auto hb = user_->request_buffer(back);
  ASSERT_TRUE(hs && hb);
  auto c = client();
  uint64_t handshakes_before = user_->stats().handshakes;
  uint64_t ops = 0;
  for (uint64_t len : {uint64_t{1}, uint64_t{4096}, kSize - 100}) {
    SCOPED_TRACE("length " + std::to_string(len));
    // At offsets: the bytes around the range must stay as they were.
    uint64_t off = kSize - len - 7 < 50 ? 0 : 50;
    auto w = c->write(*hs, remote, Range::of(len).at_local(off).at_remote(off),
                      std::chrono::milliseconds(20000));
    ASSERT_TRUE(w.ok()) << w.error().to_string();
    EXPECT_EQ(w->bytes, len);
    EXPECT_EQ(w->path, expected_path());
    auto r = c->read(*hb, remote, Range::of(len).at_local(off).at_remote(off),
                     std::chrono::milliseconds(20000));
    ASSERT_TRUE(r.ok()) << r.error().to_string();
    EXPECT_EQ(r->bytes, len);
    ops += 2;
    for (uint64_t i = 0; i < kSize; i += (i < off + len + 64 ? 1 : 4093)) {
      bool inside = i >= off && i < off + len;
      ASSERT_EQ(remote_mem.bytes[i], inside ? src.bytes[i] : 0) << i;
      ASSERT_EQ(back.bytes[i], inside ? src.bytes[i] : 0) << i;
    }
    ASSERT_TRUE(owner_->wait_quiet()) << "the owner still serves a grant";
    std::fill(remote_mem.bytes.begin(), remote_mem.bytes.end(), 0);
    std::fill(back.bytes.begin(), back.bytes.end(), 0);
  }
  auto s = user_->stats();
  if (rdma_lane()) {
    EXPECT_EQ(c->lanes(), 1u);
    EXPECT_EQ(s.direct_ops, ops) << "every op ran on the lane, none through the manager";
    EXPECT_EQ(s.rdma_ops, ops) << "lane ops count as the manager's RDMA ops";
    EXPECT_EQ(s.handshakes - handshakes_before, 1u) << "one handshake: the lane's";
    EXPECT_EQ(s.lanes, 1u);
    EXPECT_TRUE(eventually([&] { return owner_->stats().lanes == 1; }));
  } else {
    EXPECT_EQ(c->lanes(), 0u);
    EXPECT_EQ(s.direct_ops, 0u);
    EXPECT_EQ(s.fallback_ops, ops);
  }
  // Dropping the client closes the lane on both sides.
  c.reset();
  EXPECT_TRUE(eventually([&] { return user_->stats().lanes == 0; }));
  EXPECT_TRUE(eventually([&] { return owner_->stats().lanes == 0; }));
}

TEST_F(DirectLaneTest, BatchRunsAsOneChainOnTheLane) {
  constexpr uint64_t kSlice = 64 << 10;
  constexpr int kOps = 40;
  Memory remote_mem(kOps * kSlice), src(kOps * kSlice, 5), back(kOps * kSlice);
  BufferHandle remote = remote_view(*owner_, *user_, remote_mem, "batch");
  auto hs = user_->request_buffer(src);
  auto hb = user_->request_buffer(back);
  ASSERT_TRUE(hs && hb);
  auto c = client();
  for (bool write : {true, false}) {
    std::vector<TransferOp> ops;
    for (int i = 0; i < kOps; ++i) {
      // Reverse order of offsets, so a mix-up of ranges shows.
      uint64_t off = (kOps - 1 - i) * kSlice;
      ops.push_back(write ? make_write(*hs, remote, kSlice, off, off)
                          : make_read(*hb, remote, kSlice, off, off));
    }
    auto r = c->batch(ops, 30000);
    ASSERT_TRUE(r.ok()) << r.error().to_string();
    ASSERT_EQ(r->size(), ops.size());
    for (auto& o : *r) {
      EXPECT_TRUE(o.ok()) << o.message;
      EXPECT_EQ(o.bytes, kSlice);
      EXPECT_EQ(o.path, expected_path());
    }
  }
  EXPECT_EQ(remote_mem.bytes, src.bytes);
  EXPECT_EQ(back.bytes, src.bytes);
  EXPECT_EQ(user_->stats().direct_ops, rdma_lane() ? 2u * kOps : 0u);
}

TEST_F(DirectLaneTest, ErrorsAreTheManagersAndTheLaneSurvivesThem) {
  // The same bad requests through a lane and through the manager: same code, same message.
  Memory remote_mem(8192), ro_mem(4096), src(8192, 3), small(100), gone(4096);
  BufferHandle remote = remote_view(*owner_, *user_, remote_mem, "bad");
  BufferHandle read_only = remote_view(*owner_, *user_, ro_mem, "ro", BufferAccess::kReadOnly);
  auto hs = user_->request_buffer(src);
  auto hsmall = user_->request_buffer(small);
  auto hro = user_->request_buffer(gone, BufferAccess::kReadOnly);
  auto hgone = user_->request_buffer(gone);
  ASSERT_TRUE(hs && hsmall && hro && hgone);
  ASSERT_TRUE(user_->release(hgone->id));
  auto lane = client();
  auto plain = client(false);
  ASSERT_TRUE(lane->write(*hs, remote, Range::of(16), std::chrono::milliseconds(20000))
                  .ok());  // opens the lane
  uint64_t handshakes = user_->stats().handshakes;
  BufferHandle forged = *hs;
  forged.size += 4096;
  BufferHandle unknown = *hs;
  unknown.id = 999999;
  BufferHandle wrong_secret = *hs;  // this node's own memory, but not the handle it issued
  wrong_secret.secret_lo ^= 1;
  struct Case {
    const char* what;
    TransferOp op;
    ErrorCode code;
  };
  std::vector<Case> cases{
      {"beyond the remote end", make_write(*hs, remote, 4096, 0, 8000), ErrorCode::kOutOfBounds},
      {"beyond the local end", make_write(*hs, remote, 4096, 8000, 0), ErrorCode::kOutOfBounds},
      {"remote offset past the end", make_read(*hs, remote, kWholeSpan, 0, 9000),
       ErrorCode::kOutOfBounds},
      {"read into a smaller buffer", make_read(*hsmall, remote), ErrorCode::kSizeMismatch},
      {"write into read-only", make_write(*hs, read_only, 16), ErrorCode::kInvalidArgument},
      {"read into read-only", make_read(*hro, remote, 16), ErrorCode::kInvalidArgument},
      {"zero length", make_write(*hs, remote, 0), ErrorCode::kInvalidArgument},
      {"released local buffer", make_write(*hgone, remote, 16), ErrorCode::kReleased},
      {"unknown local buffer", make_write(unknown, remote, 16), ErrorCode::kUnknownBuffer},
      {"forged local handle", make_write(forged, remote, 16), ErrorCode::kInvalidArgument},
      {"local handle with a wrong secret", make_write(wrong_secret, remote, 16),
       ErrorCode::kInvalidArgument},
  };
  for (auto& c : cases) {
    SCOPED_TRACE(c.what);
    auto a = lane->transfer(c.op, 20000);
    auto b = plain->transfer(c.op, 20000);
    ASSERT_FALSE(a.ok());
    ASSERT_FALSE(b.ok());
    EXPECT_EQ(a.error().code(), c.code) << a.error().to_string();
    EXPECT_EQ(a.error().code(), b.error().code());
    EXPECT_EQ(a.error().message(), b.error().message());
  }
  // Nothing moved, and the lane is still the same one.
  std::vector<uint8_t> expected(8192, 0);  // only the 16 bytes of the write that opened the lane
  std::copy(src.bytes.begin(), src.bytes.begin() + 16, expected.begin());
  EXPECT_EQ(remote_mem.bytes, expected) << "a refused op moved bytes";
  auto ok = lane->write(*hs, remote, Range::whole(), std::chrono::milliseconds(20000));
  ASSERT_TRUE(ok.ok()) << ok.error().to_string();
  EXPECT_EQ(remote_mem.bytes, src.bytes);
  EXPECT_EQ(user_->stats().handshakes, handshakes);
  EXPECT_EQ(lane->lanes(), rdma_lane() ? 1u : 0u);
}

TEST_F(DirectLaneTest, LoopbackLaneWithinOneNode) {
  Memory a(1 << 20, 9), b(1 << 20);
  auto ha = user_->request_buffer(a);
  auto hb = user_->request_buffer(b);
  ASSERT_TRUE(ha && hb);
  auto c = client();
  auto w = c->write(*ha, *hb, Range::whole(), std::chrono::milliseconds(20000));
  ASSERT_TRUE(w.ok()) << w.error().to_string();
  EXPECT_EQ(b.bytes, a.bytes);
  EXPECT_EQ(c->lanes(), rdma_lane() ? 1u : 0u);
  EXPECT_EQ(user_->stats().direct_ops, rdma_lane() ? 1u : 0u);
}

// Overlapping ranges of one node through a client: the lane leaves them to the manager,
// which copies them as memmove would (RDMA gives overlapping bytes no order).
TEST_F(DirectLaneTest, OverlappingRangesWithinOneBufferMoveLikeMemmove) {
  constexpr uint64_t kSize = 1 << 20, kLen = 768 << 10, kShift = 65536 + 5;
  Memory m(kSize, 12);
  auto h = user_->request_buffer(m);
  ASSERT_TRUE(h);
  auto c = client();
  for (bool up : {true, false}) {
    SCOPED_TRACE(up ? "shifted up" : "shifted down");
    const uint64_t from = up ? 0 : kShift, to = up ? kShift : 0;
    std::vector<uint8_t> expect = m.bytes;
    std::memmove(expect.data() + to, expect.data() + from, kLen);
    auto w = c->transfer(make_write(*h, *h, kLen, from, to), 20000);
    ASSERT_TRUE(w.ok()) << w.error().to_string();
    ASSERT_EQ(m.bytes, expect);
  }
  EXPECT_EQ(user_->stats().direct_ops, 0u) << "an overlapping op ran on a lane";
}

TEST_F(DirectLaneTest, OwnerThatNeverAnswersTimesOutOnTime) {
  Memory src(4096, 1), fake_mem(4096);
  auto local = user_->request_buffer(src);
  ASSERT_TRUE(local);
  auto mute = user_->node().system().spawn(silent);
  BufferHandle h = owned_by_mute(*local, mute, fake_mem);
  auto c = client();
  auto t0 = std::chrono::steady_clock::now();
  auto w = c->write(*local, h, Range::whole(), std::chrono::milliseconds(400));
  auto took = std::chrono::steady_clock::now() - t0;
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.error().code(), ErrorCode::kTimeout) << w.error().to_string();
  EXPECT_NE(w.error().message().find("400 ms"), std::string::npos) << w.error().to_string();
  EXPECT_NE(w.error().message().find("mute-owner"), std::string::npos) << w.error().to_string();
  EXPECT_GE(took, 395ms);
  EXPECT_LT(took, 20s);  // its own 400 ms, not a 30 s backstop (generous: loaded CI)
  EXPECT_EQ(c->lanes(), 0u);
  caf::anon_send_exit(mute, caf::exit_reason::user_shutdown);
}

TEST_F(DirectLaneTest, ReleaseWaitsForTheLanesTransfer) {
  // Invariant 2 of actors/direct_lane.h: after the release reply the caller may free the
  // memory, so no byte may land in it afterwards: a lane reading into the buffer must have
  // finished when the release replies.
  constexpr uint64_t kSize = 32 << 20;
  Memory remote_mem(kSize, 8), dst(kSize);
  BufferHandle remote = remote_view(*owner_, *user_, remote_mem, "rel");
  auto hd = user_->request_buffer(dst);
  ASSERT_TRUE(hd);
  auto c = client();
  ASSERT_TRUE(c->read(*hd, remote, Range::of(8), std::chrono::milliseconds(20000))
                  .ok());  // the lane is open
  Result<TransferReply> big = Error(ErrorCode::kInternal, "not run");
  std::thread t(
      [&] { big = c->read(*hd, remote, Range::whole(), std::chrono::milliseconds(60000)); });
  // Released while the read uses the buffer (observed, not guessed with a sleep).
  if (!user_->wait_busy()) {
    t.join();
    FAIL() << "the read never started";
  }
  auto released = user_->release(hd->id);
  // Right after the reply, before the reader returns: every byte is in place.
  bool complete = dst.bytes == remote_mem.bytes;
  t.join();
  ASSERT_TRUE(released) << error_message(released.error());
  ASSERT_TRUE(big.ok()) << "the transfer started before the release: " << big.error().to_string();
  EXPECT_TRUE(complete) << "release replied while the lane still wrote into the buffer";
  auto after = c->read(*hd, remote, Range::of(8), std::chrono::milliseconds(20000));
  ASSERT_FALSE(after.ok());
  EXPECT_EQ(after.error().code(), ErrorCode::kReleased) << after.error().to_string();
}

TEST_F(DirectLaneTest, OwnerGoneFailsWithItsNameAndTheLaneIsDropped) {
  constexpr uint64_t kSize = 32 << 20;
  Memory remote_mem(kSize), src(kSize, 4);
  BufferHandle remote = remote_view(*owner_, *user_, remote_mem, "victim");
  auto hs = user_->request_buffer(src);
  ASSERT_TRUE(hs);
  auto c = client();
  ASSERT_TRUE(c->write(*hs, remote, Range::of(4096), std::chrono::milliseconds(20000)).ok());
  // A write on the lane while the owner's node stops (manager, queue pairs, registrations):
  // it fails with the owner's name as soon as the manager learns of it, not at its timeout.
  Result<TransferReply> during = Error(ErrorCode::kInternal, "not run");
  std::thread t([&] {
    for (int i = 0; i < 100; ++i) {
      during = c->write(*hs, remote, Range::whole(), std::chrono::milliseconds(20000));
      if (!during.ok())
        break;
    }
  });
  bool running = user_->wait_busy();  // the writes run (observed, not guessed)
  EXPECT_TRUE(running) << "the writes never started";
  owner_.reset();
  t.join();
  ASSERT_FALSE(during.ok()) << "writes to a stopped owner succeeded";
  EXPECT_EQ(during.error().code(), ErrorCode::kPeerUnavailable) << during.error().to_string();
  EXPECT_NE(during.error().message().find(remote.owner_name), std::string::npos)
      << during.error().to_string();
  // Its code (peer_unavailable, not timeout) says it failed when the owner went, not at its
  // 20 s timeout: no clock needed.
  // Later transfers fail at once, naming it; the failed lane was dropped.
  auto after = c->write(*hs, remote, Range::of(16), std::chrono::milliseconds(20000));
  ASSERT_FALSE(after.ok());
  EXPECT_EQ(after.error().code(), ErrorCode::kPeerUnavailable) << after.error().to_string();
  // "is down" once its manager heard of the stop; "the link ... was lost" while it only saw the
  // connection drop (a stream lane's op may fail first, on the owner's closed socket).
  EXPECT_TRUE(after.error().message().find("down") != std::string::npos ||
              after.error().message().find("was lost") != std::string::npos)
      << after.error().to_string();
  EXPECT_NE(after.error().message().find(remote.owner_name), std::string::npos)
      << after.error().to_string();
  EXPECT_EQ(c->lanes(), 0u);
}

TEST_F(DirectLaneTest, EnvironmentTurnsLanesOff) {
  auto& sys = user_->node().system();
  std::optional<ScopedEnv> no_lanes(std::in_place, kEnvDirect, "0");
  RdmaClient off(sys, user_->manager());
  // The explicit constructor argument wins over the environment.
  RdmaClient forced(sys, user_->manager(), true);
  no_lanes.reset();
  RdmaClient on(sys, user_->manager());
  EXPECT_FALSE(off.direct());
  EXPECT_TRUE(forced.direct());
  EXPECT_TRUE(on.direct());
  // A client of another node's manager (a network proxy) never takes lanes.
  auto proxy = user_->node().remote_manager("127.0.0.1", owner_->node().port());
  ASSERT_TRUE(proxy.ok());
  RdmaClient remote_client(user_->node().system(), *proxy, true);
  EXPECT_FALSE(remote_client.direct());
}

}  // namespace
}  // namespace caf_rdma::testing
