// Transfers between processes, and what happens when the peer process is killed mid-transfer.
// Built twice like manager_test: fallback (native) and rdma (rdma-tagged, in the VM; the peer
// then runs on the other device, rxe1, so the bytes cross the veth wire).
#include <gtest/gtest.h>

#include <signal.h>

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "actors/rdma_client.h"
#include "primitives/device_list.h"
#include "support/child_process.h"
#include "tests/actors/manager_fixture.h"
#include "tests/rdma_test.h"

namespace caf_rdma::testing {
namespace {

std::string peer_binary() {
  return runfile("tests/actors/peer_node");
}

class CrossProcessTest : public ::testing::Test {
protected:
  void SetUp() override {
    if (expected_path() == kPathRdma && !rdma_skip_reason().empty())
      GTEST_SKIP() << rdma_skip_reason();
    node_ = start_node();
    ASSERT_TRUE(node_);
  }

  /// Starts a peer process; returns its port.
  uint16_t start_peer(std::optional<ChildProcess>* out, uint64_t size, uint32_t seed) {
    std::vector<std::string> env;
    if (expected_path() == kPathRdma)
      env.push_back("CAF_RDMA_DEVICE=rxe1");  // the other end of the wire, when it exists
    auto list = DeviceList::get();
    if (!env.empty() && !(list.ok() && list->size() >= 2)) {
      // One device: both processes use it (no wire crossed). The VM has two: there it is an error.
      const char* require = std::getenv("CAF_RDMA_REQUIRE_DEVICE");
      EXPECT_FALSE(require != nullptr && std::string(require) == "1")
          << "rxe1 missing: the peer would share this process's device";
      std::printf(
          "note: one RDMA device only, the peer shares it (no second device to cross to)\n");
      env.clear();
    }
    auto c = ChildProcess::start({peer_binary(), std::to_string(size), std::to_string(seed)}, env);
    EXPECT_TRUE(c.ok()) << c.error().to_string();
    if (!c.ok())
      return 0;
    auto line = c->read_line(std::chrono::seconds(60));
    EXPECT_TRUE(line.ok() && line->rfind("READY ", 0) == 0)
        << (line.ok() ? *line : line.error().to_string());
    out->emplace(std::move(*c));
    return line.ok() ? static_cast<uint16_t>(std::stoul(line->substr(6))) : 0;
  }

  BufferHandle peer_buffer(uint16_t port) {
    auto mgr = node_->node().remote_manager("127.0.0.1", port);
    EXPECT_TRUE(mgr.ok()) << mgr.error().to_string();
    if (!mgr.ok())
      return {};
    RdmaClient remote(node_->node().system(), *mgr);
    auto h = remote.get("peer-buffer", 10000);
    EXPECT_TRUE(h.ok()) << h.error().to_string();
    return h.ok() ? *h : BufferHandle{};
  }

  std::unique_ptr<TestNode> node_;
};

TEST_F(CrossProcessTest, ReadWriteAcrossProcessesThenSurviveThePeersDeath) {
  constexpr uint64_t kSize = 8 << 20;
  std::optional<ChildProcess> peer;
  uint16_t port = start_peer(&peer, kSize, 5);
  ASSERT_NE(port, 0);
  BufferHandle remote = peer_buffer(port);
  ASSERT_EQ(remote.size, kSize);
  EXPECT_EQ(remote.owner_name, "127.0.0.1:" + std::to_string(port));

  // Read the peer's pattern, write our own, read it back.
  Memory mine(kSize), back(kSize), src(kSize, 77);
  auto hm = node_->request_buffer(mine);
  auto hb = node_->request_buffer(back);
  auto hs = node_->request_buffer(src);
  ASSERT_TRUE(hm && hb && hs);
  auto r = node_->transfer(make_read(*hm, remote));
  ASSERT_TRUE(r) << error_message(r.error());
  EXPECT_EQ(r->path, expected_path());
  for (uint64_t i = 0; i < kSize; ++i)
    ASSERT_EQ(mine.bytes[i], static_cast<uint8_t>(i * 7 + 5)) << "byte " << i;
  auto w = node_->transfer(make_write(*hs, remote));
  ASSERT_TRUE(w) << error_message(w.error());
  ASSERT_TRUE(node_->transfer(make_read(*hb, remote)));
  EXPECT_EQ(back.bytes, src.bytes);
  // On one host the fallback's stream transfers take the peer's same-host endpoint by default
  // (docs/architecture.md, "Same-host transfers"; off with CAF_RDMA_SAME_HOST=0).
  if (expected_path() == kPathFallback && ManagerOptions::from_env()->same_host) {
    EXPECT_GE(node_->stats().same_host_ops, 3u);
  }

  // Kill the peer while transfers are in flight: each fails with the peer's name, none hangs.
  std::atomic<bool> stop{false};
  std::mutex mu;
  std::vector<caf::error> errors;
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  threads.reserve(4);
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      caf::scoped_actor self{node_->node().system()};
      while (!stop) {
        bool failed = false;
        self->request(node_->manager(), std::chrono::seconds(60), transfer_atom::value,
                      make_write(*hs, remote), uint32_t{20000})
            .receive([&](TransferReply&) { ++ok; },
                     [&](caf::error& e) {
                       std::lock_guard<std::mutex> g(mu);
                       errors.push_back(e);
                       failed = true;
                     });
        if (failed)
          break;
      }
    });
  EXPECT_TRUE(node_->wait_busy()) << "the writes never started";
  peer->kill(SIGKILL);
  for (auto& th : threads)
    th.join();
  stop = true;
  ASSERT_EQ(errors.size(), 4u);
  for (auto& e : errors) {
    EXPECT_EQ(error_code(e), ErrorCode::kPeerUnavailable) << error_message(e);
    EXPECT_NE(error_message(e).find("127.0.0.1:" + std::to_string(port)), std::string::npos)
        << error_message(e);
  }
  std::printf("%d transfers completed before the kill\n", ok.load());

  // A restarted peer is reachable without restarting this node.
  std::optional<ChildProcess> peer2;
  uint16_t port2 = start_peer(&peer2, kSize, 9);
  ASSERT_NE(port2, 0);
  BufferHandle remote2 = peer_buffer(port2);
  auto r2 = node_->transfer(make_read(*hm, remote2));
  ASSERT_TRUE(r2) << error_message(r2.error());
  EXPECT_EQ(r2->path, expected_path());
  for (uint64_t i = 0; i < kSize; ++i)
    ASSERT_EQ(mine.bytes[i], static_cast<uint8_t>(i * 7 + 9)) << "byte " << i;
}

}  // namespace
}  // namespace caf_rdma::testing
