// Same-host transfers between two nodes (docs/architecture.md, "Same-host transfers";
// stream_server.h invariant 11): handles name the owner's same-host endpoint, the stream lane and
// the manager's stream path move the bytes through it (ManagerStats::same_host_ops proves it),
// every byte checked; refusals give the same error codes as over TCP; CAF_RDMA_SAME_HOST=0
// (ManagerOptions::same_host) keeps them on TCP. Natively, on the fallback.
#include <gtest/gtest.h>

#include <cstdlib>
#include <vector>

#include "actors/environment.h"
#include "actors/rdma_client.h"
#include "actors/stream_lane.h"
#include "components/host_memory.h"
#include "tests/actors/manager_fixture.h"
#include "tests/scoped_env.h"

namespace caf_rdma::testing {
namespace {

struct Pair {
  std::unique_ptr<TestNode> owner, user;
  explicit Pair(bool same_host) {
    ManagerOptions o;
    o.same_host = same_host;
    owner = start_node(o);
    user = start_node(o);
  }
  ~Pair() {
    user.reset();
    owner.reset();
  }
  uint64_t same_host_ops() {
    RdmaClient c(user->node().system(), user->manager());
    auto s = c.stats();
    EXPECT_TRUE(s.ok());
    return s.ok() ? s->same_host_ops : 0;
  }
};

TEST(SameHostNodesTest, LaneAndManagerMoveEveryByteThroughTheSameHostEndpoint) {
  Pair p(true);
  ASSERT_TRUE(p.owner && p.user);
  const uint64_t size = 4 << 20;
  Memory theirs(size, 3);
  BufferHandle remote = remote_view(*p.owner, *p.user, theirs, "same-host-target");
  ASSERT_FALSE(remote.stream_unix.empty()) << "the owner's handle names its same-host endpoint";
  ASSERT_FALSE(remote.stream_host_id.empty());
  RdmaClient me(p.user->node().system(), p.user->manager());
  Memory mine(size, 0);
  auto local = me.register_buffer(mine.bytes.data(), mine.bytes.size());
  ASSERT_TRUE(local.ok()) << local.error().to_string();
  uint64_t ops = 0;
  // The lane (after the first op: see below): in-band up to 64 KiB, cross-memory attach above.
  for (uint64_t s : {uint64_t{8}, uint64_t{65536}, uint64_t{65537}, size}) {
    auto r = me.read(local->handle(), remote, Range::of(s));
    ASSERT_TRUE(r.ok()) << r.error().to_string();
    for (uint64_t i = 0; i < s; ++i)
      ASSERT_EQ(mine.bytes[i], pattern(i, 3)) << "read of " << s << ", byte " << i;
    ++ops;
  }
  for (uint64_t i = 0; i < size; ++i)
    mine.bytes[i] = pattern(i, 8);
  for (uint64_t s : {uint64_t{8}, uint64_t{65537}, size}) {
    auto w = me.write(local->handle(), remote, Range::of(s).at_remote(size - s));
    ASSERT_TRUE(w.ok()) << w.error().to_string();
    for (uint64_t i = 0; i < s; ++i)
      ASSERT_EQ(theirs.bytes[size - s + i], pattern(i, 8)) << "write of " << s << ", byte " << i;
    ++ops;
  }
  // The manager's stream path (a batch goes through the manager): grants, then the endpoint.
  // Its two ops touch disjoint bytes on both sides (they run at once).
  constexpr uint64_t kSplit = 3 << 20;
  for (uint64_t i = 0; i < size; ++i) {
    if (i < kSplit)
      theirs.bytes[i] = pattern(i, 10);  // no transfer runs now: the owner's memory is ours
    else
      mine.bytes[i] = pattern(i, 9);
  }
  std::vector<TransferOp> batch{make_write(local->handle(), remote, size - kSplit, kSplit, kSplit),
                                make_read(local->handle(), remote, kSplit)};
  auto b = me.batch(batch, 20000);
  ASSERT_TRUE(b.ok()) << b.error().to_string();
  for (const auto& out : *b)
    ASSERT_TRUE(out.ok()) << out.message;
  for (uint64_t i = 0; i < size; ++i)
    ASSERT_EQ(i < kSplit ? mine.bytes[i] : theirs.bytes[i], pattern(i, i < kSplit ? 10 : 9))
        << "batch " << (i < kSplit ? "read" : "write") << ", byte " << i;
  auto stats = me.stats();
  ASSERT_TRUE(stats.ok());
  // The first read went through the manager, whose grant named the owner's endpoints
  // (actors/stream_endpoints.h); the lane took every later one.
  EXPECT_EQ(stats->stream_lane_ops, ops - 1);
  EXPECT_EQ(stats->stream_ops, 3u);
  EXPECT_EQ(stats->same_host_ops, ops + 2);
}

// Buffers the library allocates (RdmaClient::allocate_buffer: huge pages) move every byte
// through cross-memory attach, in parallel parts whose bounds fall inside huge pages
// (cross_memory.h invariant 4), both ways.
TEST(SameHostNodesTest, AllocatedBuffersMoveEveryByteInParallelParts) {
  Pair p(true);
  ASSERT_TRUE(p.owner && p.user);
  const uint64_t size = (20 << 20) + 4096 + 7;
  auto theirs = HostMemory::allocate(size);
  ASSERT_TRUE(theirs.ok()) << theirs.error().to_string();
  for (uint64_t i = 0; i < size; ++i)
    theirs->data()[i] = pattern(i, 21);
  BufferHandle remote = remote_view(*p.owner, *p.user, reinterpret_cast<uint64_t>(theirs->data()),
                                    size, "allocated-target");
  RdmaClient me(p.user->node().system(), p.user->manager());
  auto mine = me.allocate_buffer(size);
  ASSERT_TRUE(mine.ok()) << mine.error().to_string();
  auto r = me.read(*mine, remote);
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  for (uint64_t i = 0; i < size; ++i)
    ASSERT_EQ(mine->data()[i], pattern(i, 21)) << "read, byte " << i;
  for (uint64_t i = 0; i < size; ++i)
    mine->data()[i] = pattern(i, 22);
  auto w = me.write(*mine, remote);
  ASSERT_TRUE(w.ok()) << w.error().to_string();
  for (uint64_t i = 0; i < size; ++i)
    ASSERT_EQ(theirs->data()[i], pattern(i, 22)) << "write, byte " << i;
  EXPECT_EQ(p.same_host_ops(), 2u);
}

// A range of odd size and offset, copied in parallel parts, touches no byte outside it: the
// guard bytes on both sides of the range stay as they were, on both sides of the copy.
TEST(SameHostNodesTest, AnOddRangeCopiedInPartsTouchesNoByteAroundIt) {
  Pair p(true);
  ASSERT_TRUE(p.owner && p.user);
  constexpr uint64_t kGuard = 4099;
  const uint64_t size = (20 << 20) + 4103;  // parts' bounds fall at odd places
  const uint64_t total = size + 2 * kGuard;
  auto theirs = HostMemory::allocate(total);
  ASSERT_TRUE(theirs.ok()) << theirs.error().to_string();
  for (uint64_t i = 0; i < total; ++i)
    theirs->data()[i] = pattern(i, 31);
  BufferHandle remote = remote_view(*p.owner, *p.user, reinterpret_cast<uint64_t>(theirs->data()),
                                    total, "guarded-target");
  RdmaClient me(p.user->node().system(), p.user->manager());
  auto mine = me.allocate_buffer(total);
  ASSERT_TRUE(mine.ok()) << mine.error().to_string();
  for (uint64_t i = 0; i < total; ++i)
    mine->data()[i] = pattern(i, 32);
  // Read [kGuard + 1, +size) of theirs into [kGuard - 1, +size) of mine: offsets differ by 2.
  auto r = me.read(*mine, remote, Range::of(size).at_local(kGuard - 1).at_remote(kGuard + 1));
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  for (uint64_t i = 0; i < total; ++i) {
    const bool in = i >= kGuard - 1 && i < kGuard - 1 + size;
    ASSERT_EQ(mine->data()[i], in ? pattern(i + 2, 31) : pattern(i, 32))
        << (in ? "read, byte " : "read, guard byte ") << i;
  }
  // Write it back 3 bytes further on: theirs outside the range keeps its own bytes.
  auto w = me.write(*mine, remote, Range::of(size).at_local(kGuard - 1).at_remote(kGuard + 4));
  ASSERT_TRUE(w.ok()) << w.error().to_string();
  for (uint64_t i = 0; i < total; ++i) {
    const bool in = i >= kGuard + 4 && i < kGuard + 4 + size;
    ASSERT_EQ(theirs->data()[i], in ? pattern(i - 3, 31) : pattern(i, 31))
        << (in ? "write, byte " : "write, guard byte ") << i;
  }
  EXPECT_EQ(p.same_host_ops(), 2u);
}

/// Codes of the refusals StreamLaneTest checks over TCP, for one pair of nodes.
std::vector<ErrorCode> refusal_codes(Pair& p) {
  std::vector<ErrorCode> codes;
  Memory theirs(1 << 20, 5), ro(1 << 20, 6);
  BufferHandle remote = remote_view(*p.owner, *p.user, theirs, "errors");
  BufferHandle read_only = remote_view(*p.owner, *p.user, ro, "ro", BufferAccess::kReadOnly);
  RdmaClient me(p.user->node().system(), p.user->manager());
  Memory mine(1 << 20, 1);
  auto local = me.register_buffer(mine.bytes.data(), mine.bytes.size());
  EXPECT_TRUE(local.ok());
  if (!local.ok())
    return codes;
  auto code = [&](const Result<TransferReply>& r) {
    EXPECT_FALSE(r.ok());
    codes.push_back(r.ok() ? ErrorCode::kInternal : r.error().code());
  };
  BufferHandle forged = remote;
  forged.secret_lo ^= 1;
  for (uint64_t n : {uint64_t{16}, uint64_t{1 << 19}}) {
    code(me.read(local->handle(), remote, Range::of(n).at_remote((1 << 20) - 8)));
    code(me.read(local->handle(), forged, Range::of(n)));
    code(me.write(local->handle(), read_only, Range::of(n)));
  }
  for (uint64_t i = 0; i < (1u << 20); ++i) {
    EXPECT_EQ(theirs.bytes[i], pattern(i, 5));
    EXPECT_EQ(ro.bytes[i], pattern(i, 6));
  }
  RdmaClient owner(p.owner->node().system(), p.owner->manager());
  EXPECT_TRUE(owner.release(remote.id).ok());
  code(me.read(local->handle(), remote, Range::of(16)));
  code(me.read(local->handle(), remote, Range::of(1 << 19)));
  return codes;
}

TEST(SameHostNodesTest, RefusalsGiveTheSameCodesAsOverTcp) {
  Pair same_host(true), tcp(false);
  ASSERT_TRUE(same_host.owner && same_host.user && tcp.owner && tcp.user);
  const auto a = refusal_codes(same_host);
  const auto b = refusal_codes(tcp);
  EXPECT_EQ(a, b);
  const std::vector<ErrorCode> expected{ErrorCode::kOutOfBounds,      ErrorCode::kPermissionDenied,
                                        ErrorCode::kInvalidArgument,  ErrorCode::kOutOfBounds,
                                        ErrorCode::kPermissionDenied, ErrorCode::kInvalidArgument,
                                        ErrorCode::kReleased,         ErrorCode::kReleased};
  EXPECT_EQ(a, expected);
  EXPECT_EQ(tcp.same_host_ops(), 0u);
}

TEST(SameHostNodesTest, SameHostOffKeepsTransfersOnTcp) {
  // The variable, read in one place (ManagerOptions::from_env), known to the environment list.
  Result<ManagerOptions> off = Error(ErrorCode::kInternal, "not read");
  Result<ManagerOptions> bad = Error(ErrorCode::kInternal, "not read");
  {
    ScopedEnv zero(kEnvSameHost, "0");
    off = ManagerOptions::from_env();
    EXPECT_TRUE(unknown_environment_variables().empty());
  }
  {
    ScopedEnv two(kEnvSameHost, "2");
    bad = ManagerOptions::from_env();
  }
  ASSERT_TRUE(off.ok());
  EXPECT_FALSE(off->same_host);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code(), ErrorCode::kInvalidArgument);
  auto on = ManagerOptions::from_env();
  ASSERT_TRUE(on.ok());
  EXPECT_TRUE(on->same_host);
  Pair p(false);
  ASSERT_TRUE(p.owner && p.user);
  Memory theirs(1 << 20, 4);
  BufferHandle remote = remote_view(*p.owner, *p.user, theirs, "tcp-only");
  EXPECT_TRUE(remote.stream_unix.empty());
  RdmaClient me(p.user->node().system(), p.user->manager());
  Memory mine(1 << 20, 0);
  auto local = me.register_buffer(mine.bytes.data(), mine.bytes.size());
  ASSERT_TRUE(local.ok());
  auto r = me.read(local->handle(), remote, Range::of(1 << 20));
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  for (uint64_t i = 0; i < (1u << 20); ++i)
    ASSERT_EQ(mine.bytes[i], pattern(i, 4)) << i;
  EXPECT_EQ(p.same_host_ops(), 0u);
}

}  // namespace
}  // namespace caf_rdma::testing
