// Busy polling (ManagerOptions::busy_poll, CAF_RDMA_BUSY_POLL_US): the option's bounds, what a
// node started with it sets up (its CAF workers spin instead of sleeping, its RdmaClients spin
// for their replies), and that every byte still arrives through the manager with it on: 8-byte
// ops (polled inline by the manager, for up to the window) and larger ones, both lanes.
// Figures (how much it saves) are the bench's: rdma_bench --paths actor-busy.
#include <gtest/gtest.h>

#include <caf/all.hpp>

#include <cstring>
#include <vector>

#include "actors/rdma_client.h"
#include "actors/rdma_node.h"
#include "tests/actors/manager_fixture.h"
#include "tests/actors/two_node_test.h"
#include "tests/scoped_env.h"

namespace caf_rdma::testing {
namespace {

TEST(BusyPollOptionTest, TheEnvironmentSetsTheWindowWithinItsBound) {
  {
    ScopedEnv on(kEnvBusyPoll, "250");
    auto o = ManagerOptions::from_env();
    ASSERT_TRUE(o.ok()) << o.error().to_string();
    EXPECT_EQ(o->busy_poll, std::chrono::microseconds(250));
  }
  {
    ScopedEnv off(kEnvBusyPoll, "0");
    auto o = ManagerOptions::from_env();
    ASSERT_TRUE(o.ok()) << o.error().to_string();
    EXPECT_EQ(o->busy_poll.count(), 0);
  }
  ScopedEnv big(kEnvBusyPoll, std::to_string(kMaxBusyPollUs + 1));
  auto o = ManagerOptions::from_env();
  ASSERT_FALSE(o.ok());
  EXPECT_NE(o.error().message().find(kEnvBusyPoll), std::string::npos) << o.error().message();
  EXPECT_NE(o.error().message().find(std::to_string(kMaxBusyPollUs)), std::string::npos)
      << o.error().message();
}

class BusyPollTest : public TwoNodeTest {};

TEST_F(BusyPollTest, ANodeWithAWindowHasSpinningWorkersAndTellsItsClients) {
  ManagerOptions busy;
  busy.busy_poll = std::chrono::microseconds(700);
  auto on = start_node(busy);
  auto off = start_node();
  ASSERT_TRUE(on && off);
  const auto& cfg = on->node().system().config();
  EXPECT_EQ(caf::get_or(cfg, kBusyPollSetting, size_t{0}), 700u);
  EXPECT_EQ(caf::get_or(cfg, "work-stealing.moderate-sleep-duration", caf::timespan{1}),
            caf::timespan{0});
  EXPECT_GT(caf::get_or(cfg, "work-stealing.moderate-poll-attempts", size_t{0}), 700u);
  // Off by default: CAF's own strategy, and clients block at once.
  EXPECT_EQ(caf::get_or(off->node().system().config(), kBusyPollSetting, size_t{0}), 0u);
  EXPECT_NE(caf::get_or(off->node().system().config(), "work-stealing.moderate-sleep-duration",
                        caf::defaults::work_stealing::moderate_sleep_duration),
            caf::timespan{0});
}

// Every op through the manager (no direct lane), from a client of the busy node: 8-byte
// writes and reads in turn (each read sees the write before it), then 4 KiB and 1 MiB.
TEST_F(BusyPollTest, EveryByteArrivesThroughTheManagerWithBusyPollingOn) {
  ManagerOptions busy;
  busy.busy_poll = std::chrono::microseconds(2000);
  auto me = start_node(busy);
  ASSERT_TRUE(me);
  Memory theirs(1 << 20);
  BufferHandle target = remote_view(*owner_, *me, theirs, "busy");
  ASSERT_NE(target.id, 0u);
  Memory mine(1 << 20, 7);
  RdmaClient client(me->node().system(), me->manager(), /*direct=*/false);
  auto h = client.request_buffer(mine.bytes.data(), mine.bytes.size());
  ASSERT_TRUE(h.ok()) << h.error().to_string();
  for (uint32_t i = 0; i < 200; ++i) {
    uint64_t value = 0x0101010101010101ull * (i % 251) + i;
    std::memcpy(mine.bytes.data(), &value, 8);
    auto w = client.write(*h, target, Range::of(8), std::chrono::seconds(10));
    ASSERT_TRUE(w.ok()) << "write " << i << ": " << w.error().to_string();
    EXPECT_EQ(w->path, expected_path());
    std::memset(mine.bytes.data() + 8, 0, 8);
    auto r = client.read(*h, target, Range::of(8).at_local(8), std::chrono::seconds(10));
    ASSERT_TRUE(r.ok()) << "read " << i << ": " << r.error().to_string();
    uint64_t got = 0;
    std::memcpy(&got, mine.bytes.data() + 8, 8);
    ASSERT_EQ(got, value) << "read " << i;
    std::memcpy(&got, theirs.bytes.data(), 8);
    ASSERT_EQ(got, value) << "owner's bytes after write " << i;
  }
  for (uint64_t n : {uint64_t{4096}, uint64_t{1} << 20}) {
    Memory src(n, static_cast<uint32_t>(n));
    std::memcpy(mine.bytes.data(), src.bytes.data(), n);
    auto w = client.write(*h, target, Range::of(n), std::chrono::seconds(20));
    ASSERT_TRUE(w.ok()) << w.error().to_string();
    EXPECT_TRUE(holds_pattern(theirs, 0, n, static_cast<uint32_t>(n), 0));
    std::memset(mine.bytes.data(), 0, n);
    auto r = client.read(*h, target, Range::of(n), std::chrono::seconds(20));
    ASSERT_TRUE(r.ok()) << r.error().to_string();
    EXPECT_TRUE(holds_pattern(mine, 0, n, static_cast<uint32_t>(n), 0));
  }
  auto stats = client.stats();
  ASSERT_TRUE(stats.ok()) << stats.error().to_string();
  EXPECT_EQ(stats->direct_ops, 0u);
}

// Takes every request and never answers it (its promises stay open until it exits).
struct NeverAnswers {
  std::vector<caf::response_promise> held;
};
caf::behavior never_answers(caf::stateful_actor<NeverAnswers>* self) {
  self->set_default_handler(
      [self](caf::scheduled_actor*, caf::message_view&) -> caf::result<caf::message> {
        self->state.held.push_back(self->make_response_promise());
        return caf::delegated<caf::message>{};
      });
  return {[](int) {}};
}

// A client of a busy node arms CAF's request timeout only when its spin found no reply
// (RdmaClient::call): a manager that never answers still ends the call at its timeout.
TEST_F(BusyPollTest, AClientOfABusyNodeStillTimesOutWhenNobodyAnswers) {
  ManagerOptions busy;
  busy.busy_poll = std::chrono::microseconds(500);
  auto me = start_node(busy);
  ASSERT_TRUE(me);
  auto mute = me->node().system().spawn(never_answers);
  RdmaClient client(me->node().system(), caf::actor_cast<rdma_manager_actor>(mute),
                    /*direct=*/false, std::chrono::milliseconds(300));
  for (int i = 0; i < 2; ++i) {  // the second call after a timed-out first
    auto t0 = std::chrono::steady_clock::now();
    auto stats = client.stats();
    auto took = std::chrono::steady_clock::now() - t0;
    ASSERT_FALSE(stats.ok());
    EXPECT_EQ(stats.error().code(), ErrorCode::kTimeout) << stats.error().to_string();
    EXPECT_LT(took, std::chrono::seconds(20));  // its own 300 ms, not forever (loaded CI)
  }
  caf::anon_send_exit(mute, caf::exit_reason::user_shutdown);
}

}  // namespace
}  // namespace caf_rdma::testing
