// Cross-memory copies against a requester that keeps its pages from faulting in (a
// userfaultfd range nobody serves): the owner's copy ends at its deadline or its withdrawal,
// whichever comes first, and no byte lands after it returned (cross_memory.h invariant 6,
// killable_copy.h). Trust, third pass, finding 4: four workers stuck in the kernel, the
// request's 5 s timeout ignored, a release waiting 29.9 s.
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
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
#include "tests/sanitizer_build.h"

namespace caf_rdma {
namespace {

using namespace std::chrono_literals;

constexpr uint64_t kLen = 2 << 20;

/// An anonymous range registered with a userfaultfd that nobody serves: every first touch of
/// a page, the kernel's included, waits until the userfaultfd is closed.
class UnservedRange {
public:
  UnservedRange() {
    if (testing::kThreadSanitizer) {
      why_ =
          "under ThreadSanitizer copies are not killable (components/killable_copy.h, "
          "invariant 5)";
      return;
    }
    fd_ = static_cast<int>(::syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK));
    if (fd_ < 0) {
      why_ = std::string("userfaultfd: ") + errno_string(errno) +
             " (unprivileged userfaultfd is off: vm.unprivileged_userfaultfd; run as root)";
      return;
    }
    uffdio_api api{};
    api.api = UFFD_API;
    if (::ioctl(fd_, UFFDIO_API, &api) != 0) {
      why_ = std::string("UFFDIO_API: ") + errno_string(errno);
      return;
    }
    addr_ = ::mmap(nullptr, kLen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    // Cross-memory attach must reach this process from a copy task (a process of its own:
    // Yama's ptrace_scope 1 refuses it), else there is nothing to stall.
    std::vector<uint8_t> a(64, 1), b(64, 0);
    bool refused = false;
    Status probe =
        cross_memory_copy(::getpid(), b.data(), reinterpret_cast<uint64_t>(a.data()), a.size(),
                          false, std::chrono::steady_clock::now() + 10s, "probe", &refused);
    if (!probe.ok()) {
      why_ = "cross-memory attach is refused here: " + probe.error().message();
      return;
    }
    uffdio_register reg{};
    reg.range.start = reinterpret_cast<uint64_t>(addr_);
    reg.range.len = kLen;
    reg.mode = UFFDIO_REGISTER_MODE_MISSING;
    if (::ioctl(fd_, UFFDIO_REGISTER, &reg) != 0)
      why_ = std::string("UFFDIO_REGISTER: ") + errno_string(errno);
  }
  ~UnservedRange() {
    serve();
    if (addr_ != nullptr)
      ::munmap(addr_, kLen);
  }
  /// Why the range could not be made ("" when it was).
  const std::string& why() const { return why_; }
  uint64_t addr() const { return reinterpret_cast<uint64_t>(addr_); }
  /// Waits (up to 30 s) until some access waits on a page of the range: a copy is stuck.
  bool wait_for_a_stall() const {
    pollfd p{fd_, POLLIN, 0};
    return ::poll(&p, 1, 30000) == 1;
  }
  /// Closes the userfaultfd: waiting accesses and later ones fault in zero pages.
  void serve() {
    if (fd_ >= 0)
      ::close(fd_);
    fd_ = -1;
  }

private:
  int fd_ = -1;
  void* addr_ = nullptr;
  std::string why_;
};

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
