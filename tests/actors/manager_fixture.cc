// Test helpers for RdmaManagerActor (manager_fixture.h): what is not a template.
#include "tests/actors/manager_fixture.h"

namespace caf_rdma::testing {

::testing::AssertionResult holds_pattern(const Memory& m, uint64_t offset, uint64_t n,
                                         uint32_t seed, uint64_t src_offset) {
  for (uint64_t i = 0; i < n; ++i)
    if (m.bytes[offset + i] != pattern(src_offset + i, seed))
      return ::testing::AssertionFailure()
             << "byte " << offset + i << " is " << int(m.bytes[offset + i]) << ", expected "
             << int(pattern(src_offset + i, seed));
  return ::testing::AssertionSuccess();
}

TestNode::TestNode(std::unique_ptr<RdmaNode> node) : node_(std::move(node)) {
  self_ = std::make_unique<caf::scoped_actor>(node_->system());
}

TestNode::~TestNode() {
  self_.reset();  // scoped actors die before their system
  node_.reset();
}

caf::expected<BufferHandle> TestNode::request_buffer(const Memory& m, BufferAccess a) {
  return request_buffer(m.addr(), m.bytes.size(), a);
}

caf::expected<BufferHandle> TestNode::request_buffer(uint64_t addr, uint64_t size, BufferAccess a) {
  caf::expected<BufferHandle> out{caf::error{}};
  (*self_)
      ->request(manager(), 10s, request_buffer_atom::value, addr, size, uint8_t(a))
      .receive([&](BufferHandle& h) { out = std::move(h); },
               [&](caf::error& e) { out = std::move(e); });
  return out;
}

caf::expected<uint64_t> TestNode::release(uint64_t id) {
  caf::expected<uint64_t> out{caf::error{}};
  (*self_)
      ->request(manager(), 10s, release_buffer_atom::value, id)
      .receive([&](uint64_t n) { out = n; }, [&](caf::error& e) { out = std::move(e); });
  return out;
}

caf::expected<TransferReply> TestNode::transfer(const TransferOp& op, uint32_t timeout_ms) {
  caf::expected<TransferReply> out{caf::error{}};
  (*self_)
      ->request(manager(), std::chrono::milliseconds(timeout_ms + 10000), transfer_atom::value, op,
                timeout_ms)
      .receive([&](TransferReply& r) { out = std::move(r); },
               [&](caf::error& e) { out = std::move(e); });
  return out;
}

caf::expected<std::vector<TransferOutcome>> TestNode::batch(const std::vector<TransferOp>& ops,
                                                            uint32_t timeout_ms) {
  caf::expected<std::vector<TransferOutcome>> out{caf::error{}};
  (*self_)
      ->request(manager(), std::chrono::milliseconds(timeout_ms + 10000), batch_atom::value, ops,
                timeout_ms)
      .receive([&](std::vector<TransferOutcome>& r) { out = std::move(r); },
               [&](caf::error& e) { out = std::move(e); });
  return out;
}

ManagerStats TestNode::stats() {
  ManagerStats out;
  auto s = query_stats(10s);
  if (s)
    out = std::move(*s);
  else
    ADD_FAILURE() << "stats: " << error_message(s.error());
  return out;
}

bool TestNode::wait_busy(std::chrono::milliseconds limit) {
  auto busy = [](const ManagerStats& s) { return s.busy_buffers > 0; };
  return busy(wait_stats(busy, limit));
}

bool TestNode::wait_quiet(std::chrono::milliseconds limit) {
  auto quiet = [](const ManagerStats& s) { return s.busy_buffers == 0; };
  return quiet(wait_stats(quiet, limit));
}

caf::expected<ManagerStats> TestNode::query_stats(std::chrono::milliseconds timeout) {
  caf::expected<ManagerStats> out{caf::error{}};
  (*self_)
      ->request(manager(), timeout, stats_atom::value)
      .receive([&](ManagerStats& s) { out = std::move(s); },
               [&](caf::error& e) { out = std::move(e); });
  return out;
}

std::unique_ptr<TestNode> start_node(const ManagerOptions& extra) {
  NodeOptions o;
  auto env = ManagerOptions::from_env();
  EXPECT_TRUE(env.ok()) << env.error().to_string();
  o.manager = env.ok() ? *env : ManagerOptions{};
  o.manager.handshake_timeout = extra.handshake_timeout;
  o.manager.fallback_chunk_bytes = extra.fallback_chunk_bytes;
  o.manager.verify = o.manager.verify || extra.verify;
  o.manager.release_orphans = o.manager.release_orphans || extra.release_orphans;
  o.manager.orphan_grace = extra.orphan_grace;
  o.manager.same_host = o.manager.same_host && extra.same_host;
  o.manager.busy_poll = std::max(o.manager.busy_poll, extra.busy_poll);
  if (extra.stream_min_bytes != ManagerOptions{}.stream_min_bytes)
    o.manager.stream_min_bytes = extra.stream_min_bytes;
  if (!extra.ibverbs.device_name.empty())
    o.manager.ibverbs.device_name = extra.ibverbs.device_name;
  if (extra.latency_traffic != QpTraffic{})
    o.manager.latency_traffic = extra.latency_traffic;
  if (extra.background_traffic != QpTraffic{})
    o.manager.background_traffic = extra.background_traffic;
  auto n = RdmaNode::start(o);
  EXPECT_TRUE(n.ok()) << n.error().to_string();
  return n.ok() ? std::make_unique<TestNode>(std::move(*n)) : nullptr;
}

BufferHandle remote_view(TestNode& owner, TestNode& user, uint64_t addr, uint64_t size,
                         const std::string& name, BufferAccess a) {
  auto h = owner.request_buffer(addr, size, a);
  EXPECT_TRUE(h) << error_message(h.error());
  if (!h)
    return {};
  auto remote = user.node().remote_manager("127.0.0.1", owner.node().port());
  EXPECT_TRUE(remote.ok()) << remote.error().to_string();
  if (!remote.ok())
    return {};
  caf::scoped_actor putter{owner.node().system()};
  putter->request(owner.manager(), 10s, dir_put_atom::value, name, *h)
      .receive([](bool) {}, [](caf::error& e) { ADD_FAILURE() << error_message(e); });
  caf::scoped_actor self{user.node().system()};
  BufferHandle out;
  self->request(*remote, 10s, dir_put_atom::value, name, *h)
      .receive([](bool) { ADD_FAILURE() << "a peer put a name into another node's directory"; },
               [](caf::error& e) {
                 EXPECT_EQ(error_code(e), ErrorCode::kPermissionDenied) << error_message(e);
               });
  self->request(*remote, 10s, dir_get_atom::value, name, uint32_t{1000})
      .receive([&](BufferHandle& x) { out = std::move(x); },
               [&](caf::error& e) { ADD_FAILURE() << error_message(e); });
  return out;
}

BufferHandle remote_view(TestNode& owner, TestNode& user, const Memory& m, const std::string& name,
                         BufferAccess a) {
  return remote_view(owner, user, m.addr(), m.bytes.size(), name, a);
}

caf::behavior silent(caf::event_based_actor*) {
  auto never = [] { return caf::delegated<caf::message>(); };
  return {[never](fetch_atom, const BufferRef&, uint64_t, uint64_t, const PeerNonce&) {
            return never();
          },
          [never](store_atom, const BufferRef&, uint64_t, const ByteChunk&, uint64_t, uint32_t,
                  const PeerNonce&) { return never(); },
          [never](qp_connect_atom, const QpInfoMsg&, const PeerNonce&) { return never(); }};
}

caf::behavior held_fetch_owner(caf::event_based_actor* self,
                               const std::shared_ptr<std::promise<void>>& asked, uint32_t seed) {
  struct Held {
    caf::response_promise rp;
    PeerNonce nonce;
    uint64_t length = 0;
  };
  auto held = std::make_shared<std::optional<Held>>();
  return {
      [=](fetch_atom, const BufferRef&, uint64_t, uint64_t length, const PeerNonce& n) {
        if (!*held) {
          *held = Held{self->make_response_promise(), n, length};
          asked->set_value();
        }
        return caf::delegated<caf::message>();
      },
      [=](stand_in_go_atom) {
        if (!*held)
          return;
        ByteChunk c = ByteChunk::allocate((*held)->length);
        for (uint64_t i = 0; i < c.size; ++i)
          c.owned[static_cast<std::ptrdiff_t>(i)] = pattern(i, seed);
        (*held)->rp.deliver(std::move(c), (*held)->nonce);
      },
  };
}

BufferHandle owned_by_mute(const BufferHandle& local, const caf::actor& mute, const Memory& mem) {
  BufferHandle h = local;
  h.id = 1;
  h.addr = mem.addr();
  h.owner = mute;
  h.owner_name = "mute-owner";
  // No stream endpoint of its own (requests by handle would go to `local`'s node): the
  // stand-in is asked for grants.
  h.stream_host.clear();
  h.stream_port = 0;
  h.stream_host_id.clear();
  h.stream_unix.clear();
  return h;
}

}  // namespace caf_rdma::testing
