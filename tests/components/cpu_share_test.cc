// CpuShare (components/cpu_share.h): a thread moving a bulk or background transfer moves its
// bytes in short calls and yields between them; scopes nest. What a user relies on: every
// byte still arrives, in order, whatever the class and the shape of the pieces (a message cut
// at kShareRun resumes where it stopped). The latency it buys is the load bench's to show
// (bench/latency_under_load.h), not a timed test's.
#include <fcntl.h>
#include <sys/socket.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "components/cpu_share.h"
#include "components/socket_io.h"

namespace caf_rdma {
namespace {

TEST(CpuShare, Inv1Inv2_BulkAndBackgroundScopesShareLatencyOnesDoNotAndScopesNest) {
  EXPECT_FALSE(CpuShare::sharing()) << "a thread without a scope shares its core";
  EXPECT_EQ(CpuShare::run_of(10 * kShareRun), 10 * kShareRun);
  {
    const CpuShare::Scope bulk(Priority::kBulk);
    EXPECT_TRUE(CpuShare::sharing());
    EXPECT_EQ(CpuShare::run_of(10 * kShareRun), kShareRun);
    EXPECT_EQ(CpuShare::run_of(100), 100u);
    {
      const CpuShare::Scope latency(Priority::kLatency);
      EXPECT_FALSE(CpuShare::sharing()) << "a latency-class transfer inside a bulk one shares";
      {
        const CpuShare::Scope background(Priority::kBackground);
        EXPECT_TRUE(CpuShare::sharing());
      }
      EXPECT_FALSE(CpuShare::sharing()) << "the end of a scope did not bring back the one before";
    }
    EXPECT_TRUE(CpuShare::sharing());
  }
  EXPECT_FALSE(CpuShare::sharing());
  // Another thread has scopes of its own.
  const CpuShare::Scope bulk(Priority::kBulk);
  bool other = true;
  std::thread([&] { other = CpuShare::sharing(); }).join();
  EXPECT_FALSE(other) << "a scope reached another thread";
}

TEST(CpuShare, Inv1_AMessageIsCutToItsFirstBytesAndAShorterOneIsLeftAsItIs) {
  uint8_t bytes[64];
  iovec v[3] = {{bytes, 10}, {bytes + 10, 20}, {bytes + 30, 30}};
  msghdr m{};
  m.msg_iov = v;
  m.msg_iovlen = 3;
  CpuShare::cut(m, 25);  // inside the second entry
  EXPECT_EQ(m.msg_iovlen, 2u);
  EXPECT_EQ(v[0].iov_len, 10u);
  EXPECT_EQ(v[1].iov_len, 15u);
  CpuShare::cut(m, 10);  // at the end of the first
  EXPECT_EQ(m.msg_iovlen, 1u);
  EXPECT_EQ(v[0].iov_len, 10u);
  iovec w[2] = {{bytes, 10}, {bytes + 10, 20}};
  m.msg_iov = w;
  m.msg_iovlen = 2;
  CpuShare::cut(m, 100);  // longer than the message
  EXPECT_EQ(m.msg_iovlen, 2u);
  EXPECT_EQ(w[0].iov_len + w[1].iov_len, 30u);
}

/// A connected pair of non-blocking stream sockets.
std::pair<Socket, Socket> socket_pair() {
  int fds[2] = {-1, -1};
  EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  for (int fd : fds)
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL, 0) | O_NONBLOCK);
  return {Socket(fds[0]), Socket(fds[1])};
}

TEST(CpuShare, Inv1_EveryByteArrivesInOrderInEveryClassOneRangeOrMany) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  const uint64_t kBytes = 3 * kShareRun + 12345;
  std::vector<uint8_t> source(kBytes);
  for (uint64_t i = 0; i < kBytes; ++i)
    source[i] = static_cast<uint8_t>((i * 131 + 7) % 251);
  for (Priority p : {Priority::kLatency, Priority::kBulk, Priority::kBackground}) {
    for (bool pieces : {false, true}) {
      SCOPED_TRACE(std::string(priority_name(p)) + (pieces ? ", in pieces" : ", one range"));
      auto sockets = socket_pair();
      Socket& a = sockets.first;
      Socket& b = sockets.second;
      std::vector<uint8_t> got(kBytes, 0xEE);
      Status received;
      // The receiver shares as the sender does (both ends of a transfer run in its class).
      std::thread reader([&, p = p] {
        const CpuShare::Scope share(p);
        received = recv_all(b, got.data(), kBytes, deadline, "the test's receive");
      });
      Status sent;
      {
        const CpuShare::Scope share(p);
        if (!pieces) {
          sent = send_all(a, source.data(), kBytes, deadline, "the test's send");
        } else {
          // Pieces of odd sizes, some past kShareRun: a cut message ends inside one.
          std::vector<iovec> v;
          const uint64_t sizes[] = {1, kShareRun + 3, 4096, kShareRun - 1, 7};
          uint64_t at = 0;
          for (size_t i = 0; at < kBytes; ++i) {
            const uint64_t n = std::min<uint64_t>(sizes[i % std::size(sizes)], kBytes - at);
            v.push_back(iovec{source.data() + at, n});
            at += n;
          }
          auto moved =
              move_pieces(a, v.data(), v.size(), true, deadline, "the test's pieces", {}, nullptr);
          sent = moved.ok() ? Status{} : Status(moved.error());
          if (moved.ok()) {
            EXPECT_EQ(*moved, kBytes);
          }
        }
      }
      reader.join();
      ASSERT_TRUE(sent.ok()) << sent.error().message();
      ASSERT_TRUE(received.ok()) << received.error().message();
      for (uint64_t i = 0; i < kBytes; ++i)
        ASSERT_EQ(got[i], source[i]) << "byte " << i;
    }
  }
}

}  // namespace
}  // namespace caf_rdma
