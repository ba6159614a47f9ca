// The stream lane (actors/stream_lane.h): RdmaClient's fallback reads and writes go straight to
// the owner's stream channel, authorized by the handle, with no message to either manager
// (invariant 1), every byte checked; what the lane cannot decide is answered by the manager in
// its own words (invariant 3); a release of the requester's buffer waits for the lane's ops
// (invariant 2). Natively, on
// the fallback (a node on the rdma transport has no stream channel).
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "actors/rdma_client.h"
#include "actors/stream_lane.h"
#include "tests/actors/two_node_test.h"

namespace caf_rdma::testing {
namespace {

using std::chrono::seconds;

class StreamLaneTest : public TwoNodeTest {
protected:
  ManagerStats owner_stats() {
    RdmaClient c(owner_->node().system(), owner_->manager());
    auto s = c.stats();
    EXPECT_TRUE(s.ok());
    return s.ok() ? *s : ManagerStats{};
  }
};

TEST_F(StreamLaneTest, ReadsAndWritesGoStraightToTheOwnersStreamChannel) {
  Memory theirs(1 << 20, 3);
  BufferHandle remote = remote_view(*owner_, *user_, theirs, "lane-target");
  ASSERT_NE(remote.stream_port, 0) << "the owner's handle names its stream channel";
  RdmaClient me(user_->node().system(), user_->manager());
  Memory mine(1 << 20, 0);
  auto local = me.register_buffer(mine.bytes.data(), mine.bytes.size());
  ASSERT_TRUE(local.ok()) << local.error().to_string();
  // The first op to an owner goes through the manager, whose stream grant names the owner's
  // endpoint (actors/stream_endpoints.h): the lane goes only there, whatever the handle says.
  auto first = me.read(local->handle(), remote, Range::of(16));
  ASSERT_TRUE(first.ok()) << first.error().to_string();
  for (uint64_t i = 0; i < 16; ++i)
    ASSERT_EQ(mine.bytes[i], pattern(i, 3)) << "first read, byte " << i;
  auto learned = me.stats();
  ASSERT_TRUE(learned.ok());
  EXPECT_EQ(learned->stream_lane_ops, 0u);
  EXPECT_EQ(learned->stream_ops, 1u);
  // The owner counts the first read's 16 bytes when its worker is done, which may be after the
  // answer: counted before the lane's ops are, or they would seem to serve 16 bytes more.
  const ManagerStats owner_before =
      owner_->wait_stats([](const ManagerStats& s) { return s.served_fallback_bytes >= 16; });
  const std::vector<uint64_t> sizes = {1, 8, 4096, 65536, 1 << 20};
  uint64_t ops = 0;
  for (uint64_t s : sizes) {
    auto r = me.read(local->handle(), remote, Range::of(s));
    ASSERT_TRUE(r.ok()) << r.error().to_string();
    EXPECT_EQ(r->bytes, s);
    EXPECT_EQ(r->path, kPathFallback);
    for (uint64_t i = 0; i < s; ++i)
      ASSERT_EQ(mine.bytes[i], pattern(i, 3)) << "read of " << s << ", byte " << i;
    ++ops;
  }
  // Writes at an offset, from another pattern.
  for (uint64_t i = 0; i < mine.bytes.size(); ++i)
    mine.bytes[i] = pattern(i, 8);
  for (uint64_t s : sizes) {
    const uint64_t at = (1 << 20) - s;
    auto w = me.write(local->handle(), remote, Range::of(s).at_remote(at));
    ASSERT_TRUE(w.ok()) << w.error().to_string();
    for (uint64_t i = 0; i < s; ++i)
      ASSERT_EQ(theirs.bytes[at + i], pattern(i, 8)) << "write of " << s << ", byte " << i;
    ++ops;
  }
  auto stats = me.stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->stream_lane_ops, ops);
  EXPECT_GE(stats->fallback_ops, ops);
  // The owner's manager moved nothing itself: its stream server served the lane, and counts
  // exactly those bytes as served (when its worker is done, which may be after the answer).
  uint64_t lane_bytes = 0;
  for (uint64_t s : sizes)
    lane_bytes += 2 * s;
  const uint64_t before = owner_before.served_fallback_bytes;
  ManagerStats after = owner_->wait_stats(
      [&](const ManagerStats& s) { return s.served_fallback_bytes >= before + lane_bytes; });
  EXPECT_EQ(after.served_fallback_bytes - before, lane_bytes);
  EXPECT_EQ(owner_stats().fallback_ops, owner_before.fallback_ops);
}

TEST_F(StreamLaneTest, ErrorsAreTheManagersInItsOwnWords) {
  Memory theirs(4096, 5), ro(4096, 6);
  BufferHandle remote = remote_view(*owner_, *user_, theirs, "lane-errors");
  BufferHandle read_only = remote_view(*owner_, *user_, ro, "lane-ro", BufferAccess::kReadOnly);
  RdmaClient me(user_->node().system(), user_->manager());
  Memory mine(8192, 1);
  auto local = me.register_buffer(mine.bytes.data(), mine.bytes.size());
  ASSERT_TRUE(local.ok());
  // Out of the remote's range: the checks both run (checked_length).
  auto past = me.read(local->handle(), remote, Range::of(16).at_remote(4090));
  ASSERT_FALSE(past.ok());
  EXPECT_EQ(past.error().code(), ErrorCode::kOutOfBounds) << past.error().message();
  // A forged secret: the owner's manager refuses it, in its words.
  BufferHandle forged = remote;
  forged.secret_lo ^= 1;
  auto denied = me.read(local->handle(), forged, Range::of(16));
  ASSERT_FALSE(denied.ok());
  EXPECT_EQ(denied.error().code(), ErrorCode::kPermissionDenied) << denied.error().message();
  EXPECT_NE(denied.error().message().find("secret"), std::string::npos);
  // A write into a read-only buffer.
  auto ro_write = me.write(local->handle(), read_only, Range::of(16));
  ASSERT_FALSE(ro_write.ok());
  EXPECT_EQ(ro_write.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(ro_write.error().message().find("read-only"), std::string::npos)
      << ro_write.error().message();
  for (uint64_t i = 0; i < 4096; ++i) {
    ASSERT_EQ(theirs.bytes[i], pattern(i, 5));
    ASSERT_EQ(ro.bytes[i], pattern(i, 6));
  }
  // Released by its owner: `released`, naming the buffer.
  RdmaClient owner(owner_->node().system(), owner_->manager());
  ASSERT_TRUE(owner.release(remote.id).ok());
  auto gone = me.read(local->handle(), remote, Range::of(16));
  ASSERT_FALSE(gone.ok());
  EXPECT_EQ(gone.error().code(), ErrorCode::kReleased) << gone.error().message();
  EXPECT_NE(gone.error().message().find("buffer " + std::to_string(remote.id)), std::string::npos);
}

// The owner's side alone (handle_authorizer): a request by handle is allowed exactly within the
// buffer: its last byte yes, one byte past the end no (nor an offset past it, a wrong secret or
// a write into a read-only buffer); each refusal sends the client to the manager and holds
// nothing, each grant holds the buffer until its `done`.
TEST(StreamLaneAuthorizerTest, ARequestByHandleFitsTheBufferToTheByte) {
  auto registry = std::make_shared<DirectRegistry>();
  std::vector<uint8_t> memory(4096, 0);
  DirectRegistry::Entry e;
  e.size = memory.size();
  e.secret_hi = 11;
  e.secret_lo = 22;
  e.addr = reinterpret_cast<uint64_t>(memory.data());
  registry->add(7, e);
  e.access = BufferAccess::kReadOnly;
  registry->add(8, e);
  auto authorize = handle_authorizer(registry, caf::actor_addr{}, std::chrono::milliseconds(5000));
  auto request = [](uint64_t id, uint64_t offset, uint64_t length, StreamDirection d) {
    StreamRequest r;
    r.direction = d;
    r.length = length;
    r.by_handle = true;
    r.handle = HandleAccess{id, 11, 22, offset, 1000};
    return r;
  };
  const auto in = StreamDirection::kIntoOwner;
  const auto out = StreamDirection::kOutOfOwner;
  struct Case {
    const char* what;
    StreamRequest req;
    bool allowed;
  };
  StreamRequest wrong_secret = request(7, 0, 1, out);
  wrong_secret.handle.secret_lo ^= 1;
  const std::vector<Case> cases = {
      {"the whole buffer", request(7, 0, 4096, in), true},
      {"its last byte", request(7, 4095, 1, out), true},
      {"one byte past the end", request(7, 1, 4096, in), false},
      {"one byte past the end, reading", request(7, 4095, 2, out), false},
      {"an offset past the end", request(7, 4097, 1, out), false},
      {"zero bytes", request(7, 0, 0, out), false},
      {"a wrong secret", wrong_secret, false},
      {"a write into a read-only buffer", request(8, 0, 8, in), false},
      {"a read of a read-only buffer", request(8, 0, 8, out), true},
      {"an unknown buffer", request(9, 0, 8, out), false},
  };
  for (const Case& c : cases) {
    auto g = authorize(c.req);
    ASSERT_EQ(g.ok(), c.allowed) << c.what;
    if (!g.ok()) {
      EXPECT_EQ(g.error().code(), ErrorCode::kNotFound) << c.what << ": " << g.error().message();
      EXPECT_NE(g.error().message().find("ask its manager"), std::string::npos) << c.what;
      EXPECT_FALSE(registry->busy(c.req.handle.id)) << c.what << ": a refusal holds nothing";
      continue;
    }
    EXPECT_EQ(g->addr, memory.data() + c.req.handle.offset) << c.what;
    EXPECT_TRUE(registry->busy(c.req.handle.id)) << c.what << ": held until done";
    g->done(Status{}, c.req.length);
    EXPECT_FALSE(registry->busy(c.req.handle.id)) << c.what;
  }
}

TEST_F(StreamLaneTest, ManyThreadsAtOnceEachWithItsOwnRange) {
  constexpr int kThreads = 4;
  constexpr uint64_t kSlot = 16384;
  constexpr int kRounds = 50;
  Memory theirs(kThreads * kSlot, 0);
  BufferHandle remote = remote_view(*owner_, *user_, theirs, "lane-many");
  {
    // The first op to the owner teaches its endpoint (through the manager's grant): after it,
    // every op of every thread takes the lane.
    RdmaClient first(user_->node().system(), user_->manager());
    Memory one(1);
    auto l = first.register_buffer(one.bytes.data(), 1);
    ASSERT_TRUE(l.ok());
    ASSERT_TRUE(first.read(l->handle(), remote, Range::of(1)).ok());
  }
  std::vector<std::thread> threads;
  threads.reserve(kThreads);
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      RdmaClient me(user_->node().system(), user_->manager());
      Memory out(kSlot), back(kSlot);
      auto lo = me.register_buffer(out.bytes.data(), kSlot);
      auto lb = me.register_buffer(back.bytes.data(), kSlot);
      if (!lo.ok() || !lb.ok()) {
        ++failures;
        return;
      }
      for (int r = 0; r < kRounds; ++r) {
        const uint64_t n = 1 + (static_cast<uint64_t>(r) * 331) % kSlot;
        for (uint64_t i = 0; i < n; ++i)
          out.bytes[i] = pattern(i, static_cast<uint32_t>(t * 1000 + r));
        Range at = Range::of(n).at_remote(t * kSlot);
        if (!me.write(lo->handle(), remote, at).ok() || !me.read(lb->handle(), remote, at).ok()) {
          ++failures;
          return;
        }
        for (uint64_t i = 0; i < n; ++i)
          if (back.bytes[i] != out.bytes[i]) {
            ++failures;
            return;
          }
      }
    });
  for (auto& t : threads)
    t.join();
  EXPECT_EQ(failures.load(), 0);
  RdmaClient c(user_->node().system(), user_->manager());
  auto s = c.stats();
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->stream_lane_ops, uint64_t{kThreads} * kRounds * 2);
}

