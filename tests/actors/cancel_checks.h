// What the cancel tests (cancel_test.cc: CancelToken with RdmaClient; manager_cancel_test.cc:
// cancel_atom at the manager) check around a cancel: when to cancel (once the first bytes
// landed) and that nothing lands after its answer.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>

#include "actors/cancel_token.h"
#include "actors/rdma_client.h"
#include "tests/actors/manager_fixture.h"

namespace caf_rdma::testing {

/// Waits until one of the first 4096 bytes at `at` is not 0, or `ended()` (bounded: 60 s): the
/// mover's transfer is under way, so a cancel stops it mid-way. It looks on purpose at bytes
/// that something else writes with no synchronisation (a NIC; on the fallback the owner's
/// stream worker or its process_vm_*, or the manager's thread), read through volatile so the
/// compiler may not cache them: a race ThreadSanitizer must not instrument here; the checks
/// after the cancel are ordered by its answer.
__attribute__((no_sanitize("thread"))) inline void wait_for_first_bytes(
    const uint8_t* at, const std::function<bool()>& ended) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  const volatile uint8_t* p = at;
  while (!ended() && std::chrono::steady_clock::now() < until) {
    for (int i = 0; i < 4096; ++i)
      if (p[i] != 0)
        return;
    std::this_thread::yield();
  }
}

/// Over RDMA, where the NIC is the only writer: wait_for_first_bytes. On the fallback the tests
/// that call it cancel as soon as the mover started (the stream tests wait for the first bytes
/// there).
inline void wait_for_first_nic_bytes(const uint8_t* at, const std::function<bool()>& ended) {
  if (expected_path() == kPathRdma)
    wait_for_first_bytes(at, ended);
}

/// After a `cancelled` answer: `m` does not change for a second (no byte lands late).
inline void expect_still(const Memory& m, const char* what) {
  const std::vector<uint8_t> then = m.bytes;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  do {
    ASSERT_EQ(std::memcmp(then.data(), m.bytes.data(), then.size()), 0)
        << what << " changed after cancel answered";
    std::this_thread::yield();
  } while (std::chrono::steady_clock::now() < until);
}

/// After a `cancelled` answer: every byte of `dest` is untouched (0) or the source's (pattern
/// `seed`), never another; returns how many are not 0.
inline ::testing::AssertionResult only_untouched_or_source(const Memory& dest, uint32_t seed,
                                                           uint64_t* landed) {
  *landed = 0;
  for (uint64_t i = 0; i < dest.bytes.size(); ++i) {
    if (dest.bytes[i] == 0)
      continue;
    if (dest.bytes[i] != pattern(i, seed))
      return ::testing::AssertionFailure()
             << "destination byte " << i << " is " << int{dest.bytes[i]} << ", neither 0 nor "
             << int{pattern(i, seed)};
    ++*landed;
  }
  return ::testing::AssertionSuccess();
}

/// One direction of a two-way cancel test: `dest` (the local memory `mine` for a read, the
/// owner's for a write) zeroed, and `mine` filled with the source pattern for a write. The
/// seed of the source's pattern: 13 for a write, 12 for a read (the owner's memory to read
/// from holds pattern 12).
inline uint32_t arrange_direction(Memory& dest, Memory& mine, bool push) {
  const uint32_t seed = push ? 13 : 12;
  std::fill(dest.bytes.begin(), dest.bytes.end(), 0);
  if (push)
    for (uint64_t i = 0; i < mine.bytes.size(); ++i)
      mine.bytes[i] = pattern(i, seed);
  return seed;
}

/// `client`'s whole read from (or write into, `push`) `remote` with `local`, on a thread of its
/// own, cancelled with its token once the first bytes landed in `dest`: the cancel's answer,
/// the transfer's in `got`, and in `ms` the time the cancel took.
inline CancelResult move_and_cancel(RdmaClient& client, bool push, const BufferHandle& local,
                                    const BufferHandle& remote, const Memory& dest,
                                    Result<TransferReply>* got, double* ms) {
  CancelToken token;
  std::atomic<bool> done{false};
  std::thread mover([&] {
    *got = push ? client.write(local, remote, Range::whole(), std::chrono::seconds(60), token)
                : client.read(local, remote, Range::whole(), std::chrono::seconds(60), token);
    done.store(true);
  });
  wait_for_first_bytes(dest.bytes.data(), [&] { return done.load(); });
  const auto asked = std::chrono::steady_clock::now();
  CancelResult c = token.cancel(std::chrono::seconds(120));
  *ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - asked).count();
  mover.join();
  return c;
}

}  // namespace caf_rdma::testing
