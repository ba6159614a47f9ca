// ServedLedger (actors/manager/served_ledger.h): one row per requester, path and kind that adds
// up requests and bytes; requesters named per path up to kMaxTelemetryPeers, the rest under
// kOtherPeers, without one path's names taking another's room (invariant 3); records from many
// threads at once all counted (invariant 1).
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "actors/manager/served_ledger.h"

namespace caf_rdma {
namespace {

TrafficCount row_of(const std::vector<TrafficCount>& rows, const std::string& peer,
                    const std::string& path, uint8_t kind) {
  for (const auto& r : rows)
    if (r.peer == peer && r.path == path && r.kind == kind)
      return r;
  return {};
}

TEST(ServedLedgerTest, RowsAddUpPerRequesterPathAndKind) {
  ServedLedger ledger;
  const uint8_t rd = wire_kind(TransferKind::kRead), wr = wire_kind(TransferKind::kWrite);
  const uint8_t fa = wire_kind(TransferKind::kFetchAdd);
  ledger.record("10.0.0.1", kServedStream, rd, 4096);
  ledger.record("10.0.0.1", kServedStream, rd, 100);
  ledger.record("10.0.0.1", kServedStream, wr, 7);
  ledger.record("A#1", kServedChunks, fa, 0);
  auto rows = ledger.rows();
  ASSERT_EQ(rows.size(), 3U);
  EXPECT_EQ(row_of(rows, "10.0.0.1", kServedStream, rd).ops, 2U);
  EXPECT_EQ(row_of(rows, "10.0.0.1", kServedStream, rd).bytes, 4196U);
  EXPECT_EQ(row_of(rows, "10.0.0.1", kServedStream, wr).bytes, 7U);
  EXPECT_EQ(row_of(rows, "A#1", kServedChunks, fa).ops, 1U);
  EXPECT_EQ(row_of(rows, "A#1", kServedChunks, fa).bytes, 0U);
}

TEST(ServedLedgerTest, RequestersBeyondTheBoundCountAsOtherWithinTheirPathOnly) {
  ServedLedger ledger;
  const uint8_t rd = wire_kind(TransferKind::kRead);
  for (size_t i = 0; i < kMaxTelemetryPeers + 10; ++i)
    ledger.record("node" + std::to_string(i), kServedChunks, rd, 1);
  ledger.record("node0", kServedChunks, rd, 1);     // named before the bound: still itself
  ledger.record("10.0.0.9", kServedStream, rd, 5);  // another path has its own room
  auto rows = ledger.rows();
  size_t chunk_rows = 0;
  for (const auto& r : rows)
    chunk_rows += r.path == kServedChunks ? 1 : 0;
  EXPECT_EQ(chunk_rows, kMaxTelemetryPeers + 1) << "the named ones and `other`";
  EXPECT_EQ(row_of(rows, kOtherPeers, kServedChunks, rd).ops, 10U);
  EXPECT_EQ(row_of(rows, "node0", kServedChunks, rd).ops, 2U);
  EXPECT_EQ(row_of(rows, "10.0.0.9", kServedStream, rd).bytes, 5U);
}

TEST(ServedLedgerTest, ManyThreadsRecordingAtOnceAreAllCounted) {
  ServedLedger ledger;
  constexpr int kThreads = 8, kEach = 5000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&ledger, t] {
      for (int i = 0; i < kEach; ++i)
        ledger.record(t % 2 == 0 ? "a" : "b", t % 3 == 0 ? kServedSameHost : kServedStream,
                      wire_kind(TransferKind::kWrite), 3);
    });
  for (auto& th : threads)
    th.join();
  uint64_t ops = 0, bytes = 0;
  for (const auto& r : ledger.rows()) {
    ops += r.ops;
    bytes += r.bytes;
  }
  EXPECT_EQ(ops, uint64_t{kThreads} * kEach);
  EXPECT_EQ(bytes, 3 * uint64_t{kThreads} * kEach);
}

}  // namespace
}  // namespace caf_rdma
