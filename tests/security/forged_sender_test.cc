// Forged senders (docs/security.md): CAF 0.17's BASP resolves the sender of a routed
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

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <deque>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "actors/rdma_client.h"
#include "actors/rdma_manager_actor.h"
#include "components/secure_random.h"
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
  /// `io_limit` bounds each of its sends and reads: a flood waits on a victim that reads
  /// slowly (an emulated guest takes minutes over 34,816 frames).
  std::optional<RawBaspClient> connect_raw(
      TestNode* to = nullptr, std::chrono::milliseconds io_limit = std::chrono::seconds(10)) {
    TestNode& n = to != nullptr ? *to : *victim_;
    std::string err;
    auto c =
        RawBaspClient::connect(n.node().system(), "127.0.0.1", n.node().port(), io_limit, &err);
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

  /// Memory that outlives the victim: a case that floods the victim's mailbox with writes into
  /// a buffer registers this, so that a case ended early (a failed assertion) never leaves
  /// writes still queued at the victim into memory already freed.
  Memory& memory_beyond_the_victim(uint64_t n, uint32_t seed = 0) {
    return kept_.emplace_back(n, seed);
  }

  std::deque<Memory> kept_;  ///< before victim_: destroyed after it
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

// Exit messages from the network, CAF's `kill` included (which no actor can ignore once it is
// in its mailbox), do not stop the facade: it drops them before its mailbox (facade invariant
// 4), counts them, and goes on serving peers; the manager behind it serves its node.
TEST_F(ForgedSenderTest, ExitMessagesFromTheNetworkStopNeitherTheFacadeNorTheManager) {
  auto c = connect_raw();
  ASSERT_TRUE(c);
  std::string err;
  const caf::actor_id published = c->published_actor();
  const caf::actor_id manager = victim_->manager()->id();
  auto exit = [](caf::exit_reason why) {
    return caf::make_message(caf::exit_msg{caf::actor_addr{}, caf::make_error(why)});
  };
  const uint64_t before = victim_->stats().facade_dropped;
  caf::scoped_actor watcher{victim_->node().system()};
  auto facade = victim_->node().system().registry().get(published);
  ASSERT_NE(facade, nullptr);
  watcher->monitor(facade);
  ASSERT_TRUE(c->send_direct(9, published, caf::make_message_id(),
                             exit(caf::exit_reason::user_shutdown), &err))
      << err;
  ASSERT_TRUE(
      c->send_direct(9, published, caf::make_message_id(), exit(caf::exit_reason::kill), &err))
      << err;
  ASSERT_TRUE(c->send_routed(c->server_node(), published, published, caf::make_message_id(),
                             exit(caf::exit_reason::kill), &err))
      << err;
  ASSERT_TRUE(c->send_routed(c->server_node(), published, manager, caf::make_message_id(),
                             exit(caf::exit_reason::kill), &err))
      << err;
  barrier(*c, 1);  // the facade took every frame before and still answers
  EXPECT_EQ(victim_->stats().facade_dropped, before + 3) << "the three exit messages to the facade";
  bool down = false;
  watcher->receive([&](caf::down_msg&) { down = true; },
                   caf::after(std::chrono::milliseconds(0)) >> [] {});
  EXPECT_FALSE(down) << "the facade stopped";
  // A peer node still reads through the facade, every byte checked...
  auto peer = start_node();
  ASSERT_TRUE(peer);
  Memory theirs(8192, 4);
  BufferHandle remote = remote_view(*victim_, *peer, theirs, "after-kill");
  ASSERT_NE(remote.id, 0u);
  Memory into(8192, 0);
  auto local = peer->request_buffer(into);
  ASSERT_TRUE(local) << error_message(local.error());
  auto r = peer->transfer(make_read(*local, remote));
  ASSERT_TRUE(r) << error_message(r.error());
  EXPECT_EQ(into.bytes, theirs.bytes);
  // ...and the manager serves its node.
  Memory a(8192, 5), b(8192, 0);
  auto ha = victim_->request_buffer(a);
  ASSERT_TRUE(ha) << error_message(ha.error());
  auto hb = victim_->request_buffer(b);
  ASSERT_TRUE(hb) << error_message(hb.error());
  auto w = victim_->transfer(make_write(*ha, *hb));
  ASSERT_TRUE(w) << error_message(w.error());
  EXPECT_EQ(a.bytes, b.bytes);
}

// Forged answers (facade invariant 6). CAF 0.17 matches an answer to its request by message id
// alone, and the facade's request ids are small sequential numbers: a peer that sprays "answers"
// over them put its bytes into the victim's reads (about 1 read in 20 under a spray) and failed
// others with errors of its choosing. Now every request is sealed with a nonce the answer must
// carry, from the node asked.
/// What an attacker sends under response id `id`: bytes of its own (with a nonce of its own, and
/// without one), errors (sealed with a nonce of its own, and not), and CAF's request timeout.
std::vector<caf::message> forgeries() {
  ByteChunk bytes = ByteChunk::allocate(4096);
  std::memset(bytes.owned.get(), 0xEE, 4096);
  PeerNonce guess{0x1234, 0x5678};
  auto forged_error = make_rdma_error(ErrorCode::kReleased, "forged by the attacker");
  return {caf::make_message(bytes, guess), caf::make_message(bytes),
          caf::make_message(forged_error, guess), caf::make_message(forged_error),
          caf::make_message(caf::make_error(caf::sec::request_timeout))};
}

TEST_F(ForgedSenderTest, ForgedAnswersNeverBecomeTheAnswer) {
  // 1. One read held at a stand-in owner: the only request the facade awaits. Every forgery
  //    under every early response id, as the facade itself (the registry resolves it: its node
  //    is the node asked); each that meets the awaited id is dropped and counted, and the read
  //    ends with the owner's bytes. On a node forced to the fallback (the stand-in speaks the
  //    fallback's fetch; the facade is the same on every transport).
  NodeOptions fo;
  fo.manager.mode = TransportMode::kFallback;
  fo.manager.stream_min_bytes = 0;  // the stand-in speaks only the chunks' fetch, not grants
  auto started = RdmaNode::start(fo);
  ASSERT_TRUE(started.ok()) << started.error().to_string();
  TestNode fb(std::move(*started));
  auto& sys = fb.node().system();
  auto asked = std::make_shared<std::promise<void>>();
  auto asked_future = asked->get_future();
  auto owner = sys.spawn(held_fetch_owner, asked, 61);
  Memory into(4096, 0), fake(4096, 0);
  auto local = fb.request_buffer(into);
  ASSERT_TRUE(local) << error_message(local.error());
  BufferHandle remote = owned_by_mute(*local, owner, fake);
  caf::scoped_actor self{sys};
  auto pending = self->request(fb.manager(), std::chrono::seconds(60), transfer_atom::value,
                               make_read(*local, remote), uint32_t{30000});
  ASSERT_EQ(asked_future.wait_for(std::chrono::seconds(30)), std::future_status::ready)
      << "the read never reached the stand-in owner";
  auto c = connect_raw(&fb);
  ASSERT_TRUE(c);
  const caf::node_id victim = c->server_node();
  const caf::actor_id published = c->published_actor();
  const uint64_t before = fb.stats().forged_answers;
  const auto forged = forgeries();
  std::string err;
  for (uint64_t id = 1; id <= 64; ++id)
    for (const auto& m : forged)
      ASSERT_TRUE(c->send_routed(victim, published, published,
                                 caf::make_message_id(id).response_id(), m, &err))
          << err;
  barrier(*c, 1000);
  // The awaited id is among 1..64 (the facade's first requests): each forgery under it counted.
  EXPECT_EQ(fb.stats().forged_answers, before + forged.size());
  caf::anon_send(owner, stand_in_go_atom::value);
  bool done = false;
  pending.receive(
      [&](TransferReply& r) {
        done = true;
        EXPECT_EQ(r.bytes, 4096u);
      },
      [&](caf::error& e) { ADD_FAILURE() << "the read failed: " << error_message(e); });
  ASSERT_TRUE(done);
  for (uint64_t i = 0; i < 4096; ++i)
    ASSERT_EQ(into.bytes[i], pattern(i, 61)) << "byte " << i << " is not the owner's";
  caf::anon_send_exit(owner, caf::exit_reason::user_shutdown);

  // 2. Reads from a real peer in a loop while a second connection sprays forgeries that claim
  //    that peer's node and facade over the facade's id window: no read takes the attacker's
  //    bytes or errors.
  auto peer = start_node();
  ASSERT_TRUE(peer);
  Memory theirs(4096, 62);
  BufferHandle from_peer = remote_view(*peer, *victim_, theirs, "sprayed");
  ASSERT_NE(from_peer.id, 0u);
  const caf::node_id peer_node = from_peer.owner.node();
  const caf::actor_id peer_facade = from_peer.owner.id();
  auto sprayer = connect_raw();
  ASSERT_TRUE(sprayer);
  const caf::actor_id victim_facade = sprayer->published_actor();
  Memory mine(4096, 0);
  auto into_victim = victim_->request_buffer(mine);
  ASSERT_TRUE(into_victim) << error_message(into_victim.error());
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> sprayed{0};
  std::thread spray([&] {
    std::string e;
    for (uint64_t round = 0; !stop.load(); ++round)
      for (uint64_t id = 1; id <= 600 && !stop.load(); ++id)
        for (const auto& m : forged) {
          if (!sprayer->send_routed(peer_node, peer_facade, victim_facade,
                                    caf::make_message_id(id).response_id(), m, &e))
            return;
          sprayer->drain(&e);
          ++sprayed;
        }
  });
  const uint64_t mid = victim_->stats().forged_answers;
  int wrong = 0, failed = 0;
  for (int i = 0; i < 300; ++i) {
    std::fill(mine.bytes.begin(), mine.bytes.end(), 0);
    auto r = victim_->transfer(make_read(*into_victim, from_peer));
    if (!r) {
      ++failed;
      ADD_FAILURE() << "read " << i << " failed: " << error_message(r.error());
      continue;
    }
    if (mine.bytes != theirs.bytes)
      ++wrong;
  }
  stop = true;
  spray.join();
  EXPECT_EQ(wrong, 0) << "reads that took the attacker's bytes";
  EXPECT_EQ(failed, 0) << "reads failed by forged errors";
  EXPECT_GT(sprayed.load(), 0u);
  std::printf("sprayed %llu forged answers during 300 reads: %llu dropped as forged\n",
              static_cast<unsigned long long>(sprayed.load()),
              static_cast<unsigned long long>(victim_->stats().forged_answers - mid));
}

// The same for a question RdmaClient asks another node's facade (here a directory lookup that
// waits for its name): forged handles sprayed at the victim's actors under early response ids,
// claiming the asked node, never become the answer (a forged handle would send the victim's
// bytes to the attacker's buffer).
TEST_F(ForgedSenderTest, ForgedAnswersToRdmaClientsQuestionsAreSkipped) {
  auto peer = start_node();
  ASSERT_TRUE(peer);
  Memory theirs(4096, 63);
  auto real = peer->request_buffer(theirs);
  ASSERT_TRUE(real) << error_message(real.error());
  auto facade = victim_->node().remote_manager("127.0.0.1", peer->node().port());
  ASSERT_TRUE(facade.ok()) << facade.error().to_string();
  const caf::node_id peer_node = facade->node();
  const caf::actor_id peer_facade = facade->id();
  BufferHandle evil = *real;
  evil.addr = reinterpret_cast<uint64_t>(g_secret);
  evil.secret_lo ^= 1;
  std::promise<Result<BufferHandle>> got;
  auto got_future = got.get_future();
  std::thread asker([&] {
    RdmaClient client(victim_->node().system(), *facade);
    got.set_value(client.get("late", 20000));
  });
  auto c = connect_raw();
  ASSERT_TRUE(c);
  std::string err;
  const PeerNonce guess{1, 2};
  uint64_t sprayed = 0;
  for (int round = 0; round < 2; ++round)
    for (caf::actor_id dest = 1; dest <= 64; ++dest)
      for (uint64_t id = 1; id <= 8; ++id)
        for (const auto& m : {caf::make_message(evil), caf::make_message(evil, guess)}) {
          ASSERT_TRUE(c->send_routed(peer_node, peer_facade, dest,
                                     caf::make_message_id(id).response_id(), m, &err))
              << err;
          ++sprayed;
        }
  barrier(*c, 5000);
  // And at the asked node's facade: "answers" claiming to be its manager's, sent by a third node
  // that claims the asker (its node and actors) and the asker's request ids. The facade forwards
  // under ids of its own drawn at random, so none of these is taken for its manager's answer
  // (it would seal and send it to the asker with the asker's nonce).
  std::string perr;
  auto at_owner = RawBaspClient::connect(peer->node().system(), "127.0.0.1", peer->node().port(),
                                         std::chrono::seconds(10), &perr);
  ASSERT_TRUE(at_owner.has_value()) << perr;
  const caf::node_id victim_node = victim_->node().system().node();
  const uint64_t dropped_before = peer->stats().facade_dropped;
  uint64_t claimed = 0;
  for (caf::actor_id src = 1; src <= 64; ++src)
    for (uint64_t id = 1; id <= 8; ++id) {
      ASSERT_TRUE(at_owner->send_routed(victim_node, src, at_owner->published_actor(),
                                        caf::make_message_id(id), caf::make_message(evil), &perr))
          << perr;
      ++claimed;
    }
  barrier(*at_owner, 5000);
  EXPECT_EQ(peer->stats().facade_dropped, dropped_before + claimed)
      << "a forged 'answer of the manager' was taken by the asked node's facade";
  Status put = RdmaClient(peer->node().system(), peer->manager()).put("late", *real);
  ASSERT_TRUE(put.ok()) << put.error().to_string();
  ASSERT_EQ(got_future.wait_for(std::chrono::seconds(60)), std::future_status::ready);
  asker.join();
  auto h = got_future.get();
  ASSERT_TRUE(h.ok()) << h.error().to_string();
  EXPECT_EQ(h->addr, real->addr) << "the client took a forged handle (" << sprayed << " sprayed)";
  EXPECT_EQ(h->secret_lo, real->secret_lo);
  EXPECT_EQ(h->id, real->id);
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

// Trust, third pass, finding 3: notices were bounded per writing node as the sender states it,
// and a peer routing notices "from" node ids it invents (17 of them, 1024 each) filled the
// total, so an honest node's notify write then failed resource_exhausted. Notices of nodes the
// middleman does not know as directly connected now hold together at most a kIndirectShare-th
// of the total (write_notices.h invariant 17): the directly connected writer's notify write
// lands, every byte checked, and its notice reaches the watcher.
TEST_F(ForgedSenderTest, InventedNodeIdsHoldAtMostTheIndirectShareOfNotices) {
  Memory& m = memory_beyond_the_victim(64);
  // The honest writer, directly connected, holds a handle of the victim's buffer.
  auto writer = start_node();
  ASSERT_TRUE(writer);
  BufferHandle remote = remote_view(*victim_, *writer, m, "notice-target");
  const BufferRef ref = ref_of(remote);
  // A watcher that never answers: every notice stays pending (until max_timeout).
  caf::scoped_actor watcher{victim_->node().system()};
  RdmaClient owner(victim_->node().system(), victim_->manager());
  ASSERT_TRUE(owner.watch_writes(remote.id, caf::actor_cast<caf::actor>(watcher)).ok());
  auto c = connect_raw(nullptr, std::chrono::seconds(120));
  ASSERT_TRUE(c);
  c->set_read_after_send(false);
  std::string err;
  constexpr int kInvented = 17;
  uint64_t mid = 1;
  for (int n = 0; n < kInvented; ++n) {
    const caf::node_id fake = make_fake_node_id();
    for (uint64_t i = 0; i < kMaxPendingNotices; ++i) {
      // A write of 8 bytes (the zeros the buffer holds) as chunks carrying receipt i + 1, then
      // its notice: the owner saw it land, so only the budgets stop it.
      PeerNonce nonce;
      secure_random(&nonce, sizeof(nonce));
      ByteChunk zeros = ByteChunk::allocate(8);
      std::memset(zeros.owned.get(), 0, 8);
      ASSERT_TRUE(c->send_routed(fake, 4242, c->published_actor(), caf::make_message_id(mid++),
                                 caf::make_message(store_atom::value, ref, uint64_t{0}, zeros,
                                                   i + 1, uint32_t{60000}, nonce),
                                 &err))
          << err;
      secure_random(&nonce, sizeof(nonce));
      ASSERT_TRUE(
          c->send_routed(fake, 4242, c->published_actor(), caf::make_message_id(mid++),
                         caf::make_message(notice_atom::value, ref, uint64_t{0}, uint64_t{8}, i,
                                           i + 1, std::string("inventor"), nonce),
                         &err))
          << err;
    }
  }
  constexpr uint64_t kShare = kMaxPendingNoticesTotal / kIndirectShare;
  const uint64_t sent = kInvented * kMaxPendingNotices;
  ManagerStats s = victim_->wait_stats(
      [&](const ManagerStats& x) { return x.notices_sent + x.notices_refused >= sent; },
      std::chrono::seconds(60));
  EXPECT_EQ(s.notices_sent, kShare) << "invented node ids took more than their share";
  EXPECT_EQ(s.notices_pending, kShare);
  EXPECT_EQ(s.notices_refused, sent - kShare);
  // The honest writer's notify write lands and notifies.
  Memory src(64, 51);
  auto local = writer->request_buffer(src);
  ASSERT_TRUE(local) << error_message(local.error());
  TransferOp op = make_write(*local, remote, 64);
  op.notify = true;
  op.tag = 999999;
  auto w = writer->transfer(op, 20000);
  ASSERT_TRUE(w) << error_message(w.error());
  for (uint64_t i = 0; i < 64; ++i)
    ASSERT_EQ(m.bytes[i], pattern(i, 51)) << "byte " << i;
  bool heard = false;
  bool more = true;
  while (more && !heard)
    watcher->receive(
        [&](write_notice_atom, WriteNotice& n) {
          heard = n.tag == 999999 && n.length == 64 &&
                  n.writer_node == caf::to_string(writer->node().system().node());
        },
        caf::after(std::chrono::seconds(10)) >> [&] { more = false; });
  EXPECT_TRUE(heard) << "the honest writer's notice never reached the watcher";
}

}  // namespace
}  // namespace caf_rdma::testing
