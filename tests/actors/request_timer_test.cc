// actors/request_timer.h: a blocking actor's answered request leaves no timeout behind once
// its timer is cancelled (CAF 0.17 keeps the timer's late error in the mailbox otherwise), and
// RdmaClient's calls cancel theirs.
#include <gtest/gtest.h>

#include <caf/all.hpp>

#include "actors/rdma_client.h"
#include "actors/rdma_node.h"
#include "actors/request_timer.h"

namespace caf_rdma {
namespace {

using tick_atom = caf::atom_constant<caf::atom("tick")>;

caf::behavior echo(caf::event_based_actor*) {
  return {[](int x) { return x; }};
}

// Waits until every timer due within `after` has fired: a delayed message of our own, due
// later on the same clock, comes after them (the clock ships in deadline order).
size_t mailbox_after(caf::scoped_actor& self, std::chrono::milliseconds after) {
  self->delayed_send(self, after, tick_atom::value);
  bool ticked = false;
  self->receive([&](tick_atom) { ticked = true; },
                caf::after(after + std::chrono::seconds(30)) >> [] {});
  EXPECT_TRUE(ticked);
  self->mailbox().flush_cache();
  return self->mailbox().size();
}

TEST(RequestTimerTest, AnAnsweredRequestLeavesNoTimeoutBehind) {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  auto e = sys.spawn(echo);
  caf::scoped_actor self{sys};
  for (int i = 0; i < 100; ++i) {
    auto h = self->request(e, std::chrono::milliseconds(50), i);
    int got = -1;
    h.receive([&](int x) { got = x; }, [](caf::error&) {});
    cancel_request_timer(self.ptr(), h.id());
    ASSERT_EQ(got, i);
  }
  EXPECT_EQ(mailbox_after(self, std::chrono::milliseconds(200)), 0u);
  caf::anon_send_exit(e, caf::exit_reason::user_shutdown);
}

// The same through RdmaClient, whose scoped_actor lives as long as it does: 100 answered
// calls with a 50 ms reply timeout leave its mailbox empty after their timers' deadlines (the
// probe's own 200 ms timer, on the same clock, fires after theirs).
TEST(RequestTimerTest, RdmaClientCallsLeaveNoTimeoutBehind) {
  auto node = RdmaNode::start();
  ASSERT_TRUE(node.ok()) << node.error().to_string();
  RdmaClient client((*node)->system(), (*node)->manager(), /*direct=*/false,
                    std::chrono::milliseconds(50));
  for (int i = 0; i < 100; ++i) {
    auto stats = client.stats();
    ASSERT_TRUE(stats.ok()) << stats.error().to_string();
  }
  caf::scoped_actor probe{(*node)->system()};
  mailbox_after(probe, std::chrono::milliseconds(200));
  EXPECT_EQ(client.waiting_messages(), 0u);
  auto again = client.stats();  // and it still works
  EXPECT_TRUE(again.ok()) << again.error().to_string();
}

}  // namespace
}  // namespace caf_rdma
