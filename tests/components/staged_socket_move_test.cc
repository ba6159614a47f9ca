// Staged socket moves (components/staged_socket_move.h): GPU memory (FakeDeviceMemory: host
// memory declared as a GPU's, its copies counted) sent and received on a socket pair through
// each thread's bounce buffer, every byte checked; a stop that ends a receive waiting on a peer
// that sent part of a piece (nothing of the part copied into the memory); a copy that fails
// part-way (what crossed the socket, what of the memory moved, the GPU and the byte named).
#include <gtest/gtest.h>

#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <thread>
#include <vector>

#include "components/staged_socket_move.h"
#include "tests/fake_device_memory.h"

namespace caf_rdma {
namespace {

using namespace std::chrono_literals;
using testing::FakeDeviceMemory;

/// Non-blocking, as the stream channel's sockets are (socket_io.h waits with poll).
std::pair<Socket, Socket> socket_pair() {
  int fds[2];
  EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds), 0);
  return {Socket(fds[0]), Socket(fds[1])};
}

uint8_t pattern(uint64_t i) {
  return static_cast<uint8_t>((i * 131 + 7) ^ (i >> 11));
}

Deadline in(std::chrono::seconds s) {
  return std::chrono::steady_clock::now() + s;
}

uint64_t first_difference(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b,
                          uint64_t from, uint64_t to) {
  for (uint64_t i = from; i < to; ++i)
    if (a[i] != b[i])
      return i;
  return to;
}

// Three pieces and a ragged end, GPU to GPU: every byte, each side's copies counting it.
TEST(StagedSocketMove, MovesEveryByteOfGpuMemoryThroughEachSidesCopies) {
  constexpr uint64_t kN = 3 * kStagedPiece + 777;
  auto gpu_a = std::make_shared<FakeDeviceMemory>(/*direct=*/false);
  auto gpu_b = std::make_shared<FakeDeviceMemory>(/*direct=*/false);
  std::vector<uint8_t> src(kN), dst(kN, 0);
  for (uint64_t i = 0; i < kN; ++i)
    src[i] = pattern(i);
  gpu_a->add_gpu_range(src.data(), kN, 0);
  gpu_b->add_gpu_range(dst.data(), kN, 1);
  auto [x, y] = socket_pair();
  auto sent = std::async(std::launch::async, [&, &x = x] {
    return move_staged(x, StagedMemory{gpu_a, 0}, reinterpret_cast<uint64_t>(src.data()), kN,
                       /*sending=*/true, in(60s), "test send", 30s, nullptr);
  });
  auto got = move_staged(y, StagedMemory{gpu_b, 1}, reinterpret_cast<uint64_t>(dst.data()), kN,
                         /*sending=*/false, in(60s), "test receive", 30s, nullptr);
  auto out = sent.get();
  ASSERT_TRUE(out.ok()) << out.error().message();
  ASSERT_TRUE(got.ok()) << got.error().message();
  EXPECT_TRUE(out->copy.ok() && got->copy.ok());
  EXPECT_EQ(out->wire, kN);
  EXPECT_EQ(out->memory, kN);
  EXPECT_EQ(got->wire, kN);
  EXPECT_EQ(got->memory, kN);
  EXPECT_EQ(first_difference(src, dst, 0, kN), kN) << "a byte differs";
  EXPECT_EQ(gpu_a->to_host_bytes.load(), kN);
  EXPECT_EQ(gpu_b->to_device_bytes.load(), kN);
  EXPECT_EQ(gpu_a->pageable_copy_bytes.load() + gpu_b->pageable_copy_bytes.load(), 0u)
      << "a bounce buffer was not page-locked";
}

