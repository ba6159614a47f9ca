// A node destroyed while an RdmaClient and RegisteredBuffers of it still live (declared before
// the node, as users do by habit): its destructor returns at once and names them on stderr;
// they then do nothing (every call fails with peer_unavailable saying why) and their
// destructors return (actors/detail/node_objects.h). Both transports (fallback natively, rdma
// in the Soft-RoCE VM). A hang is a failure naming the step (a watchdog), not a killed test.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <future>
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include "actors/rdma_client.h"
#include "tests/actors/manager_fixture.h"
#include "tests/rdma_test.h"

namespace caf_rdma::testing {
namespace {

/// Runs `step` on another thread; not done within `limit`: fails, naming it, and ends the
/// process (a hang must not look like a passing or killed test).
template <class Step>
void within(const char* what, std::chrono::seconds limit, Step step) {
  auto done = std::async(std::launch::async, step);
  if (done.wait_for(limit) != std::future_status::ready) {
    std::cerr << "node_shutdown_test: " << what << " did not return within " << limit.count()
              << " s" << std::endl;
    std::_Exit(1);
  }
  done.get();
}

TEST(NodeShutdownTest, ANodeDestroyedBeforeItsClientAndBuffersReturnsNamesThemAndLeavesThemInert) {
  if (expected_path() == kPathRdma && !rdma_skip_reason().empty())
    GTEST_SKIP() << rdma_skip_reason();
  Memory mem(65536, 7);
  // Declared before the node: they go after it.
  std::unique_ptr<RdmaClient> client;
  std::optional<RegisteredBuffer> mine;
  std::optional<RegisteredBuffer> allocated;
  auto node = start_node();
  ASSERT_TRUE(node);
  client = std::make_unique<RdmaClient>(node->node().system(), node->manager());
  auto m = client->register_buffer(mem.bytes.data(), mem.bytes.size());
  ASSERT_TRUE(m.ok()) << m.error().to_string();
  mine.emplace(std::move(*m));
  auto a = client->allocate_buffer(4096);
  ASSERT_TRUE(a.ok()) << a.error().to_string();
  allocated.emplace(std::move(*a));
  // It works before: a local copy of 4 KiB, every byte checked.
  ASSERT_TRUE(client->write(*mine, *allocated, Range::of(4096)).ok());
  for (uint64_t i = 0; i < 4096; ++i)
    ASSERT_EQ(allocated->data()[i], pattern(i, 7)) << "byte " << i;
  const uint64_t mine_id = mine->handle().id;
  const uint64_t allocated_id = allocated->handle().id;

  ::testing::internal::CaptureStderr();
  within("the node's destructor", std::chrono::seconds(60), [&] { node.reset(); });
  const std::string said = ::testing::internal::GetCapturedStderr();
  for (const std::string& frag :
       {std::string("destroyed while 3 object(s) of it lived"), std::string("RdmaClient"),
        "RegisteredBuffer " + std::to_string(mine_id) + " (65536 bytes)",
        "RegisteredBuffer " + std::to_string(allocated_id) + " (4096 bytes)"})
    EXPECT_NE(said.find(frag), std::string::npos) << "stderr: " << said;

  // New bytes at the source: an inert call that moved them would show in `allocated`.
  for (uint64_t i = 0; i < 4096; ++i)
    mem.bytes[i] = pattern(i, 8);
  // Inert: every call fails at once, saying why.
  auto expect_inert = [](const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kPeerUnavailable) << e.to_string();
    EXPECT_NE(e.message().find("RdmaNode was destroyed"), std::string::npos) << e.to_string();
  };
  within("calls of the inert client", std::chrono::seconds(60), [&] {
    auto w = client->write(*mine, *allocated, Range::of(16));
    ASSERT_FALSE(w.ok());
    expect_inert(w.error());
    auto r = client->read(*mine, *allocated, Range::of(16));
    ASSERT_FALSE(r.ok());
    expect_inert(r.error());
    auto s = client->stats();
    ASSERT_FALSE(s.ok());
    expect_inert(s.error());
    auto reg = client->register_buffer(mem.bytes.data(), 64);
    ASSERT_FALSE(reg.ok());
    expect_inert(reg.error());
    auto f = client->write_async(*mine, *allocated, Range::of(16)).get();
    ASSERT_FALSE(f.ok());
    expect_inert(f.error());
    auto n = client->next_notice(std::chrono::seconds(30));
    ASSERT_FALSE(n.ok());
    expect_inert(n.error());
    Status rel = mine->release();
    ASSERT_FALSE(rel.ok());
    expect_inert(rel.error());
  });
  // Nothing moved after the node went: each side holds what it held.
  for (uint64_t i = 0; i < 4096; ++i) {
    ASSERT_EQ(allocated->data()[i], pattern(i, 7)) << "byte " << i;
    ASSERT_EQ(mem.bytes[i], pattern(i, 8)) << "byte " << i;
  }
  within("the inert objects' destructors", std::chrono::seconds(60), [&] {
    allocated.reset();
    mine.reset();
    client.reset();
  });
}

}  // namespace
}  // namespace caf_rdma::testing
