// MemoryRegion without a device: the advice a failed pin gives (the real failure, ENOMEM from
// ibv_reg_mr under a small RLIMIT_MEMLOCK, is DomainTest.PinningBeyondTheLockedMemoryLimit...
// in tests/components/rdma_domain_test.cc, on a device).
#include "primitives/memory_region.h"

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <string>

namespace caf_rdma {
namespace {

TEST(MemlockHint, NamesTheLimitTheSizeAndHowToRaiseIt) {
  std::string hint = memlock_hint(uint64_t{1} << 20, uint64_t{64} << 10, false);
  EXPECT_NE(hint.find("RLIMIT_MEMLOCK"), std::string::npos) << hint;
  EXPECT_NE(hint.find("ulimit -l"), std::string::npos) << hint;
  EXPECT_NE(hint.find("is 64 KiB"), std::string::npos) << hint;
  EXPECT_NE(hint.find("pins 1024 KiB"), std::string::npos) << hint;
  EXPECT_NE(hint.find("LimitMEMLOCK=infinity"), std::string::npos) << hint;
  EXPECT_NE(hint.find("CAP_IPC_LOCK"), std::string::npos) << hint;
  // Sizes round up to whole KiB.
  EXPECT_NE(memlock_hint(1, 8192, false).find("pins 1 KiB"), std::string::npos);
}

TEST(MemlockHint, SilentWhenTheLimitCannotBeTheCause) {
  EXPECT_EQ(memlock_hint(uint64_t{1} << 30, RLIM_INFINITY, false), "");
  EXPECT_EQ(memlock_hint(uint64_t{1} << 30, uint64_t{64} << 10, true), "")
      << "CAP_IPC_LOCK bypasses it";
}

TEST(AccessFlags, RemoteRightsFollowTheAccessKind) {
  EXPECT_EQ(access_flags(Access::kReadOnly), IBV_ACCESS_REMOTE_READ);
  EXPECT_EQ(access_flags(Access::kLocalWrite), IBV_ACCESS_LOCAL_WRITE);
  int rw = access_flags(Access::kReadWrite);
  EXPECT_TRUE(rw & IBV_ACCESS_REMOTE_WRITE);
  EXPECT_TRUE(rw & IBV_ACCESS_REMOTE_READ);
  EXPECT_TRUE(rw & IBV_ACCESS_LOCAL_WRITE);
}

}  // namespace
}  // namespace caf_rdma
