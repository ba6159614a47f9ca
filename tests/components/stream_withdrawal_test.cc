// The release rule on the stream channel (components/stream_server.h invariant 14,
// withdrawable_move.h): a claimed transfer whose owner withdraws it touches the memory no more
// after its socket call under way, lets the release go (`done`) before the rest crosses the
// wire, answers `released` in step, and the connection carries the next request. A raw client
// here sends or reads a part, then the owner withdraws: the bound is deterministic (what the
// client sent, plus what the sockets buffer for a read), and a client that stops mid-way holds
// the release no longer than the call under way.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "components/stream_protocol.h"
#include "components/stream_server.h"
#include "components/withdrawable_move.h"
#include "tests/components/served.h"

namespace caf_rdma {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr uint64_t kSize = 64ull << 20;
constexpr uint64_t kBeforeWithdrawal = 8ull << 20;

/// Bytes [from, to) of `got` are those of `want`; else the first that is not. A memcmp first:
/// a loop of assertions over 64 MiB took seconds at the sanitizer lanes' -O0.
::testing::AssertionResult same_bytes(const std::vector<uint8_t>& got,
                                      const std::vector<uint8_t>& want, uint64_t from,
                                      uint64_t to) {
  if (to > got.size() || to > want.size())
    return ::testing::AssertionFailure() << "bytes up to " << to << " asked of " << got.size();
  if (from >= to || std::memcmp(got.data() + from, want.data() + from, to - from) == 0)
    return ::testing::AssertionSuccess();
  while (got[from] == want[from])
    ++from;
  return ::testing::AssertionFailure()
         << "byte " << from << " is " << int(got[from]) << ", expected " << int(want[from]);
}

const std::vector<uint8_t>& zeros() {
  static const std::vector<uint8_t> z(kSize, 0);
  return z;
}

std::vector<uint8_t> pattern(uint64_t n, uint32_t seed) {
  std::vector<uint8_t> v(n);
  for (uint64_t i = 0; i < n; ++i)
    v[i] = static_cast<uint8_t>(((i * 2654435761u + seed) >> 13) | 1);  // never 0
  return v;
}

/// The most a TCP socket of this host buffers (the third value of net.ipv4.`name`; 6 MiB, the
/// kernel's default for tcp_rmem, when it cannot be read).
uint64_t tcp_buffer_limit(const std::string& name) {
  std::ifstream f("/proc/sys/net/ipv4/" + name);
  uint64_t low = 0, initial = 0, max = 0;
  if (f >> low >> initial >> max)
    return max;
  return 6ull << 20;
}

class StreamWithdrawalTest : public ::testing::Test {
protected:
  void SetUp() override {
    auto s = StreamServer::start("127.0.0.1");
    ASSERT_TRUE(s.ok()) << s.error().to_string();
    server_ = std::move(*s);
  }

  /// A new connection to the server as sock_. Made only when a request follows at once: one
  /// that sends none within the server's auth_timeout (5 s) is closed (stream_server.h
  /// invariant 3), and a 64 MiB pattern takes seconds to make under ThreadSanitizer.
  void connect_peer() {
    auto c = connect_tcp(server_->host(), server_->port(), Clock::now() + 10s);
    ASSERT_TRUE(c.ok()) << c.error().to_string();
    sock_ = std::move(*c);
  }

  /// Claims `token` for `direction` on the connection (a new one unless sock_ has one) and
  /// reads "go".
  void claim(uint64_t token, StreamDirection direction, uint64_t length) {
    if (!sock_.valid())
      connect_peer();
    ASSERT_TRUE(write_request(sock_, {direction, token, length}, Clock::now() + 10s).ok());
    auto go = read_status(sock_, Clock::now() + 10s, "go");
    ASSERT_TRUE(go.ok() && go->ok())
        << "the owner did not start the transfer: "
        << (!go.ok() ? go.error().to_string() : go->error().to_string());
  }

  /// The connection carries a next request after a withdrawn one: a 4 KiB write, every byte
  /// checked.
  void next_request_works() {
    std::vector<uint8_t> owner(4096), mine = pattern(4096, 9);
    Served done;
    uint64_t t = server_->grant(owner.data(), owner.size(), StreamDirection::kIntoOwner,
                                Clock::now() + 10s, done.fn());
    claim(t, StreamDirection::kIntoOwner, owner.size());
    ASSERT_TRUE(send_all(sock_, mine.data(), mine.size(), Clock::now() + 10s, "bytes").ok());
    auto end = read_status(sock_, Clock::now() + 10s, "end");
    ASSERT_TRUE(end.ok() && end->ok()) << "the connection no longer carries requests";
    ASSERT_TRUE(done.wait(20s).first.ok());
    EXPECT_EQ(owner, mine);
  }