// One brain (actors/transfer/path_choice.h invariant 6): an op of a given size takes the same
// path from a client's thread (its lanes) as from an actor (its manager), by the manager's own
// threshold, here 64 KiB: 4 KiB in CAF messages from both, 128 KiB over the stream channel
// from both. Before, the lane took every size.
TEST(StreamLaneThresholdTest, AnOpTakesTheSamePathFromAClientsThreadAsFromAnActor) {
  ManagerOptions extra;
  extra.stream_min_bytes = 64 << 10;
  auto owner = start_node(extra);
  auto user = start_node(extra);
  ASSERT_TRUE(owner && user);
  constexpr uint64_t kSize = 1 << 20, kSmall = 4096, kLarge = 128 << 10;
  Memory theirs(kSize, 5);
  BufferHandle remote = remote_view(*owner, *user, theirs, "threshold");
  ASSERT_NE(remote.stream_port, 0) << "the owner's handle names its stream channel";
  RdmaClient lanes(user->node().system(), user->manager(), /*direct=*/true);
  RdmaClient actor_like(user->node().system(), user->manager(), /*direct=*/false);
  Memory mine(kSize, 0);
  auto local = lanes.register_buffer(mine.bytes.data(), mine.bytes.size());
  ASSERT_TRUE(local.ok()) << local.error().to_string();
  // The first op to an owner asks its grant, which names its endpoint (a large one: it would
  // take the stream channel anyway).
  auto first = actor_like.read(local->handle(), remote, Range::of(kLarge));
  ASSERT_TRUE(first.ok()) << first.error().to_string();
  struct Case {
    const char* who;
    RdmaClient* client;
    uint64_t size;
    bool streamed;
  };
  const Case cases[] = {{"client thread", &lanes, kSmall, false},
                        {"client thread", &lanes, kLarge, true},
                        {"actor", &actor_like, kSmall, false},
                        {"actor", &actor_like, kLarge, true}};
  uint64_t at = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(c.who) + ", " + std::to_string(c.size) + " bytes");
    auto before = user->stats();
    auto r = c.client->read(local->handle(), remote, Range::of(c.size).at_local(at).at_remote(at));
    ASSERT_TRUE(r.ok()) << r.error().to_string();
    EXPECT_EQ(r->path, kPathFallback);
    for (uint64_t i = at; i < at + c.size; ++i)
      ASSERT_EQ(mine.bytes[i], pattern(i, 5)) << "byte " << i;
    auto after = user->stats();
    const uint64_t streamed =
        (after.stream_ops + after.stream_lane_ops) - (before.stream_ops + before.stream_lane_ops);
    EXPECT_EQ(streamed, c.streamed ? 1u : 0u);
    EXPECT_EQ(after.fallback_ops - before.fallback_ops, 1u);
    at += c.size;
  }
}

TEST_F(StreamLaneTest, WithoutDirectLanesTheManagersMoveTheBytes) {
  Memory theirs(4096, 7);
  BufferHandle remote = remote_view(*owner_, *user_, theirs, "lane-off");
  RdmaClient me(user_->node().system(), user_->manager(), /*direct=*/false);
  Memory mine(4096);
  auto local = me.register_buffer(mine.bytes.data(), 4096);
  ASSERT_TRUE(local.ok());
  auto r = me.read(local->handle(), remote);
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  for (uint64_t i = 0; i < 4096; ++i)
    ASSERT_EQ(mine.bytes[i], pattern(i, 7));
  auto s = me.stats();
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->stream_lane_ops, 0u);
  EXPECT_EQ(s->fallback_ops, 1u);
}

}  // namespace
}  // namespace caf_rdma::testing
