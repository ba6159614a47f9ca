// UnservedRange: memory whose pages never fault in until the test says so (a userfaultfd
// range nobody serves), to hold a cross-memory copy stuck in the kernel (killable_copy.h). A
// test helper; it says why when it cannot be made (ThreadSanitizer, userfaultfd refused,
// cross-memory attach refused) and the test skips with that reason.
//
// Invariants:
//  1. Every first touch of a page of the range, the kernel's included, waits until serve() or
//     the destructor closes the userfaultfd; then it faults in a zero page.
#pragma once

#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "components/cross_memory.h"
#include "tests/sanitizer_build.h"

namespace caf_rdma {

/// An anonymous range registered with a userfaultfd that nobody serves: every first touch of
/// a page, the kernel's included, waits until the userfaultfd is closed.
class UnservedRange {
public:
  /// The range's length.
  static constexpr uint64_t kLen = 2 << 20;

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
    Status probe = cross_memory_copy(
        ::getpid(), b.data(), reinterpret_cast<uint64_t>(a.data()), a.size(), false,
        std::chrono::steady_clock::now() + std::chrono::seconds(10), "probe", &refused);
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
  /// serve(), then the first byte of the range that is not zero ("" when none): a copy still
  /// waiting on the range would have written it once served.
  std::string first_written_once_served() {
    serve();
    const auto* bytes = static_cast<const uint8_t*>(addr_);
    for (uint64_t i = 0; i < kLen; ++i)
      if (bytes[i] != 0)
        return "byte " + std::to_string(i) + " of " + std::to_string(kLen);
    return "";
  }

private:
  int fd_ = -1;
  void* addr_ = nullptr;
  std::string why_;
};

}  // namespace caf_rdma
