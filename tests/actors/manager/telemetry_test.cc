// Telemetry (actors/manager/telemetry.h): rows per peer, path and kind; errors by code and the
// work-completion status read from the message; histograms count successes (invariant 3);
// peers beyond kMaxTelemetryPeers count as kOtherPeers (invariant 4); merge adds rows up.
#include <gtest/gtest.h>

#include <string>

#include "actors/manager/telemetry.h"
#include "primitives/log.h"

namespace caf_rdma {
namespace {

OpSample ok(const std::string& peer, uint8_t kind, uint64_t bytes, std::chrono::microseconds t) {
  OpSample s;
  s.peer = peer;
  s.path = kPathRdma;
  s.kind = kind;
  s.ok = true;
  s.bytes = bytes;
  s.latency = t;
  return s;
}

TEST(TelemetryTest, CountsPerPeerPathAndKindWithHistogramsOfTheSuccesses) {
  Telemetry t;
  const uint8_t w = wire_kind(TransferKind::kWrite);
  t.record(ok("a:1", w, 100, std::chrono::microseconds(5)));     // first bucket (10 us)
  t.record(ok("a:1", w, 28, std::chrono::microseconds(20000)));  // 25 ms
  t.record(ok("b:2", w, 1, std::chrono::seconds(60)));           // +Inf
  OpSample bad;
  bad.peer = "a:1";
  bad.kind = w;
  bad.code = ErrorCode::kWorkCompletion;
  bad.message =
      "write refused: work request 9 on rxe0 (QP 17) completed with status remote "
      "access error (10, vendor syndrome 0x0)";
  t.record(bad);
  auto s = t.snapshot();
  ASSERT_EQ(s.traffic.size(), 2U);
  EXPECT_EQ(s.traffic[0].peer, "a:1");
  EXPECT_EQ(s.traffic[0].ops, 2U);
  EXPECT_EQ(s.traffic[0].bytes, 128U);
  ASSERT_EQ(s.errors.size(), 1U);
  EXPECT_EQ(s.errors[0].path, kNoPath);
  EXPECT_EQ(s.errors[0].code, "work_completion");
  EXPECT_EQ(s.errors[0].wc_status, "remote access error");
  ASSERT_EQ(s.latencies.size(), 1U);
  const auto& h = s.latencies[0];
  EXPECT_EQ(h.count, 3U);  // invariant 3: the error is not in it
  ASSERT_EQ(h.buckets.size(), kLatencyBuckets);
  EXPECT_EQ(h.buckets.front(), 1U);
  EXPECT_EQ(h.buckets.back(), 1U);
  Telemetry::merge(s, t.snapshot());
  EXPECT_EQ(s.traffic[0].ops, 4U);
  EXPECT_EQ(s.errors[0].count, 2U);
  EXPECT_EQ(s.latencies[0].count, 6U);
}

TEST(TelemetryTest, PeersBeyondTheBoundCountAsOther) {
  Telemetry t;
  for (size_t i = 0; i < kMaxTelemetryPeers + 10; ++i)
    t.record(ok("peer" + std::to_string(i), 0, 1, std::chrono::microseconds(1)));
  auto s = t.snapshot();
  EXPECT_EQ(s.traffic.size(), kMaxTelemetryPeers + 1);
  uint64_t other = 0;
  for (const auto& r : s.traffic)
    other += r.peer == kOtherPeers ? r.ops : 0;
  EXPECT_EQ(other, 10U);
}

// Invariant 6: at debug level each op recorded is one line (kind, bytes, peer, path, time, or
// its error); below it, none.
TEST(TelemetryTest, EachOpIsOneDebugLineAndNoneBelowDebug) {
  const LogLevel before = log_level();
  Telemetry t;
  OpSample bad;
  bad.peer = "b:2";
  bad.kind = wire_kind(TransferKind::kRead);
  bad.code = ErrorCode::kOutOfBounds;
  bad.message = "offset 8 length 8 does not fit buffer 3";
  set_log_level(LogLevel::kDebug);
  ::testing::internal::CaptureStderr();
  t.record(ok("a:1", wire_kind(TransferKind::kWrite), 4096, std::chrono::microseconds(53)));
  t.record(bad);
  // A notify write says so, with its tag (it is not a plain write).
  OpSample notified = ok("a:1", wire_kind(TransferKind::kWrite), 64, std::chrono::microseconds(9));
  notified.notify = true;
  notified.tag = 17;
  t.record(notified);
  std::string said = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(said,
            "caf-rdma debug: write of 4096 bytes to a:1 via rdma-direct: done in 53 us\n"
            "caf-rdma debug: read from b:2 via no path: failed in 0 us: out_of_bounds: offset 8 "
            "length 8 does not fit buffer 3\n"
            "caf-rdma debug: notify write (tag 17) of 64 bytes to a:1 via rdma-direct: done in "
            "9 us, its owner notified\n");
  set_log_level(LogLevel::kInfo);
  ::testing::internal::CaptureStderr();
  t.record(bad);
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
  set_log_level(before);
}

}  // namespace
}  // namespace caf_rdma
