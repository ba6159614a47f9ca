// A list posted again allocates nothing per range (actors/transfer_plan.h invariant 2, on the
// stream channel both sides of which run in this process): the allocations of one list
// request, counted by replacing the global operator new, do not grow with its ranges (only
// its table's and staging's (or pieces') buffers, one of each per side, and what a
// connection costs).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <vector>

#include "components/same_host.h"
#include "components/stream_client.h"
#include "components/stream_protocol.h"
#include "components/stream_server.h"

namespace {

std::atomic<uint64_t> g_allocations{0};

}  // namespace

void* operator new(std::size_t n) {
  ++g_allocations;
  if (void* p = std::malloc(n == 0 ? 1 : n))
    return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}

namespace caf_rdma {
namespace {

using namespace std::chrono_literals;

TEST(StreamListAllocTest, APostedListAllocatesNothingPerRange) {
  std::vector<uint8_t> pool(8 << 20, 7);
  StreamServer::Limits limits;
  limits.same_host = true;
  auto server = StreamServer::start("127.0.0.1", limits);
  ASSERT_TRUE(server.ok()) << server.error().to_string();
  (*server)->set_authorizer([&](const StreamRequest& req) -> Result<StreamServer::HandleGrant> {
    StreamServer::HandleGrant g;
    g.addr = pool.data() + req.handle.offset;
    g.done = [](const Status&, uint64_t) {};
    return g;
  });
  for (bool same_host : {false, true}) {
    SCOPED_TRACE(same_host ? "same-host" : "tcp");
    StreamClient client(1, nullptr, same_host);
    // Allocations of one request of `count` 256-byte ranges (every other block of the pool),
    // after a first one that opened the connection.
    auto allocations = [&](uint32_t count) {
      std::vector<ListEntry> entries(count);
      for (uint32_t i = 0; i < count; ++i)
        entries[i] = ListEntry{uint64_t{i} * 512, uint64_t{i} * 256, 256};
      std::vector<uint8_t> mine(uint64_t{count} * 256);
      StreamJob job;
      job.host = (*server)->host();
      job.port = (*server)->port();
      job.unix_name = same_host_endpoint((*server)->host_id(), (*server)->unix_name());
      job.by_handle = true;
      job.handle = HandleAccess{1, 0, 0, 0, 10000};
      job.direction = StreamDirection::kOutOfOwner;
      job.addr = mine.data();
      job.length = entries.back().offset + 256;
      job.entries = entries.data();
      job.count = count;
      job.total = uint64_t{count} * 256;
      job.deadline = std::chrono::steady_clock::now() + 10s;
      EXPECT_TRUE(client.run_now(job).status.ok());  // the connection, pooled from here on
      const uint64_t before = g_allocations.load();
      StreamEnd end = client.run_now(job);
      const uint64_t used = g_allocations.load() - before;
      EXPECT_TRUE(end.status.ok()) << end.status.error().to_string();
      for (uint32_t i = 0; i < count; ++i)
        EXPECT_EQ(mine[uint64_t{i} * 256], 7) << "range " << i;
      return used;
    };
    const uint64_t small = allocations(16);
    const uint64_t large = allocations(kMaxListRanges);
    std::printf("%s: one request of 16 ranges made %llu allocations, of %u ranges %llu\n",
                same_host ? "same-host" : "tcp", static_cast<unsigned long long>(small),
                kMaxListRanges, static_cast<unsigned long long>(large));
    // The same handful whatever the count: not one per range (16384 here).
    EXPECT_LE(large, small + 8) << "16 ranges: " << small << " allocations, " << kMaxListRanges
                                << " ranges: " << large;
    EXPECT_LT(large, 64u);
  }
}

}  // namespace
}  // namespace caf_rdma
