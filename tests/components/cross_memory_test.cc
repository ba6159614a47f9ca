// Cross-memory copies against a requester that keeps its pages from faulting in (a
// userfaultfd range nobody serves): the owner's copy ends at its deadline or its withdrawal,
// whichever comes first, and no byte lands after it returned (cross_memory.h invariant 6,
// killable_copy.h). Trust, third pass, finding 4: four workers stuck in the kernel, the
// request's 5 s timeout ignored, a release waiting 29.9 s.
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "components/cross_memory.h"
#include "tests/components/unserved_range.h"

namespace caf_rdma {
namespace {

using namespace std::chrono_literals;

constexpr uint64_t kLen = UnservedRange::kLen;

struct Direction {
  bool to_remote;
  const char* name;
};
constexpr Direction kDirections[] = {{false, "a write (out of the requester)"},
                                     {true, "a read (into the requester)"}};

/// Runs the copy between `mine` and `range` on a thread of its own; its status, or none when it
/// did not end within 30 s (then the range is served, so that the thread can end).
std::optional<Status> copy_in_time(UnservedRange& range, std::vector<uint8_t>& mine, bool to_remote,
                                   Deadline deadline, Withdrawal withdrawal,
                                   const std::function<void()>& while_stuck) {
  auto copy = std::async(std::launch::async, [&] {
    bool refused = false;
    return cross_memory_copy(::getpid(), mine.data(), range.addr(), kLen, to_remote, deadline,
                             "buffer 7 offset 0", &refused, withdrawal);
  });
  EXPECT_TRUE(range.wait_for_a_stall()) << "the copy never touched the range";
  while_stuck();
  if (copy.wait_for(30s) != std::future_status::ready) {
    range.serve();
    copy.wait();
    return std::nullopt;
  }
  return copy.get();
}

TEST(CrossMemoryStall, ACopyStuckInTheKernelEndsAtItsDeadline) {
  for (const Direction& d : kDirections) {
    SCOPED_TRACE(d.name);
    UnservedRange range;
    if (!range.why().empty())
      GTEST_SKIP() << range.why();
    std::vector<uint8_t> mine(kLen, 0x11);
    const auto started = std::chrono::steady_clock::now();
    auto st = copy_in_time(range, mine, d.to_remote, started + 500ms, nullptr, [] {});
    ASSERT_TRUE(st.has_value()) << "the copy was still stuck 30 s after its 500 ms deadline";
    ASSERT_FALSE(st->ok());
    EXPECT_EQ(st->error().code(), ErrorCode::kTimeout) << st->error().message();
    EXPECT_NE(st->error().message().find("buffer 7 offset 0"), std::string::npos)
        << st->error().message();
    // Served now: a copy still alive would move its bytes. None is: the owner's bytes are as
    // they were (a write moved nothing into them), then and after another copy over the range.
    range.serve();
    std::vector<uint8_t> other(kLen, 0x22);
    bool refused = false;
    Status again = cross_memory_copy(::getpid(), other.data(), range.addr(), kLen, false,
                                     std::chrono::steady_clock::now() + 30s, "again", &refused);
    ASSERT_TRUE(again.ok()) << again.error().message();
    for (uint64_t i = 0; i < kLen; ++i)
      ASSERT_EQ(other[i], 0) << "byte " << i << " of the served range";
    for (uint64_t i = 0; i < kLen; ++i)
      ASSERT_EQ(mine[i], 0x11) << "byte " << i << " changed after the copy returned";
  }
}

TEST(CrossMemoryStall, AWithdrawalEndsACopyStuckInTheKernel) {
  for (const Direction& d : kDirections) {
    SCOPED_TRACE(d.name);
    UnservedRange range;
    if (!range.why().empty())
      GTEST_SKIP() << range.why();
    std::vector<uint8_t> mine(kLen, 0x33);
    auto flag = std::make_shared<std::atomic<bool>>(false);
    // A deadline far away (the owner's max_timeout): only the withdrawal can end it in time.
    auto st = copy_in_time(range, mine, d.to_remote, std::chrono::steady_clock::now() + 600s, flag,
                           [&] { flag->store(true); });
    ASSERT_TRUE(st.has_value()) << "a withdrawn copy was still stuck after 30 s";
    ASSERT_FALSE(st->ok());
    EXPECT_TRUE(ended_by_withdrawal(*st)) << st->error().message();
    range.serve();
    // Neither side changed: the owner's bytes (a write's destination), and the requester's
    // range (a read's), which faults in zero pages now that it is served.
    for (uint64_t i = 0; i < kLen; ++i)
      ASSERT_EQ(mine[i], 0x33) << "byte " << i << " changed after the copy returned";
    std::vector<uint8_t> theirs(kLen, 0x44);
    bool refused = false;
    Status back = cross_memory_copy(::getpid(), theirs.data(), range.addr(), kLen, false,
                                    std::chrono::steady_clock::now() + 30s, "back", &refused);
    ASSERT_TRUE(back.ok()) << back.error().message();
    for (uint64_t i = 0; i < kLen; ++i)
      ASSERT_EQ(theirs[i], 0) << "byte " << i << " of the requester's range was written";
  }
}

}  // namespace
}  // namespace caf_rdma
