// Edges of the fallback's paths that no other test reached (found by breaking single lines of
// the manager and seeing every test still pass): chunked writes below the stream threshold
// checked chunk by chunk at their offsets, a chunk refused by the owner while others are on
// their way, a granted stream whose owner never answers, a release while two transfers of
// different sizes use the buffer. Native lane only (the transport is forced to the fallback);
// the owners that misbehave are stand-ins in the requester's actor system, speaking the sealed
// peer protocol (actors/peer_facade.h, invariant 6).
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <future>
#include <memory>
#include <thread>
#include <vector>

#include "actors/rdma_client.h"
#include "tests/actors/manager_fixture.h"

namespace caf_rdma::testing {
namespace {

constexpr uint64_t kChunk = 16 << 10;

std::unique_ptr<TestNode> fallback_node(bool verify = false) {
  NodeOptions o;
  o.manager.mode = TransportMode::kFallback;
  o.manager.verify = verify;
  o.manager.stream_min_bytes = 256 << 10;
  o.manager.fallback_chunk_bytes = kChunk;
  auto n = RdmaNode::start(o);
  EXPECT_TRUE(n.ok()) << n.error().to_string();
  return n.ok() ? std::make_unique<TestNode>(std::move(*n)) : nullptr;
}

class FallbackEdgesTest : public ::testing::Test {
protected:
  void SetUp() override {
    owner_ = fallback_node();
    user_ = fallback_node();
    ASSERT_TRUE(owner_ && user_);
  }
  std::unique_ptr<TestNode> owner_, user_;
};

// Below stream_min_bytes a transfer moves in CAF chunks of fallback_chunk_bytes: each chunk must
// land at its own offset (local and remote offsets both non-zero, the last chunk short), and
// nothing outside the range may change.
TEST_F(FallbackEdgesTest, ChunkedTransfersLandEachChunkAtItsOffset) {
  constexpr uint64_t kSize = (200 << 10) + 64, kLen = (12 * kChunk) + 5;  // 13 chunks
  constexpr uint64_t kLocalOff = 3, kRemoteOff = 7;
  Memory theirs(kSize, 21), mine(kSize, 22);
  auto ht = owner_->request_buffer(theirs);
  auto hm = user_->request_buffer(mine);
  ASSERT_TRUE(ht && hm);
  BufferHandle remote = remote_view(*owner_, *user_, theirs, "chunked");
  // The first op to an owner takes its stream channel, whatever its size, to learn the
  // endpoint (actors/stream_endpoints.h): a read of one byte, before the chunked ones.
  Memory one(1, 0);
  auto h1 = user_->request_buffer(one);
  ASSERT_TRUE(h1);
  ASSERT_TRUE(user_->transfer(make_read(*h1, remote, 1)));
  EXPECT_EQ(one.bytes[0], pattern(0, 21));
  const uint64_t streamed = user_->stats().stream_ops;
  EXPECT_EQ(streamed, 1u);
  auto w = user_->transfer(make_write(*hm, remote, kLen, kLocalOff, kRemoteOff));
  ASSERT_TRUE(w) << error_message(w.error());
  EXPECT_EQ(w->path, kPathFallback);
  EXPECT_EQ(w->bytes, kLen);
  ASSERT_TRUE(owner_->wait_quiet());
  for (uint64_t i = 0; i < kSize; ++i) {
    const bool in = i >= kRemoteOff && i < kRemoteOff + kLen;
    const uint8_t want = in ? pattern(i - kRemoteOff + kLocalOff, 22) : pattern(i, 21);
    ASSERT_EQ(theirs.bytes[i], want) << "owner byte " << i << (in ? " (written)" : " (outside)");
  }
  EXPECT_EQ(user_->stats().stream_ops, streamed) << "below the threshold: chunks, not the stream";
  // And back: a chunked read into another offset of a fresh buffer.
  Memory back(kSize, 0);
  auto hb = user_->request_buffer(back);
  ASSERT_TRUE(hb);
  auto r = user_->transfer(make_read(*hb, remote, kLen, /*local_offset=*/11, kRemoteOff));
  ASSERT_TRUE(r) << error_message(r.error());
  for (uint64_t i = 0; i < kSize; ++i) {
    const bool in = i >= 11 && i < 11 + kLen;
    const uint8_t want = in ? theirs.bytes[i - 11 + kRemoteOff] : 0;
    ASSERT_EQ(back.bytes[i], want) << "read byte " << i << (in ? " (read)" : " (outside)");
  }
}

// Verify mode checks the RDMA paths only (docs/architecture.md, "Verify mode"); on the fallback it
// changes nothing: chunked and streamed transfers between verifying nodes move every byte,
// unchecked by an extra checksum round (no data_mismatch, no extra question to the owner).
TEST_F(FallbackEdgesTest, VerifyModeLeavesTheFallbackAsItIs) {
  auto owner = fallback_node(true), user = fallback_node(true);
  ASSERT_TRUE(owner && user);
  for (uint64_t len : {uint64_t{3 * kChunk + 1}, uint64_t{(1 << 20) + 3}}) {  // chunks, stream
    SCOPED_TRACE(len);
    Memory theirs(len, 24), mine(len, 25);
    auto hm = user->request_buffer(mine);
    ASSERT_TRUE(hm);
    BufferHandle remote = remote_view(*owner, *user, theirs, "verified-" + std::to_string(len));
    auto r = user->transfer(make_read(*hm, remote));
    ASSERT_TRUE(r) << error_message(r.error());
    EXPECT_EQ(r->path, kPathFallback);
    EXPECT_EQ(mine.bytes, theirs.bytes);
    Memory out(len, 26);
    auto ho = user->request_buffer(out);
    ASSERT_TRUE(ho);
    auto w = user->transfer(make_write(*ho, remote));
    ASSERT_TRUE(w) << error_message(w.error());
    ASSERT_TRUE(owner->wait_quiet());
    EXPECT_EQ(theirs.bytes, out.bytes);
  }
  EXPECT_EQ(user->stats().errors, 0u);
}

/// A stand-in owner for chunked writes: refuses the chunk at `bad_offset` at once (sealed, with
/// the owner's reason), answers every other one `delay` after it came, and records when it
/// answered the last of them.
using answer_atom = caf::atom_constant<caf::atom("answer")>;
caf::behavior refusing_owner(caf::event_based_actor* self, uint64_t bad_offset,
                             std::chrono::milliseconds delay,
                             const std::shared_ptr<std::atomic<int64_t>>& last_answer,
                             const std::shared_ptr<std::atomic<int>>& chunks) {
  auto held = std::make_shared<std::vector<std::pair<caf::response_promise, PeerNonce>>>();
  return {
      [=](store_atom, const BufferRef&, uint64_t offset, const ByteChunk& c, uint64_t, uint32_t,
          const PeerNonce& n) -> caf::result<caf::message> {
        ++*chunks;
        if (offset == bad_offset)
          return caf::make_message(
              make_rdma_error(ErrorCode::kOutOfBounds, "chunk refused by the stand-in owner"), n);
        held->emplace_back(self->make_response_promise(), n);
        self->delayed_send(self, delay, answer_atom::value, c.size);
        return caf::delegated<caf::message>();
      },
      [=](answer_atom, uint64_t size) {
        if (held->empty())
          return;
        last_answer->store(std::chrono::steady_clock::now().time_since_epoch().count());
        held->front().first.deliver(size, held->front().second);
        held->erase(held->begin());
      },
  };
}

// One chunk of a chunked write refused by the owner while others are on their way: the write
// fails with the owner's reason, and only once every other chunk sent was answered (manager
// invariant 10: the owner applies none of them after the writer was told the write ended).
TEST_F(FallbackEdgesTest, AChunkRefusedWhileOthersAreInFlightFailsTheWriteAfterThem) {
  constexpr uint64_t kLen = 8 * kChunk;
  Memory src(kLen, 23), fake(kLen);
  auto local = user_->request_buffer(src);
  ASSERT_TRUE(local);
  auto last_answer = std::make_shared<std::atomic<int64_t>>(0);
  auto chunks = std::make_shared<std::atomic<int>>(0);
  auto owner = user_->node().system().spawn(refusing_owner, 2 * kChunk,
                                            std::chrono::milliseconds(300), last_answer, chunks);
  BufferHandle h = owned_by_mute(*local, owner, fake);
  h.size = kLen;
  auto w = user_->transfer(make_write(*local, h), 20000);
  const int64_t replied_at = std::chrono::steady_clock::now().time_since_epoch().count();
  EXPECT_RDMA_ERROR(w, ErrorCode::kOutOfBounds, "chunk refused by the stand-in owner");
  ASSERT_GT(chunks->load(), 1) << "no other chunk was on its way";
  ASSERT_NE(last_answer->load(), 0) << "the write was answered before the owner answered a chunk";
  EXPECT_LE(last_answer->load(), replied_at)
      << "the write was answered while chunks were still on their way";
  caf::anon_send_exit(owner, caf::exit_reason::user_shutdown);
}

/// A TCP listener that never accepts: connections complete in its backlog and hear nothing.
class DeafListener {
public:
  DeafListener() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    if (fd_ < 0 || ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
        ::listen(fd_, 8) != 0 || ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0)
      return;
    port_ = ntohs(a.sin_port);
  }
  ~DeafListener() {
    if (fd_ >= 0)
      ::close(fd_);
  }
  uint16_t port() const { return port_; }

private:
  int fd_ = -1;
  uint16_t port_ = 0;
};

/// A stand-in owner that grants every stream (sealed) on a listener that never answers.
caf::behavior deaf_granter(caf::event_based_actor*, uint16_t port) {
  return {
      [=](stream_grant_atom, const BufferRef&, uint64_t, uint64_t, uint8_t, uint32_t,
          const PeerNonce& n) {
        return caf::make_message(StreamGrantMsg{42, "127.0.0.1", port, "", ""}, n);
      },
  };
}

// A stream whose owner never answers on its channel ends at the transfer's own deadline with
// `timeout` naming the stream (the job stops then), not at the caller's request timeout: granted
// (the handle names no stream endpoint) and by handle (it names the deaf one).
TEST_F(FallbackEdgesTest, AStreamWhoseOwnerNeverAnswersEndsAtItsOwnDeadline) {
  DeafListener deaf;
  ASSERT_NE(deaf.port(), 0);
  constexpr uint64_t kLen = 512 << 10;  // above stream_min_bytes: the stream channel
  Memory dst(kLen, 0), fake(kLen);
  auto local = user_->request_buffer(dst);
  ASSERT_TRUE(local);
  auto owner = user_->node().system().spawn(deaf_granter, deaf.port());
  BufferHandle granted = owned_by_mute(*local, owner, fake);
  granted.size = kLen;
  granted.stream_port = 0;  // no endpoint in the handle: the requester asks for a grant
  BufferHandle by_handle = granted;
  by_handle.owner_name = "127.0.0.1:1";  // a loopback owner: its loopback endpoint is taken
  by_handle.stream_host = "127.0.0.1";
  by_handle.stream_port = deaf.port();
  by_handle.stream_host_id.clear();  // not this host's same-host endpoint: TCP
  by_handle.stream_unix.clear();
  for (const BufferHandle& h : {granted, by_handle})
    for (auto kind : {TransferKind::kRead, TransferKind::kWrite}) {
      SCOPED_TRACE(kind == TransferKind::kRead ? "read" : "write");
      SCOPED_TRACE(h.stream_port == 0 ? "granted" : "by handle");
      auto op = kind == TransferKind::kRead ? make_read(*local, h) : make_write(*local, h);
      auto r = user_->transfer(op, 700);  // the fixture's own request waits 10 s more
      EXPECT_RDMA_ERROR(r, ErrorCode::kTimeout, "stream channel did not complete within 700 ms");
    }
  for (uint8_t b : dst.bytes)
    ASSERT_EQ(b, 0) << "bytes arrived from a stream nobody served";
  EXPECT_TRUE(user_->wait_quiet()) << "a stream job still holds the buffer";
  caf::anon_send_exit(owner, caf::exit_reason::user_shutdown);
}

// A release while two transfers of different sizes use the buffer replies only once both have
// ended (manager invariant 2), and both land every byte.
TEST_F(FallbackEdgesTest, AReleaseWaitsForEveryTransferUsingTheBuffer) {
  auto& sys = user_->node().system();
  constexpr uint64_t kSmall = 4096, kLarge = kChunk;  // one chunk each (the stand-ins hold one)
  Memory dst(kSmall + kLarge, 0), fake(kLarge);
  auto local = user_->request_buffer(dst);
  ASSERT_TRUE(local);
  std::vector<std::shared_ptr<std::promise<void>>> asked;
  std::vector<caf::actor> owners;
  for (uint32_t seed : {31u, 32u}) {
    asked.push_back(std::make_shared<std::promise<void>>());
    owners.push_back(sys.spawn(held_fetch_owner, asked.back(), seed));
  }
  caf::scoped_actor self{sys};
  auto small = self->request(user_->manager(), 60s, transfer_atom::value,
                             make_read(*local, owned_by_mute(*local, owners[0], fake), kSmall),
                             uint32_t{30000});
  auto large = self->request(
      user_->manager(), 60s, transfer_atom::value,
      make_read(*local, owned_by_mute(*local, owners[1], fake), kLarge, kSmall), uint32_t{30000});
  for (auto& a : asked)
    ASSERT_EQ(a->get_future().wait_for(30s), std::future_status::ready);
  // The release, from another actor: its reply must wait for both reads.
  std::promise<caf::expected<uint64_t>> released;
  auto released_future = released.get_future();
  std::thread releaser([&] {
    caf::scoped_actor r{sys};
    r->request(user_->manager(), 60s, release_buffer_atom::value, local->id)
        .receive([&](uint64_t n) { released.set_value(n); },
                 [&](caf::error& e) { released.set_value(e); });
  });
  auto done = [](auto& handle) {
    bool ok = false;
    handle.receive([&](TransferReply&) { ok = true; },
                   [](caf::error& e) { ADD_FAILURE() << error_message(e); });
    return ok;
  };
  // The release is taken (the buffer no longer counts as registered) before either read ends.
  auto taken =
      user_->wait_stats([](const ManagerStats& s) { return s.registered_buffers == 0; }, 30000ms);
  ASSERT_EQ(taken.registered_buffers, 0u) << "the release never reached the manager";
  anon_send(owners[0], stand_in_go_atom::value);
  ASSERT_TRUE(done(small));
  (void)user_->stats();  // after this answer, a wrongly early release reply would be there
  EXPECT_NE(released_future.wait_for(0s), std::future_status::ready)
      << "the release replied while the 16 KiB read still used the buffer";
  EXPECT_EQ(user_->stats().busy_buffers, 1u);
  anon_send(owners[1], stand_in_go_atom::value);
  ASSERT_TRUE(done(large));
  ASSERT_EQ(released_future.wait_for(30s), std::future_status::ready)
      << "the release never replied";
  releaser.join();
  auto n = released_future.get();
  ASSERT_TRUE(n) << error_message(n.error());
  EXPECT_EQ(*n, kSmall + kLarge);
  for (uint64_t i = 0; i < kSmall; ++i)
    ASSERT_EQ(dst.bytes[i], pattern(i, 31)) << "small read byte " << i;
  for (uint64_t i = 0; i < kLarge; ++i)
    ASSERT_EQ(dst.bytes[kSmall + i], pattern(i, 32)) << "large read byte " << i;
  for (auto& o : owners)
    caf::anon_send_exit(o, caf::exit_reason::user_shutdown);
}

}  // namespace
}  // namespace caf_rdma::testing