// A receive waiting on a peer that sent one piece and a part of the next (and stays) ends
// once its stop is set, not at its deadline or stall limit: the first piece landed, the part
// is not copied into the memory, and nothing else of it changed.
TEST(StagedSocketMove, AStopEndsAReceiveWaitingOnAStalledPeerAndCopiesNoPartPiece) {
  constexpr uint64_t kN = 3 * kStagedPiece;
  constexpr uint64_t kPart = 1000;
  auto gpu = std::make_shared<FakeDeviceMemory>(/*direct=*/false);
  std::vector<uint8_t> src(kN), dst(kN, 0);
  for (uint64_t i = 0; i < kN; ++i)
    src[i] = pattern(i);
  gpu->add_gpu_range(dst.data(), kN, 0);
  auto [x, y] = socket_pair();
  std::promise<void> peer_may_go;
  auto peer = std::async(std::launch::async, [&, &x = x] {
    Status st = send_all(x, src.data(), kStagedPiece + kPart, in(60s), "peer", 30s);
    peer_may_go.get_future().wait();  // stalls, its connection open, until the test ends
    return st;
  });
  std::atomic<bool> stop{false};
  auto receive = std::async(std::launch::async, [&, &y = y] {
    return move_staged(y, StagedMemory{gpu, 0}, reinterpret_cast<uint64_t>(dst.data()), kN,
                       /*sending=*/false, in(600s), "test receive", 600s, &stop);
  });
  // Waits (bounded) until the first piece was copied in, then stops the receive.
  const Deadline limit = in(60s);
  while (gpu->to_device_bytes.load() < kStagedPiece && std::chrono::steady_clock::now() < limit)
    std::this_thread::sleep_for(1ms);
  ASSERT_EQ(gpu->to_device_bytes.load(), kStagedPiece) << "the first piece never landed";
  stop.store(true, std::memory_order_release);
  ASSERT_EQ(receive.wait_for(60s), std::future_status::ready) << "the stop did not end it";
  auto got = receive.get();
  peer_may_go.set_value();
  EXPECT_TRUE(peer.get().ok());
  ASSERT_TRUE(got.ok()) << got.error().message();
  EXPECT_TRUE(got->copy.ok());
  EXPECT_EQ(got->memory, kStagedPiece);
  EXPECT_GE(got->wire, kStagedPiece);
  EXPECT_LE(got->wire, kStagedPiece + kPart);
  EXPECT_EQ(gpu->to_device_bytes.load(), kStagedPiece) << "a part piece was copied in";
  EXPECT_EQ(first_difference(src, dst, 0, kStagedPiece), kStagedPiece) << "a byte differs";
  for (uint64_t i = kStagedPiece; i < kN; ++i)
    ASSERT_EQ(dst[i], 0) << "byte " << i << " was touched after the stop";
}

// A copy out of the GPU that fails at the second piece: one piece crossed, the socket was not
// touched after it, and the error names the GPU and the byte the piece started at.
TEST(StagedSocketMove, ACopyFailingPartWayEndsTheMoveNamingTheGpuAndTheByte) {
  constexpr uint64_t kN = 3 * kStagedPiece;
  auto gpu = std::make_shared<FakeDeviceMemory>(/*direct=*/false);
  std::vector<uint8_t> src(kN), dst(kN, 0);
  for (uint64_t i = 0; i < kN; ++i)
    src[i] = pattern(i);
  gpu->add_gpu_range(src.data(), kN, 2);
  auto [x, y] = socket_pair();
  // The peer reads the piece, then (once the sender closed) the end: no byte past the piece.
  auto peer = std::async(std::launch::async, [&, &y = y] {
    Status st = recv_all(y, dst.data(), kStagedPiece, in(60s), "peer", 30s);
    uint8_t more = 0;
    const bool past = recv_all(y, &more, 1, in(60s), "peer", 30s).ok();
    return std::make_pair(st, past);
  });
  gpu->fail_copies_after(1);
  auto out = move_staged(x, StagedMemory{gpu, 2}, reinterpret_cast<uint64_t>(src.data()), kN,
                         /*sending=*/true, in(60s), "test send", 30s, nullptr);
  x.close();
  auto [peer_got, past_the_piece] = peer.get();
  ASSERT_TRUE(out.ok()) << out.error().message();
  EXPECT_EQ(out->wire, kStagedPiece);
  EXPECT_EQ(out->memory, kStagedPiece);
  ASSERT_FALSE(out->copy.ok());
  EXPECT_EQ(out->copy.error().code(), ErrorCode::kCuda);
  EXPECT_NE(out->copy.error().message().find("GPU 2 memory at byte 1048576"), std::string::npos)
      << out->copy.error().message();
  EXPECT_TRUE(peer_got.ok()) << peer_got.error().message();
  EXPECT_FALSE(past_the_piece) << "a byte past the piece was sent";
  EXPECT_EQ(first_difference(src, dst, 0, kStagedPiece), kStagedPiece) << "a byte differs";
}

}  // namespace
}  // namespace caf_rdma
