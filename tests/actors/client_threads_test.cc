// One RdmaClient used by many threads at once, blocking calls included (actors/rdma_client.h:
// thread-safe), on both transports (fallback natively, rdma in the Soft-RoCE VM): each thread
// writes its own region of one remote buffer and reads it back, round after round, with lanes
// on and off; every byte of every region is checked after each round, and the guard bytes
// between regions stay untouched. Atomics from many threads each get their own old value.
// A hang is a failure with the threads still out named (a watchdog), not a killed test.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <future>
#include <iostream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "actors/rdma_client.h"
#include "tests/actors/manager_fixture.h"
#include "tests/actors/two_node_test.h"

namespace caf_rdma::testing {
namespace {

using std::chrono::seconds;

class ClientThreadsTest : public TwoNodeTest {};

/// Runs `body(t)` on `n` threads; a thread still out after `limit` fails the test and ends the
/// process with the threads named (a hang must not look like a passing or killed test).
template <class Body>
void run_threads(int n, seconds limit, Body body) {
  std::vector<std::future<void>> done;
  done.reserve(n);
  for (int t = 0; t < n; ++t)
    done.push_back(std::async(std::launch::async, [&body, t] { body(t); }));
  const auto due = std::chrono::steady_clock::now() + limit;
  std::string out;
  for (int t = 0; t < n; ++t)
    if (done[t].wait_until(due) != std::future_status::ready)
      out += " " + std::to_string(t);
  if (!out.empty()) {
    std::cerr << "client_threads_test: threads" << out << " of " << n
              << " still in their calls after " << limit.count()
              << " s: one RdmaClient hangs under concurrent use" << std::endl;
    std::_Exit(1);
  }
}

/// The byte thread `t` writes at offset `i` of its region in round `r`: differs between
/// threads and rounds at (nearly) every byte.
uint8_t thread_byte(uint64_t i, int t, int r) {
  const uint64_t x = (i + 1) * 0x9E3779B97F4A7C15ull ^
                     (static_cast<uint64_t>(t * 1000 + r + 1) * 0xC2B2AE3D27D4EB4Full);
  return static_cast<uint8_t>(x >> 56);
}

/// `threads` threads share one client; each writes then reads back its own region `rounds`
/// times, checking every byte it read and the remote region itself.
void share_one_client(TestNode& owner, TestNode& user, bool direct, int threads, int rounds) {
  constexpr uint64_t kRegion = 64 << 10;
  constexpr uint64_t kGuard = 64;  // between regions: nobody writes there
  constexpr uint8_t kGuardByte = 0xa5;
  const uint64_t stride = kRegion + kGuard;
  Memory remote_mem(threads * stride);
  std::fill(remote_mem.bytes.begin(), remote_mem.bytes.end(), kGuardByte);
  BufferHandle remote = remote_view(owner, user, remote_mem, "shared-" + std::to_string(threads));
  ASSERT_NE(remote.id, 0u);
  RdmaClient client(user.node().system(), user.manager(), direct);
  Memory src(threads * kRegion), back(threads * kRegion);
  auto hs = client.register_buffer(src.bytes.data(), src.bytes.size());
  auto hb = client.register_buffer(back.bytes.data(), back.bytes.size());
  ASSERT_TRUE(hs.ok() && hb.ok());
  std::atomic<uint64_t> failures{0};
  std::vector<std::string> first_error(threads);
  run_threads(threads, seconds(240), [&](int t) {
    const uint64_t mine = t * kRegion;
    for (int r = 0; r < rounds; ++r) {
      for (uint64_t i = 0; i < kRegion; ++i)
        src.bytes[mine + i] = thread_byte(i, t, r);
      auto w = client.write(*hs, remote, Range::of(kRegion).at_local(mine).at_remote(t * stride));
      auto rd =
          w.ok() ? client.read(*hb, remote, Range::of(kRegion).at_local(mine).at_remote(t * stride))
                 : Result<TransferReply>(w.error());
      std::string bad;
      if (!rd.ok())
        bad = rd.error().to_string();
      else if (w->bytes != kRegion || rd->bytes != kRegion)
        bad = "moved " + std::to_string(w->bytes) + " / " + std::to_string(rd->bytes) + " bytes";
      for (uint64_t i = 0; i < kRegion && bad.empty(); ++i)
        if (back.bytes[mine + i] != thread_byte(i, t, r))
          bad = "round " + std::to_string(r) + ": byte " + std::to_string(i) +
                " read back is not what this thread wrote";
      if (!bad.empty()) {
        if (failures.fetch_add(1) == 0 || first_error[t].empty())
          first_error[t] = bad;
        return;
      }
    }
  });
  std::string errors;
  for (int t = 0; t < threads; ++t)
    if (!first_error[t].empty())
      errors += "\n  thread " + std::to_string(t) + ": " + first_error[t];
  ASSERT_EQ(failures.load(), 0u) << errors;
  // The remote buffer holds each thread's last round, and the guards are untouched.
  for (int t = 0; t < threads; ++t) {
    for (uint64_t i = 0; i < kRegion; ++i)
      ASSERT_EQ(remote_mem.bytes[t * stride + i], thread_byte(i, t, rounds - 1))
          << "thread " << t << " byte " << i;
    for (uint64_t i = 0; i < kGuard; ++i)
      ASSERT_EQ(remote_mem.bytes[t * stride + kRegion + i], kGuardByte)
          << "guard byte " << i << " after region " << t;
  }
}

TEST_F(ClientThreadsTest, EightThreadsShareOneClientWithLanes) {
  share_one_client(*owner_, *user_, true, 8, 25);
}

TEST_F(ClientThreadsTest, ThirtyTwoThreadsShareOneClientWithLanes) {
  share_one_client(*owner_, *user_, true, 32, 8);
}

TEST_F(ClientThreadsTest, EightThreadsShareOneClientThroughTheManager) {
  share_one_client(*owner_, *user_, false, 8, 25);
}

// Atomics on one word from many threads of one client: every old value is another's, and the
// word ends at the sum (the client's one landing word is taken in turns).
TEST_F(ClientThreadsTest, AtomicsFromManyThreadsOfOneClientEachGetTheirOwnOldValue) {
  constexpr int kThreads = 8;
  constexpr int kAdds = 40;
  Memory word(64);
  BufferHandle remote = remote_view(*owner_, *user_, word, "counter");
  RdmaClient client(user_->node().system(), user_->manager());
  std::vector<std::vector<uint64_t>> olds(kThreads);
  std::vector<std::string> errors(kThreads);
  run_threads(kThreads, seconds(240), [&](int t) {
    for (int k = 0; k < kAdds; ++k) {
      auto old = client.fetch_add(remote, 8, 1);
      if (!old.ok()) {
        errors[t] = old.error().to_string();
        return;
      }
      olds[t].push_back(*old);
      // Other calls in between, on the same client.
      if (k % 10 == 0 && !client.stats().ok())
        errors[t] = "stats failed";
    }
  });
  std::set<uint64_t> seen;
  for (int t = 0; t < kThreads; ++t) {
    ASSERT_TRUE(errors[t].empty()) << "thread " << t << ": " << errors[t];
    for (uint64_t v : olds[t])
      EXPECT_TRUE(seen.insert(v).second) << "old value " << v << " came back twice";
  }
  EXPECT_EQ(seen.size(), static_cast<size_t>(kThreads * kAdds));
  if (!seen.empty()) {
    EXPECT_EQ(*seen.begin(), 0u);
    EXPECT_EQ(*seen.rbegin(), static_cast<uint64_t>(kThreads * kAdds - 1));
  }
  uint64_t final_value = 0;
  std::memcpy(&final_value, word.bytes.data() + 8, 8);
  EXPECT_EQ(final_value, static_cast<uint64_t>(kThreads * kAdds));
  for (uint64_t i = 0; i < 64; ++i) {
    if (i < 8 || i >= 16) {
      ASSERT_EQ(word.bytes[i], 0) << "byte " << i << " outside the word";
    }
  }
}

}  // namespace
}  // namespace caf_rdma::testing