  /// Requests by handle from now on get [addr, ...), withdrawn by `withdrawal`, and report to
  /// `served`.
  void authorize(uint8_t* addr, const Withdrawal& withdrawal, Served& served) {
    server_->set_authorizer([addr, withdrawal, done = served.handle_fn()](
                                const StreamRequest&) -> Result<StreamServer::HandleGrant> {
      StreamServer::HandleGrant g;
      g.addr = addr;
      g.withdrawal = withdrawal;
      g.done = done;
      return g;
    });
  }

  std::unique_ptr<StreamServer> server_;
  Socket sock_;
};

TEST_F(StreamWithdrawalTest, AWithdrawnWriteStopsAtOnceAndLetsTheReleaseGo) {
  auto owner = std::vector<uint8_t>(kSize, 0);
  const auto src = pattern(kSize, 2);
  auto withdrawal = std::make_shared<std::atomic<bool>>(false);
  Served done;
  uint64_t t = server_->grant(owner.data(), kSize, StreamDirection::kIntoOwner, Clock::now() + 30s,
                              done.fn(), withdrawal);
  claim(t, StreamDirection::kIntoOwner, kSize);
  ASSERT_TRUE(send_all(sock_, src.data(), kBeforeWithdrawal, Clock::now() + 10s, "bytes").ok());
  withdrawal->store(true);
  // More bytes after the withdrawal: the owner takes them no more (after its call under way).
  const uint64_t bound = kBeforeWithdrawal + kWithdrawablePiece;
  ASSERT_TRUE(send_all(sock_, src.data() + kBeforeWithdrawal, bound - kBeforeWithdrawal,
                       Clock::now() + 10s, "bytes")
                  .ok());
  // The owner lets its release go now, before the rest of the write crossed the wire.
  auto [st, bytes] = done.wait(20s);
  ASSERT_FALSE(st.ok()) << "a withdrawn write was reported done before the rest was sent";
  EXPECT_EQ(st.error().code(), ErrorCode::kReleased) << st.error().to_string();
  // What `done` counted landed, nothing else (then or later: checked again at the end).
  ASSERT_TRUE(same_bytes(owner, src, 0, bytes)) << "of the " << bytes << " moved";
  ASSERT_TRUE(same_bytes(owner, zeros(), bytes, kSize)) << "past the " << bytes << " moved";
  // The rest still goes on the connection (read and dropped by the owner), then its answer.
  ASSERT_TRUE(send_all(sock_, src.data() + bound, kSize - bound, Clock::now() + 20s, "bytes").ok());
  auto end = read_status(sock_, Clock::now() + 10s, "end");
  ASSERT_TRUE(end.ok()) << end.error().to_string();
  ASSERT_FALSE(end->ok()) << "a withdrawn write was answered as stored";
  EXPECT_EQ(end->error().code(), ErrorCode::kReleased) << end->error().to_string();
  EXPECT_NE(end->error().message().find(" of " + std::to_string(kSize) + " had moved"),
            std::string::npos)
      << end->error().message();
  EXPECT_TRUE(std::all_of(owner.begin() + bytes, owner.end(), [](uint8_t b) { return b == 0; }))
      << "the rest of the write reached the owner's memory";
  next_request_works();
}

TEST_F(StreamWithdrawalTest, AWithdrawnReadSendsZerosForTheRestAndSaysReleased) {
  const auto owner = pattern(kSize, 3);
  std::vector<uint8_t> got(kSize, 0);
  auto withdrawal = std::make_shared<std::atomic<bool>>(false);
  Served done;
  uint64_t t =
      server_->grant(const_cast<uint8_t*>(owner.data()), kSize, StreamDirection::kOutOfOwner,
                     Clock::now() + 30s, done.fn(), withdrawal);
  claim(t, StreamDirection::kOutOfOwner, kSize);
  ASSERT_TRUE(recv_all(sock_, got.data(), kBeforeWithdrawal, Clock::now() + 10s, "bytes").ok());
  withdrawal->store(true);
  ASSERT_TRUE(recv_all(sock_, got.data() + kBeforeWithdrawal, kSize - kBeforeWithdrawal,
                       Clock::now() + 20s, "bytes")
                  .ok());
  auto end = read_status(sock_, Clock::now() + 10s, "end");
  ASSERT_TRUE(end.ok()) << end.error().to_string();
  ASSERT_FALSE(end->ok()) << "a withdrawn read was answered as complete";
  EXPECT_EQ(end->error().code(), ErrorCode::kReleased) << end->error().to_string();
  auto served = done.wait(20s).first;
  ASSERT_FALSE(served.ok());
  EXPECT_EQ(served.error().code(), ErrorCode::kReleased);
  // Sent before the withdrawal: the part read, what the two sockets can buffer (at most the
  // host's tcp_rmem and tcp_wmem limits) and the call under way; every byte after that came as
  // zeros (on a host whose limits exceed the transfer there is no such byte to check).
  const uint64_t sent_before = kBeforeWithdrawal + tcp_buffer_limit("tcp_rmem") +
                               tcp_buffer_limit("tcp_wmem") + kWithdrawablePiece;
  ASSERT_TRUE(same_bytes(got, owner, 0, kBeforeWithdrawal));
  const uint64_t either_end = std::min(sent_before, kSize);
  uint64_t i = kBeforeWithdrawal;
  while (i < either_end && (got[i] == owner[i] || got[i] == 0))
    ++i;
  ASSERT_EQ(i, either_end) << "byte " << i << " is neither the owner's nor zero";
  ASSERT_TRUE(same_bytes(got, zeros(), std::min(sent_before, kSize), kSize))
      << ": read from the owner after the withdrawal";
  next_request_works();
}

// A peer that stops moving bytes mid-way (a writer that sends no more, a reader that reads no
// more: its socket buffers fill) holds neither the owner's memory nor its release: `done` comes
// while the peer is still silent, though its stall limit and its grant outlast this test's wait
// (before invariant 14 looked at the withdrawal while waiting, the release waited for them).
// Then the peer moves the rest: the owner's memory stays as it was at `done`, a read's bytes
// are the owner's up to what `done` counted and zeros after, and the answer is `released`.
TEST_F(StreamWithdrawalTest, APeerThatStallsMidWayHoldsNeitherTheMemoryNorTheRelease) {
  StreamServer::Limits limits;
  limits.stall_timeout = 600s;  // longer than every wait below: only the withdrawal ends one
  auto started = StreamServer::start("127.0.0.1", limits);
  ASSERT_TRUE(started.ok()) << started.error().to_string();
  server_ = std::move(*started);
  for (auto direction : {StreamDirection::kIntoOwner, StreamDirection::kOutOfOwner}) {
    SCOPED_TRACE(to_string(direction));
    const bool write = direction == StreamDirection::kIntoOwner;
    std::vector<uint8_t> owner = write ? std::vector<uint8_t>(kSize, 0) : pattern(kSize, 6);
    const auto src = pattern(kSize, 7);
    connect_peer();  // a fresh connection for each direction, once its patterns are made
    auto withdrawal = std::make_shared<std::atomic<bool>>(false);
    Served done;
    uint64_t t =
        server_->grant(owner.data(), kSize, direction, Clock::now() + 600s, done.fn(), withdrawal);
    claim(t, direction, kSize);
    // An odd part, then silence (a reader reads nothing: the owner fills the socket buffers).
    constexpr uint64_t kPart = (1ull << 20) + 3;
    if (write) {
      ASSERT_TRUE(send_all(sock_, src.data(), kPart, Clock::now() + 10s, "bytes").ok());
    }
    withdrawal->store(true);
    auto [st, bytes] = done.wait(30s);
    ASSERT_FALSE(st.ok()) << "the withdrawn transfer was reported done";
    ASSERT_EQ(st.error().code(), ErrorCode::kReleased)
        << st.error().to_string() << " (the release waited for the silent peer)";
    const auto at_done = owner;
    std::vector<uint8_t> got(kSize, 0);
    if (write) {
      EXPECT_LE(bytes, kPart);
      ASSERT_TRUE(
          send_all(sock_, src.data() + kPart, kSize - kPart, Clock::now() + 60s, "bytes").ok());
    } else {
      ASSERT_TRUE(recv_all(sock_, got.data(), kSize, Clock::now() + 60s, "bytes").ok());
    }
    auto end = read_status(sock_, Clock::now() + 10s, "end");
    ASSERT_TRUE(end.ok()) << end.error().to_string();
    ASSERT_FALSE(end->ok());
    EXPECT_EQ(end->error().code(), ErrorCode::kReleased) << end->error().to_string();
    ASSERT_TRUE(owner == at_done) << "the owner's memory changed after `done`";
    const std::vector<uint8_t>& moved = write ? owner : got;  // the side the bytes went to
    ASSERT_TRUE(same_bytes(moved, write ? src : owner, 0, bytes)) << "of the " << bytes << " moved";
    ASSERT_TRUE(same_bytes(moved, zeros(), bytes, kSize)) << "past the " << bytes << " moved";
  }
  next_request_works();
}

TEST_F(StreamWithdrawalTest, AGrantWithdrawnBeforeItsFirstByteMovesNothing) {
  for (auto direction : {StreamDirection::kIntoOwner, StreamDirection::kOutOfOwner}) {
    SCOPED_TRACE(to_string(direction));
    std::vector<uint8_t> owner(1 << 20, 0), mine = pattern(1 << 20, 4);
    if (direction == StreamDirection::kOutOfOwner)
      owner = pattern(1 << 20, 5);
    const auto before = owner;
    auto withdrawal = std::make_shared<std::atomic<bool>>(true);
    Served done;
    uint64_t t = server_->grant(owner.data(), owner.size(), direction, Clock::now() + 30s,
                                done.fn(), withdrawal);
    claim(t, direction, owner.size());
    std::vector<uint8_t> got(owner.size(), 7);
    Status moved = direction == StreamDirection::kIntoOwner
                       ? send_all(sock_, mine.data(), mine.size(), Clock::now() + 10s, "bytes")
                       : recv_all(sock_, got.data(), got.size(), Clock::now() + 10s, "bytes");
    ASSERT_TRUE(moved.ok()) << moved.error().to_string();
    auto end = read_status(sock_, Clock::now() + 10s, "end");
    ASSERT_TRUE(end.ok() && !end->ok());
    EXPECT_EQ(end->error().code(), ErrorCode::kReleased);
    EXPECT_NE(end->error().message().find("(0 of 1048576 had moved"), std::string::npos)
        << end->error().message();
    auto served = done.wait(20s).first;
    ASSERT_FALSE(served.ok());
    EXPECT_EQ(served.error().code(), ErrorCode::kReleased);
    EXPECT_EQ(owner, before) << "the owner's memory changed";
    if (direction == StreamDirection::kOutOfOwner) {
      EXPECT_EQ(got, std::vector<uint8_t>(got.size(), 0)) << "the owner's bytes were sent";
    }
  }
  next_request_works();
}

// The small requests by handle (an eager write of at most kEagerBytes, a read answered in one
// send) withdrawn before they start touch nothing, answer `released` in step, and
// the connection serves on.
TEST_F(StreamWithdrawalTest, SmallRequestsByHandleWithdrawnTouchNothing) {
  constexpr uint64_t kSmall = 4096;
  std::vector<uint8_t> owner = pattern(kSmall, 6);
  const auto before = owner;
  auto withdrawal = std::make_shared<std::atomic<bool>>(true);
  Served done;
  authorize(owner.data(), withdrawal, done);
  StreamRequest write{StreamDirection::kIntoOwner, 0, kSmall};
  write.by_handle = true;
  write.handle.timeout_ms = 10000;
  const auto mine = pattern(kSmall, 7);
  connect_peer();
  ASSERT_TRUE(write_request(sock_, write, Clock::now() + 10s).ok());
  ASSERT_TRUE(send_all(sock_, mine.data(), kSmall, Clock::now() + 10s, "eager bytes").ok());
  auto answer = read_status(sock_, Clock::now() + 10s, "eager answer");
  ASSERT_TRUE(answer.ok()) << answer.error().to_string();
  ASSERT_FALSE(answer->ok()) << "a withdrawn eager write was stored";
  EXPECT_EQ(answer->error().code(), ErrorCode::kReleased) << answer->error().to_string();
  auto served = done.wait(20s).first;
  ASSERT_FALSE(served.ok());
  EXPECT_EQ(served.error().code(), ErrorCode::kReleased);
  EXPECT_EQ(owner, before) << "the withdrawn eager write reached the owner's memory";

  Served read_done;
  authorize(owner.data(), withdrawal, read_done);
  StreamRequest read{StreamDirection::kOutOfOwner, 0, kSmall};
  read.by_handle = true;
  read.handle.timeout_ms = 10000;
  ASSERT_TRUE(write_request(sock_, read, Clock::now() + 10s).ok());
  auto go = read_status(sock_, Clock::now() + 10s, "go");
  ASSERT_TRUE(go.ok() && go->ok());
  std::vector<uint8_t> got(kSmall, 9);
  ASSERT_TRUE(recv_all(sock_, got.data(), kSmall, Clock::now() + 10s, "bytes").ok());
  auto end = read_status(sock_, Clock::now() + 10s, "end");
  ASSERT_TRUE(end.ok() && !end->ok()) << "a withdrawn small read was answered as complete";
  EXPECT_EQ(end->error().code(), ErrorCode::kReleased);
  EXPECT_EQ(got, std::vector<uint8_t>(kSmall, 0)) << "the owner's bytes were sent";
  next_request_works();
}

}  // namespace
}  // namespace caf_rdma
