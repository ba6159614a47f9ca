// Forged senders (README "Security model"): CAF 0.17's BASP resolves the sender of a routed
// message that claims the receiving node through the local actor registry, where every actor of
// the node that was ever serialized sits, and it delivers only to actors in that registry. A
// hostile peer that writes BASP frames by hand (RawBaspClient) can therefore make a message look
// as if it came from the victim's published actor. A node that published its manager served
// such a message as its own actor's: it registered memory the attacker named, put names into
// its directory and released its buffers. Now the node publishes a facade; the manager's own
// handle never leaves its process, so nothing from the network reaches it, and the facade
// refuses whatever claims this node.
#include <gtest/gtest.h>

#include <caf/all.hpp>

#include <chrono>
#include <memory>
#include <string>

#include "tests/actors/manager_fixture.h"
#include "tests/rdma_test.h"
#include "tests/security/raw_basp_client.h"

namespace caf_rdma::testing {
namespace {

/// Memory the victim never registered.
uint8_t g_secret[4096];

class ForgedSenderTest : public ::testing::Test {
protected:
  void SetUp() override {
    if (expected_path() == kPathRdma && !rdma_skip_reason().empty())
      GTEST_SKIP() << rdma_skip_reason();
    for (size_t i = 0; i < sizeof(g_secret); ++i)
      g_secret[i] = pattern(i, 91);
    victim_ = start_node();
    ASSERT_TRUE(victim_);
  }

  /// A hostile raw BASP connection to the victim's port.
  std::optional<RawBaspClient> connect_raw() {
    std::string err;
    auto c = RawBaspClient::connect(victim_->node().system(), "127.0.0.1", victim_->node().port(),
                                    std::chrono::seconds(10), &err);
    EXPECT_TRUE(c.has_value()) << err;
    return c;
  }

  /// Sends `stats` to the published actor as an actor of the client's own node (a direct
  /// message, as any peer would) and waits for its answer: the victim handled every frame sent
  /// before (its published actor takes them in order, and answers them only after).
  static void barrier(RawBaspClient& c, uint64_t id) {
    std::string err;
    const caf::actor_id me = 4242;
    ASSERT_TRUE(c.send_direct(me, c.published_actor(), caf::make_message_id(id),
                              caf::make_message(stats_atom::value), &err))
        << err;
    const uint64_t answer = caf::make_message_id(id).response_id().integer_value();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    BaspFrame f;
    while (std::chrono::steady_clock::now() < deadline) {
      ASSERT_TRUE(c.read_frame(&f, std::chrono::seconds(30), &err)) << err;
      if (f.operation == RawBaspClient::kDirectMessage && f.dest_actor == me &&
          f.operation_data == answer)
        return;
    }
    FAIL() << "the victim never answered the barrier request";
  }

  bool secret_intact() const {
    for (size_t i = 0; i < sizeof(g_secret); ++i)
      if (g_secret[i] != pattern(i, 91))
        return false;
    return true;
  }

