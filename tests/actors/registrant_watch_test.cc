// Leak accounting (actors/manager/registrant_watch.h): the stats say which actor holds which
// live registrations, an actor that ends holding two is named with both in one warning, with
// release_orphans they are released then, and a RegisteredBuffer that outlives the client that
// made it is not taken for a leak. Built for both transports (pinned bytes only with RDMA).
#include <gtest/gtest.h>

#include <caf/all.hpp>

#include <optional>
#include <string>

#include "actors/rdma_client.h"
#include "tests/actors/manager_fixture.h"
#include "tests/rdma_test.h"

namespace caf_rdma::testing {
namespace {

using namespace std::chrono_literals;

bool on_rdma() {
  return expected_path() == std::string(kPathRdma);
}

class RegistrantWatchTest : public ::testing::Test {
protected:
  void SetUp() override {
    if (on_rdma() && !rdma_skip_reason().empty())
      GTEST_SKIP() << rdma_skip_reason();
  }
};

/// An actor of the node that registers `a` and `b`, says what it holds, and ends.
struct Holder {
  BufferHandle first, second;
  uint64_t actor_id = 0;
  RegistrantStats seen;  ///< its entry in the stats while it lived
};

Holder register_two_and_end(TestNode& node, const Memory& a, const Memory& b) {
  Holder h;
  caf::scoped_actor holder{node.node().system()};
  h.actor_id = holder->id();
  auto ask = [&](const Memory& m, BufferHandle& out) {
    holder
        ->request(node.manager(), 10s, request_buffer_atom::value, m.addr(), m.bytes.size(),
                  uint8_t{1})
        .receive([&](BufferHandle& got) { out = std::move(got); },
                 [&](caf::error& e) { ADD_FAILURE() << error_message(e); });
  };
  ask(a, h.first);
  ask(b, h.second);
  for (const RegistrantStats& r : node.stats().registrants)
    if (r.actor_id == h.actor_id)
      h.seen = r;
  return h;  // `holder` ends here, holding both
}

// Invariants 1 and 2: the stats count both buffers for the actor; its end names it and both
// (once its grace is over, here 100 ms).
TEST_F(RegistrantWatchTest, AnActorThatEndsHoldingTwoRegistrationsIsNamedWithBoth) {
  ManagerOptions extra;
  extra.orphan_grace = 100ms;
  auto node = start_node(extra);
  ASSERT_TRUE(node);
  Memory a(4096, 1), b(12288, 2);
  const uint64_t before = node->stats().registered_buffers;
  ::testing::internal::CaptureStderr();
  Holder h = register_two_and_end(*node, a, b);
  ManagerStats s = node->wait_stats([](const ManagerStats& x) { return x.orphaned_buffers >= 2; });
  std::string said = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(h.seen.actor_id, h.actor_id) << "the registrant was missing from the stats";
  EXPECT_EQ(h.seen.buffers, 2u);
  EXPECT_EQ(h.seen.registered_bytes, 4096u + 12288u);
  EXPECT_EQ(h.seen.pinned_bytes, on_rdma() ? 4096u + 12288u : 0u);
  ASSERT_EQ(s.orphaned_buffers, 2u) << said;
  EXPECT_NE(said.find("actor " + std::to_string(h.actor_id) + " ("), std::string::npos) << said;
  EXPECT_NE(said.find("holding 2 registered buffers it never released"), std::string::npos) << said;
  EXPECT_NE(said.find("buffer " + std::to_string(h.first.id) + " (4096 bytes at "),
            std::string::npos)
      << said;
  EXPECT_NE(said.find("buffer " + std::to_string(h.second.id) + " (12288 bytes at "),
            std::string::npos)
      << said;
  EXPECT_NE(said.find("they stay registered"), std::string::npos) << said;
  // Without release_orphans they stay registered, and usable by whoever holds their handles.
  EXPECT_EQ(s.registered_buffers, before + 2);
  for (const RegistrantStats& r : s.registrants)
    EXPECT_NE(r.actor_id, h.actor_id) << "an ended actor is still listed";
  Memory dst(4096);
  auto mine = node->request_buffer(dst);
  ASSERT_TRUE(mine) << error_message(mine.error());
  auto r = node->transfer(make_read(*mine, h.first, Range::of(4096)));
  ASSERT_TRUE(r) << error_message(r.error());
  EXPECT_EQ(dst.bytes, a.bytes);
}

// Invariant 2 with release_orphans: the buffers are released at the actor's end.
TEST_F(RegistrantWatchTest, ReleaseOrphansReleasesThemWhenTheirActorEnds) {
  ManagerOptions extra;
  extra.release_orphans = true;
  extra.orphan_grace = 0ms;
  auto node = start_node(extra);
  ASSERT_TRUE(node);
  Memory a(4096, 3), b(8192, 4);
  const uint64_t before = node->stats().registered_buffers;
  ::testing::internal::CaptureStderr();
  Holder h = register_two_and_end(*node, a, b);
  ManagerStats s = node->wait_stats([&](const ManagerStats& x) {
    return x.orphaned_buffers >= 2 && x.registered_buffers == before;
  });
  std::string said = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(s.registered_buffers, before) << said;
  EXPECT_NE(said.find("released now"), std::string::npos) << said;
  auto again = node->release(h.second.id);
  ASSERT_FALSE(again);
  EXPECT_EQ(error_code(again.error()), ErrorCode::kReleased) << error_message(again.error());
}

// Invariant 3 and RegisteredBuffer invariant 4: releasing forgets the registrant; a
// RegisteredBuffer is its own registrant, so the end of the client that made it is no leak.
TEST_F(RegistrantWatchTest, ARegisteredBufferOutlivingItsClientIsNoLeak) {
  auto node = start_node();
  ASSERT_TRUE(node);
  Memory m(16384, 5);
  ::testing::internal::CaptureStderr();
  std::optional<RegisteredBuffer> kept;
  {
    RdmaClient client(node->node().system(), node->manager());
    auto reg = client.register_buffer(m.bytes.data(), m.bytes.size());
    ASSERT_TRUE(reg.ok()) << reg.error().to_string();
    kept.emplace(std::move(*reg));
  }  // the client (and its actor) ends; the registration lives on in `kept`
  ManagerStats s = node->stats();
  size_t listed = 0;
  for (const RegistrantStats& r : s.registrants)
    listed += r.buffers == 1 && r.registered_bytes == 16384 ? 1 : 0;
  EXPECT_EQ(listed, 1u) << "the RegisteredBuffer's registration is not listed once";
  ASSERT_TRUE(kept->release().ok());
  s = node->stats();
  std::string said = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(s.orphaned_buffers, 0u) << said;
  EXPECT_EQ(said.find("never released"), std::string::npos) << said;
  for (const RegistrantStats& r : s.registrants)
    EXPECT_NE(r.registered_bytes, 16384u) << "a released buffer is still counted";
}

// Invariant 2: an actor's end that the node's own end follows within the grace (a program
// leaving main(): its clients go just before its node) is not reported.
TEST_F(RegistrantWatchTest, AProgramLeavingMainIsNotWarnedAbout) {
  ManagerOptions extra;
  extra.orphan_grace = std::chrono::minutes(10);
  auto node = start_node(extra);
  ASSERT_TRUE(node);
  Memory a(4096, 6), b(4096, 7);
  ::testing::internal::CaptureStderr();
  (void)register_two_and_end(*node, a, b);
  EXPECT_EQ(node->stats().orphaned_buffers, 0u) << "reported within its grace";
  node.reset();  // the node stops, its manager with it
  std::string said = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(said.find("never released"), std::string::npos) << said;
}

}  // namespace
}  // namespace caf_rdma::testing
