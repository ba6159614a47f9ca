// Tests of actors/transfer/path_choice.h: the one place that chooses an op's path. Each case
// names the invariant of path_choice.h it checks. Pure: no actor system, no device.
#include "actors/transfer/path_choice.h"

#include <gtest/gtest.h>

namespace caf_rdma::detail {
namespace {

TransferOp remote_op() {
  TransferOp op;
  op.kind = static_cast<uint8_t>(TransferKind::kWrite);
  op.local.id = 1;
  op.local.owner_name = "here:1";
  op.remote.id = 7;
  op.remote.owner_name = "owner:2";
  op.remote.device = "rxe0";
  op.remote.gid.assign(16, 1);
  return op;
}

/// Everything RDMA needs is there (invariant 1).
PathFacts rdma_ready() {
  PathFacts f;
  f.mode = TransportMode::kAuto;
  f.has_device = true;
  f.local_registered = true;
  f.remote_registered = true;
  f.same_fabric = true;
  return f;
}

TEST(PathChoiceTest, Invariant1RdmaWhenEveryConditionHolds) {
  PathChoice c = choose_path(remote_op(), rdma_ready());
  EXPECT_EQ(c.path, PathKind::kRdma);
  EXPECT_TRUE(c.why.empty());
  PathFacts staged = rdma_ready();
  staged.local_staged = true;
  EXPECT_EQ(choose_path(remote_op(), staged).path, PathKind::kRdmaStaged);
}

TEST(PathChoiceTest, Invariant1EachMissingConditionTakesTheFallbackAndSaysWhy) {
  struct Case {
    const char* what;
    void (*unset)(PathFacts&);
    const char* says;
  };
  const Case cases[] = {
      {"no device", [](PathFacts& f) { f.has_device = false, f.no_device_reason = "none here"; },
       "this manager has no RDMA device (none here)"},
      {"port down", [](PathFacts& f) { f.port_down = "port 1 down"; },
       "its RDMA port is down (port 1 down)"},
      {"local unregistered", [](PathFacts& f) { f.local_registered = false; },
       "has no registration on the reopened device"},
      {"remote unregistered", [](PathFacts& f) { f.remote_registered = false; },
       "without an RDMA device"},
      {"remote staged", [](PathFacts& f) { f.remote_staged = true; },
       "so only its owner can move it"},
      {"other fabric", [](PathFacts& f) { f.same_fabric = false; }, "another kind of fabric"},
      {"rerouted", [](PathFacts& f) { f.rdma_lost = "the device went away"; },
       "the device went away"},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(k.what);
    PathFacts f = rdma_ready();
    k.unset(f);
    PathChoice c = choose_path(remote_op(), f);
    EXPECT_EQ(c.path, PathKind::kChunks);
    EXPECT_NE(c.why.find(k.says), std::string::npos) << c.why;
    EXPECT_EQ(why_not_rdma(remote_op(), f), c.why);
  }
}

TEST(PathChoiceTest, Invariant2OverlappingRangesOfThisNodeAreCopiedEvenWhereRdmaCould) {
  for (TransportMode mode : {TransportMode::kAuto, TransportMode::kRdma}) {
    PathFacts f = rdma_ready();
    f.mode = mode;
    f.same_node = true;
    f.ranges_overlap = true;
    EXPECT_EQ(choose_path(remote_op(), f).path, PathKind::kLocalCopy);
    f.ranges_overlap = false;
    EXPECT_EQ(choose_path(remote_op(), f).path, PathKind::kRdma);
  }
}

TEST(PathChoiceTest, Invariant3RdmaOnlyModeNamesWhyInsteadOfFallingBack) {
  PathFacts f = rdma_ready();
  f.mode = TransportMode::kRdma;
  f.same_fabric = false;
  PathChoice c = choose_path(remote_op(), f);
  EXPECT_EQ(c.path, PathKind::kNone);
  EXPECT_EQ(c.code, ErrorCode::kNoDevice);
  EXPECT_NE(c.why.find(std::string(kEnvTransport) + "=rdma forbids the fallback"),
            std::string::npos)
      << c.why;
  EXPECT_NE(c.why.find("another kind of fabric"), std::string::npos) << c.why;
}

TEST(PathChoiceTest, Invariant4TheFallbackIsALocalCopyTheStreamOrChunks) {
  PathFacts f = rdma_ready();
  f.mode = TransportMode::kFallback;
  EXPECT_EQ(choose_path(remote_op(), f).path, PathKind::kChunks);
  f.stream_fits = true;
  EXPECT_EQ(choose_path(remote_op(), f).path, PathKind::kStream);
  f.same_node = true;  // both buffers this node's: its own copy, never a stream to itself
  EXPECT_EQ(choose_path(remote_op(), f).path, PathKind::kLocalCopy);
}

TEST(PathChoiceTest, Invariant1DeviceFactsSeeTheRemoteHandleAndThisManagersPort) {
  TransferOp op = remote_op();
  op.remote.ethernet = true;
  PathFacts f = device_facts(op, TransportMode::kAuto, true, "", "", true);
  EXPECT_TRUE(f.remote_registered);
  EXPECT_FALSE(f.remote_staged);
  EXPECT_TRUE(f.same_fabric);
  EXPECT_FALSE(device_facts(op, TransportMode::kAuto, true, "", "", false).same_fabric);
  PathFacts none = device_facts(op, TransportMode::kAuto, false, "no device here", "", true);
  EXPECT_FALSE(none.same_fabric);
  none.local_registered = true;
  EXPECT_EQ(why_not_rdma(op, none), "this manager has no RDMA device (no device here)");
  op.remote.memory = static_cast<uint8_t>(BufferMemory::kGpuStaged);
  EXPECT_TRUE(device_facts(op, TransportMode::kAuto, true, "", "", true).remote_staged);
  op.remote.gid.clear();  // registered without a device
  EXPECT_FALSE(device_facts(op, TransportMode::kAuto, true, "", "", true).remote_registered);
}

TEST(PathChoiceTest, Invariant5AtomicsNeedADeviceWithAtomicCap) {
  TransferOp op = remote_op();
  op.kind = wire_kind(TransferKind::kFetchAdd);
  PathFacts f = rdma_ready();
  f.device = "fake0";
  f.device_atomics = false;  // a device whose atomic_cap is IBV_ATOMIC_NONE
  PathChoice c = choose_path(op, f);
  EXPECT_EQ(c.path, PathKind::kNone);
  EXPECT_EQ(c.code, ErrorCode::kInvalidArgument);
  EXPECT_NE(c.why.find("atomic_cap"), std::string::npos) << c.why;
  EXPECT_NE(c.why.find("fake0"), std::string::npos) << c.why;
  EXPECT_NE(c.why.find("fetch-add"), std::string::npos) << c.why;
  op.kind = wire_kind(TransferKind::kCompareSwap);
  EXPECT_EQ(choose_path(op, f).path, PathKind::kNone);
  f.device_atomics = true;
  EXPECT_EQ(choose_path(op, f).path, PathKind::kRdma);
  // Reads and writes do not care.
  f.device_atomics = false;
  EXPECT_EQ(choose_path(remote_op(), f).path, PathKind::kRdma);
}

TEST(PathChoiceTest, Invariant4AtomicsNeverTakeTheStreamChannel) {
  TransferOp op = remote_op();
  op.kind = wire_kind(TransferKind::kFetchAdd);
  PathFacts f;
  f.mode = TransportMode::kFallback;
  f.stream_fits = true;  // even when told it fits
  EXPECT_EQ(choose_path(op, f).path, PathKind::kChunks);
  f.same_node = true;
  EXPECT_EQ(choose_path(op, f).path, PathKind::kLocalCopy);
}

/// A read of 4 KiB between host memory of two nodes, the owner's stream channel named, neither
/// handle with RDMA, and a stream lane whose manager's threshold is 4 KiB (invariant 6).
LaneFacts stream_lane_op() {
  LaneFacts f;
  f.kind = wire_kind(TransferKind::kRead);
  f.owners_known = true;
  f.local_host = true;
  f.remote_host = true;
  f.remote_stream = true;
  f.bytes = 4096;
  f.stream_min_bytes = 4096;
  return f;
}

TEST(PathChoiceTest, Invariant6TheStreamLaneTakesWhatTheManagerWouldStreamAndNothingElse) {
  EXPECT_EQ(lane_path(stream_lane_op()), PathKind::kStream);
  LaneFacts write = stream_lane_op();
  write.kind = wire_kind(TransferKind::kWrite);
  EXPECT_EQ(lane_path(write), PathKind::kStream);
  // The manager's threshold, to the byte: one byte less goes to the manager (CAF messages).
  LaneFacts small = stream_lane_op();
  small.bytes = 4095;
  EXPECT_EQ(lane_path(small), PathKind::kNone);
  EXPECT_FALSE(stream_size_fits(4095, 4096));
  EXPECT_TRUE(stream_size_fits(4096, 4096));
  EXPECT_FALSE(stream_size_fits(1ull << 40, 0)) << "0: never the stream channel";
  struct Case {
    const char* what;
    void (*change)(LaneFacts&);
  };
  const Case to_the_manager[] = {
      {"no stream lane", [](LaneFacts& f) { f.stream_min_bytes = 0; }},
      {"a notify write",
       [](LaneFacts& f) { f.kind = wire_kind(TransferKind::kWrite), f.notify = true; }},
      {"a fetch-add", [](LaneFacts& f) { f.kind = wire_kind(TransferKind::kFetchAdd); }},
      {"a compare-swap", [](LaneFacts& f) { f.kind = wire_kind(TransferKind::kCompareSwap); }},
      {"an owner unknown", [](LaneFacts& f) { f.owners_known = false; }},
      {"this node's own buffer", [](LaneFacts& f) { f.same_node = true; }},
      {"local GPU memory", [](LaneFacts& f) { f.local_host = false; }},
      {"remote GPU memory", [](LaneFacts& f) { f.remote_host = false; }},
      {"no stream channel named", [](LaneFacts& f) { f.remote_stream = false; }},
  };
  for (const Case& c : to_the_manager) {
    SCOPED_TRACE(c.what);
    LaneFacts f = stream_lane_op();
    c.change(f);
    EXPECT_EQ(lane_path(f), PathKind::kNone);
  }
}

TEST(PathChoiceTest, Invariant6ADirectLaneTakesWhatBothHandlesShowRdmaFor) {
  LaneFacts f = stream_lane_op();
  f.local_rdma = true;
  f.remote_rdma = true;
  EXPECT_EQ(lane_path(f), PathKind::kRdma);
  f.bytes = 1;  // no threshold for RDMA
  EXPECT_EQ(lane_path(f), PathKind::kRdma);
  f.same_node = true;  // a direct lane may loop back to this node's own buffers
  EXPECT_EQ(lane_path(f), PathKind::kRdma);
  f.remote_staged = true;  // only its owner can move it
  EXPECT_EQ(lane_path(f), PathKind::kNone);
  // One side without RDMA: RDMA's is not the path (invariant 1), the stream lane's may be.
  LaneFacts one = stream_lane_op();
  one.remote_rdma = true;
  EXPECT_EQ(lane_path(one), PathKind::kStream);
  LaneFacts atomic = stream_lane_op();
  atomic.local_rdma = atomic.remote_rdma = true;
  atomic.kind = wire_kind(TransferKind::kFetchAdd);
  EXPECT_EQ(lane_path(atomic), PathKind::kNone) << "atomics go through the manager";
}

TEST(PathChoiceTest, Invariant7AnOpIsStripedOnlyWhenLargeEnoughPlainRemoteBulkAndWithSeveralQps) {
  StripeFacts f;
  f.bytes = 4 << 20;
  f.stripe_min_bytes = 4 << 20;
  f.rails = 1;
  EXPECT_TRUE(striped(f)) << "at the threshold, both sides with a rail";
  StripeFacts one_device = f;
  one_device.rails = 0;
  one_device.several_qps = true;
  EXPECT_TRUE(striped(one_device)) << "stripe_qps > 1 stripes over the one device";
  struct Case {
    const char* what;
    void (*change)(StripeFacts&);
  };
  const Case whole[] = {
      {"one byte under the threshold", [](StripeFacts& x) { x.bytes = x.stripe_min_bytes - 1; }},
      {"no threshold (0)", [](StripeFacts& x) { x.stripe_min_bytes = 0; }},
      {"a notify write (its fence orders one queue pair)", [](StripeFacts& x) { x.notify = true; }},
      {"this node's own buffers", [](StripeFacts& x) { x.same_node = true; }},
      {"no rail on both sides, one queue pair per device", [](StripeFacts& x) { x.rails = 0; }},
      {"a latency or background op (its class's queue pair)",
       [](StripeFacts& x) { x.bulk = false; }},
  };
  for (const Case& c : whole) {
    SCOPED_TRACE(c.what);
    StripeFacts x = f;
    c.change(x);
    EXPECT_FALSE(striped(x));
  }
}

TEST(PathChoiceTest, Invariant7TheRailsBothSidesHaveAreCountedFromTheirRegistrations) {
  // A buffer is on every rail of its manager or on none (manager/rails.h invariant 18).
  EXPECT_EQ(shared_rails(2, 2), 2u);
  EXPECT_EQ(shared_rails(2, 3), 2u) << "the owner has more rails: the ones both have";
  EXPECT_EQ(shared_rails(0, 2), 0u) << "the local buffer is on no rail: none";
  EXPECT_EQ(shared_rails(2, 0), 0u) << "the remote one is on none: none";
}

TEST(PathChoiceTest, Invariant7ABatchCountsItsBulkReadsAndWritesOfAnExplicitLengthTogether) {
  TransferOp w = remote_op();
  w.length = 4096;
  EXPECT_TRUE(counts_together(w));
  TransferOp r = w;
  r.kind = static_cast<uint8_t>(TransferKind::kRead);
  EXPECT_TRUE(counts_together(r));
  TransferOp notify = w;
  notify.notify = true;
  EXPECT_FALSE(counts_together(notify)) << "a notify write is never striped";
  TransferOp add = w;
  add.kind = static_cast<uint8_t>(TransferKind::kFetchAdd);
  EXPECT_FALSE(counts_together(add)) << "an atomic";
  TransferOp whole = w;
  whole.length = kWholeSpan;
  EXPECT_FALSE(counts_together(whole)) << "a whole span (the manager counts explicit lengths)";
  TransferOp urgent = w;
  urgent.priority = static_cast<uint8_t>(Priority::kLatency);
  EXPECT_FALSE(counts_together(urgent)) << "a latency-class op runs whole on its class's pair";
}

TEST(PathChoiceTest, RepliesNameThePathThatMovedTheBytes) {
  EXPECT_STREQ(reply_path(PathKind::kRdma), kPathRdma);
  EXPECT_STREQ(reply_path(PathKind::kRdmaStaged), kPathRdmaStaged);
  for (PathKind k : {PathKind::kLocalCopy, PathKind::kChunks, PathKind::kStream})
    EXPECT_STREQ(reply_path(k), kPathFallback);
}

}  // namespace
}  // namespace caf_rdma::detail