  std::unique_ptr<TestNode> victim_;
};

TEST_F(ForgedSenderTest, RoutedMessagesClaimingTheVictimsOwnActorsChangeNothing) {
  Memory mine(4096, 3);
  auto h = victim_->request_buffer(mine);
  ASSERT_TRUE(h) << error_message(h.error());
  auto c = connect_raw();
  ASSERT_TRUE(c);
  const caf::node_id victim = c->server_node();
  ASSERT_EQ(victim, victim_->node().system().node());
  const caf::actor_id published = c->published_actor();
  ASSERT_NE(published, caf::actor_id{0});
  ASSERT_NE(published, victim_->manager()->id()) << "the node publishes its manager itself";
  // As the published actor (the registry has it), to the published actor: requests that act on
  // the victim's memory, and the peer protocol, which no manager sends to its own node.
  const auto addr = reinterpret_cast<uint64_t>(g_secret);
  BufferHandle planted = *h;
  planted.addr = addr;
  uint64_t id = 1;
  std::string err;
  auto forge = [&](caf::actor_id dest, const caf::message& m) {
    ASSERT_TRUE(c->send_routed(victim, published, dest, caf::make_message_id(id++), m, &err))
        << err;
  };
  forge(published, caf::make_message(request_buffer_atom::value, addr, uint64_t{sizeof(g_secret)},
                                     uint8_t{1}));
  forge(published, caf::make_message(dir_put_atom::value, std::string("planted"), planted));
  forge(published, caf::make_message(release_buffer_atom::value, h->id));
  forge(published, caf::make_message(lane_drop_atom::value, uint64_t{1}));
  forge(published, caf::make_message(device_gone_atom::value, std::string("forged")));
  // Straight at the manager (actor ids are sequential: an attacker can guess its id).
  const caf::actor_id manager = victim_->manager()->id();
  forge(manager, caf::make_message(request_buffer_atom::value, addr, uint64_t{sizeof(g_secret)},
                                   uint8_t{1}));
  forge(manager, caf::make_message(release_buffer_atom::value, h->id));
  barrier(*c, 1000);
  EXPECT_FALSE(c->peer_closed()) << "the victim dropped the connection instead of refusing";
  // Nothing happened: no registration, no name, the buffer is still live and usable.
  const ManagerStats s = victim_->stats();
  EXPECT_EQ(s.registered_buffers, 1u) << "the attacker registered memory";
  caf::scoped_actor self{victim_->node().system()};
  self->request(victim_->manager(), std::chrono::seconds(10), dir_get_atom::value,
                std::string("planted"), uint32_t{0})
      .receive([](BufferHandle&) { ADD_FAILURE() << "the attacker put a name"; },
               [](caf::error& e) { EXPECT_EQ(error_code(e), ErrorCode::kTimeout); });
  Memory copy(4096, 0);
  auto hc = victim_->request_buffer(copy);
  ASSERT_TRUE(hc) << error_message(hc.error());
  auto r = victim_->transfer(make_read(*hc, *h));
  ASSERT_TRUE(r) << "the attacker released the victim's buffer: " << error_message(r.error());
  EXPECT_EQ(copy.bytes, mine.bytes);
  auto released = victim_->release(h->id);
  ASSERT_TRUE(released) << error_message(released.error());
  EXPECT_EQ(*released, 4096u);
  EXPECT_TRUE(secret_intact());
}

// The same requests by an honest peer (a direct message: the sender is a proxy of the client's
// node) are refused by name, and the connection keeps serving.
TEST_F(ForgedSenderTest, APeersRequestsOnTheVictimsMemoryAreRefusedByName) {
  auto c = connect_raw();
  ASSERT_TRUE(c);
  std::string err;
  const caf::actor_id me = 77;
  const auto addr = reinterpret_cast<uint64_t>(g_secret);
  ASSERT_TRUE(c->send_direct(
      me, c->published_actor(), caf::make_message_id(uint64_t{5}),
      caf::make_message(request_buffer_atom::value, addr, uint64_t{sizeof(g_secret)}, uint8_t{1}),
      &err))
      << err;
  const uint64_t answer = caf::make_message_id(uint64_t{5}).response_id().integer_value();
  BaspFrame f;
  bool got = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!got && std::chrono::steady_clock::now() < deadline) {
    ASSERT_TRUE(c->read_frame(&f, std::chrono::seconds(30), &err)) << err;
    got = f.operation == RawBaspClient::kDirectMessage && f.dest_actor == me &&
          f.operation_data == answer;
  }
  ASSERT_TRUE(got) << "no answer";
  caf::binary_deserializer source{victim_->node().system(), f.payload};
  std::vector<caf::strong_actor_ptr> stages;
  caf::message m;
  ASSERT_FALSE(source(stages, m));
  ASSERT_TRUE(m.match_elements<caf::error>()) << caf::to_string(m);
  const auto& e = m.get_as<caf::error>(0);
  EXPECT_EQ(error_code(e), ErrorCode::kPermissionDenied) << error_message(e);
  EXPECT_NE(error_message(e).find("request_buffer from network proxy 77"), std::string::npos)
      << error_message(e);
  EXPECT_EQ(victim_->stats().registered_buffers, 0u);
  EXPECT_TRUE(secret_intact());
}

// Frames claiming the facade itself as their sender: an answer, an error, a refused request
// would each go back to the facade, which would answer itself again, without end. The facade
// answers only what it owes: each is dropped once, counted, and nothing more happens.
TEST_F(ForgedSenderTest, TheFacadeNeverAnswersItself) {
  auto c = connect_raw();
  ASSERT_TRUE(c);
  std::string err;
  const caf::node_id victim = c->server_node();
  const caf::actor_id published = c->published_actor();
  auto forge = [&](caf::message_id mid, const caf::message& m) {
    ASSERT_TRUE(c->send_routed(victim, published, published, mid, m, &err)) << err;
  };
  const uint64_t before = victim_->stats().facade_dropped;
  forge(caf::make_message_id(), caf::make_message(uint64_t{5}));  // an "answer"
  forge(caf::make_message_id(), caf::make_message(make_rdma_error(ErrorCode::kInternal, "x")));
  forge(caf::make_message_id(uint64_t{3}), caf::make_message(uint64_t{6}));
  forge(caf::make_message_id(uint64_t{4}),
        caf::make_message(request_buffer_atom::value, uint64_t{4096}, uint64_t{64}, uint8_t{1}));
  forge(caf::make_message_id(),
        caf::make_message(fetch_atom::value, BufferRef{}, uint64_t{0}, uint64_t{8}));
  barrier(*c, 100);
  EXPECT_EQ(victim_->stats().facade_dropped, before + 5);
  barrier(*c, 101);  // a loop would go on dropping (or answering) after the first barrier
  EXPECT_EQ(victim_->stats().facade_dropped, before + 5);
  EXPECT_EQ(victim_->stats().registered_buffers, 0u);
}

// Exit messages from the network: an ordinary one does not stop the facade (it goes on
// serving); CAF's `kill`, which no actor can ignore, stops the facade, but not the manager
// behind it (the attacker cannot address it): the node's own actors keep working.
TEST_F(ForgedSenderTest, ExitMessagesFromTheNetworkCannotStopTheManager) {
  auto c = connect_raw();
  ASSERT_TRUE(c);
  std::string err;
  const caf::actor_id published = c->published_actor();
  const caf::actor_id manager = victim_->manager()->id();
  auto exit = [](caf::exit_reason why) {
    return caf::make_message(caf::exit_msg{caf::actor_addr{}, caf::make_error(why)});
  };
  ASSERT_TRUE(c->send_direct(9, published, caf::make_message_id(),
                             exit(caf::exit_reason::user_shutdown), &err))
      << err;
  barrier(*c, 1);  // the facade still answers
  caf::scoped_actor watcher{victim_->node().system()};
  auto facade = victim_->node().system().registry().get(published);
  ASSERT_NE(facade, nullptr);
  watcher->monitor(facade);
  ASSERT_TRUE(c->send_routed(c->server_node(), published, manager, caf::make_message_id(),
                             exit(caf::exit_reason::kill), &err))
      << err;
  ASSERT_TRUE(
      c->send_direct(9, published, caf::make_message_id(), exit(caf::exit_reason::kill), &err))
      << err;
  bool down = false;
  watcher->receive([&](caf::down_msg&) { down = true; },
                   caf::after(std::chrono::seconds(30)) >> [] {});
  ASSERT_TRUE(down) << "the facade survived a kill (CAF lets no actor ignore one)";
  // The manager serves its node: a registration and a transfer whose every byte is checked.
  Memory a(8192, 4), b(8192, 0);
  auto ha = victim_->request_buffer(a);
  ASSERT_TRUE(ha) << error_message(ha.error());
  auto hb = victim_->request_buffer(b);
  ASSERT_TRUE(hb) << error_message(hb.error());
  auto w = victim_->transfer(make_write(*ha, *hb));
  ASSERT_TRUE(w) << error_message(w.error());
  EXPECT_EQ(a.bytes, b.bytes);
}

// A program that connects to every node of a list, its own included, gets its own manager for
// its own address (not the facade, which refuses the node's own requests).
TEST_F(ForgedSenderTest, TheNodesOwnAddressGivesItsManager) {
  auto self_view = victim_->node().remote_manager("127.0.0.1", victim_->node().port());
  ASSERT_TRUE(self_view.ok()) << self_view.error().to_string();
  EXPECT_EQ(*self_view, victim_->manager());
  Memory m(4096, 7);
  caf::scoped_actor self{victim_->node().system()};
  bool registered = false;
  self->request(*self_view, std::chrono::seconds(10), request_buffer_atom::value, m.addr(),
                uint64_t{m.bytes.size()}, uint8_t{1})
      .receive([&](BufferHandle&) { registered = true; },
               [](caf::error& e) { ADD_FAILURE() << error_message(e); });
  EXPECT_TRUE(registered);
}

// The invariant behind both: after a node has done everything a node does with a peer (the
// directory, transfers both ways, stats, peer state; with a device the queue-pair handshake),
// neither node's manager is in its actor registry, i.e. it was never serialized.
TEST_F(ForgedSenderTest, TheManagersOwnHandleNeverLeavesItsProcess) {
  auto peer = start_node();
  ASSERT_TRUE(peer);
  Memory theirs((1 << 20) + 3, 8);
  BufferHandle remote = remote_view(*victim_, *peer, theirs, "theirs");
  ASSERT_NE(remote.id, 0u);
  Memory into((1 << 20) + 3, 0);
  auto local = peer->request_buffer(into);
  ASSERT_TRUE(local) << error_message(local.error());
  auto r = peer->transfer(make_read(*local, remote));
  ASSERT_TRUE(r) << error_message(r.error());
  EXPECT_EQ(into.bytes, theirs.bytes);
  Memory out((1 << 20) + 3, 9);
  auto src = peer->request_buffer(out);
  ASSERT_TRUE(src) << error_message(src.error());
  auto w = peer->transfer(make_write(*src, remote));
  ASSERT_TRUE(w) << error_message(w.error());
  ASSERT_TRUE(victim_->wait_quiet());
  EXPECT_EQ(theirs.bytes, out.bytes);
  caf::scoped_actor self{peer->node().system()};
  self->request(peer->manager(), std::chrono::seconds(10), peer_state_atom::value, remote.owner)
      .receive([](std::string& why) { EXPECT_EQ(why, ""); },
               [](caf::error& e) { ADD_FAILURE() << error_message(e); });
  for (TestNode* n : {victim_.get(), peer.get()}) {
    auto& reg = n->node().system().registry();
    EXPECT_EQ(reg.get(n->manager()->id()), nullptr)
        << n->node().address() << ": the manager's handle went out to the network";
  }
  // What peers know instead: the facade, owner of the node's handles.
  EXPECT_NE(remote.owner.id(), victim_->manager()->id());
  EXPECT_NE(victim_->node().system().registry().get(remote.owner.id()), nullptr);
}

}  // namespace
}  // namespace caf_rdma::testing
