// actors/request_timer.h: a blocking actor's answered request leaves no timeout behind once
// its timer is ended (CAF 0.17 keeps the timer's late error in the mailbox otherwise).
// Each late error is looked for by its request's answer id, with a receive that takes only it
// and does not wait.
#include <gtest/gtest.h>

#include <caf/all.hpp>

#include <vector>

#include "actors/request_timer.h"

namespace caf_rdma {
namespace {

using tick_atom = caf::atom_constant<caf::atom("tick")>;

caf::behavior echo(caf::event_based_actor*) {
  return {[](int x) { return x; }};
}

// Answers to `ids` still in `self`'s mailbox, after every timer due within `after` fired: a
// delayed message of our own, due later on the same clock, comes after them.
size_t late_answers(caf::scoped_actor& self, const std::vector<caf::message_id>& ids,
                    std::chrono::milliseconds after) {
  self->delayed_send(self, after, tick_atom::value);
  bool ticked = false;
  self->receive([&](tick_atom) { ticked = true; },
                caf::after(after + std::chrono::seconds(30)) >> [] {});
  EXPECT_TRUE(ticked);
  size_t late = 0;
  for (auto id : ids) {
    caf::blocking_actor::accept_one_cond one;
    self->varargs_receive(
        one, id, [&](int) { ++late; }, [&](caf::error&) { ++late; },
        caf::after(std::chrono::seconds(0)) >> [] {});
  }
  return late;
}

constexpr auto kTimeout = std::chrono::milliseconds(200);

// 100 requests to `e`; the answer ids of those answered in time (a request that timed out
// under load may still get its real answer later: that one is not a timer's).
std::vector<caf::message_id> ask(caf::scoped_actor& self, const caf::actor& e, bool end_timer) {
  std::vector<caf::message_id> ids;
  for (int i = 0; i < 100; ++i) {
    auto h = self->request(e, kTimeout, i);
    int got = -1;
    if (end_timer)
      receive_answer(
          self.ptr(), h, [&](int x) { got = x; }, [](caf::error&) {});
    else
      h.receive([&](int x) { got = x; }, [](caf::error&) {});
    if (got == i)
      ids.push_back(h.id());
  }
  EXPECT_FALSE(ids.empty()) << "no request answered within " << kTimeout.count() << " ms";
  return ids;
}

TEST(RequestTimerTest, AnAnsweredRequestLeavesNoTimeoutBehind) {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  auto e = sys.spawn(echo);
  caf::scoped_actor self{sys};
  auto ids = ask(self, e, true);
  EXPECT_EQ(late_answers(self, ids, 2 * kTimeout), 0u);
  // What it prevents: without ending the timers, each answered request's timeout comes later.
  ids = ask(self, e, false);
  EXPECT_EQ(late_answers(self, ids, 2 * kTimeout), ids.size());
  caf::anon_send_exit(e, caf::exit_reason::user_shutdown);
}

}  // namespace
}  // namespace caf_rdma
