// Connection budgets of a node without TLS (actors/plain_transport.h). Trust, third pass,
// finding 6: 1100 silent connections to a plaintext node's CAF port used up its 1024 fds; its
// stream reads then timed out and new nodes could not connect. The owner runs in a process of
// its own with 384 fds (prlimit), so that the flood is measured against its own limit.
#include <gtest/gtest.h>

#include <caf/all.hpp>

#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "actors/rdma_client.h"
#include "support/child_process.h"
#include "tests/actors/manager_fixture.h"
#include "tests/silent_flood.h"

namespace caf_rdma::testing {
namespace {

constexpr uint64_t kOwnerBytes = 4 << 20;
constexpr uint32_t kSeed = 9;

// 1100 silent connections from four addresses to an owner allowed 384 fds: each address keeps
// at most 64 silent ones and a newcomer shuts the oldest of its own (invariant 2), so the flood
// completes, and a node connecting afterwards reads the owner's buffer through CAF chunks and
// through the stream channel, every byte checked.
TEST(ConnectionBudgetTest, ASilentFloodOnThePlaintextPortKeepsNoNodeOut) {
  ASSERT_TRUE(allow_fds(1400).ok());
  auto c = ChildProcess::start(
      {"/usr/bin/prlimit", "--nofile=384:384", runfile("tests/security/memory_owner"),
       std::to_string(kOwnerBytes), std::to_string(kSeed), std::to_string(16 << 20),
       std::to_string(64 << 20), "30000"},
      {"CAF_RDMA_TRANSPORT=fallback"});
  ASSERT_TRUE(c.ok()) << c.error().to_string();
  auto line = c->read_line(std::chrono::seconds(60));
  ASSERT_TRUE(line.ok() && line->rfind("READY ", 0) == 0)
      << (line.ok() ? *line : line.error().to_string());
  const auto port = static_cast<uint16_t>(std::stoul(line->substr(6)));
  auto flood = silent_flood(port, {"127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"}, 1100);
  ASSERT_TRUE(flood.ok()) << flood.error().to_string();
  for (uint64_t stream_min : {uint64_t{0}, uint64_t{1}}) {
    SCOPED_TRACE(stream_min == 0 ? "CAF chunks" : "the stream channel");
    NodeOptions o;
    auto env = ManagerOptions::from_env();
    ASSERT_TRUE(env.ok()) << env.error().to_string();
    o.manager = *env;
    o.manager.stream_min_bytes = stream_min;  // 0: chunks only
    auto started = RdmaNode::start(o);
    ASSERT_TRUE(started.ok()) << started.error().to_string();
    auto reader = std::make_unique<TestNode>(std::move(*started));
    auto mgr = reader->node().remote_manager("127.0.0.1", port);
    ASSERT_TRUE(mgr.ok()) << "a node could not connect after the flood: "
                          << mgr.error().to_string();
    RdmaClient client(reader->node().system(), *mgr);
    auto remote = client.get("owner-buffer", 10000);
    ASSERT_TRUE(remote.ok()) << remote.error().to_string();
    Memory mine(kOwnerBytes, 0);
    auto local = reader->request_buffer(mine);
    ASSERT_TRUE(local);
    auto r = reader->transfer(make_read(*local, *remote), 30000);
    ASSERT_TRUE(r) << error_message(r.error());
    for (uint64_t i = 0; i < kOwnerBytes; ++i)
      ASSERT_EQ(mine.bytes[i], static_cast<uint8_t>(i * 7 + kSeed)) << "byte " << i;
    EXPECT_EQ(reader->stats().stream_ops, stream_min == 0 ? 0u : 1u);
  }
}

}  // namespace
}  // namespace caf_rdma::testing
