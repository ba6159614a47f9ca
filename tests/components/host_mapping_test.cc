// host_mapping: a range of host memory is accepted only when every byte of it is mapped with the
// access its buffer grants. The parser and the coverage check on fixtures (gaps, guard pages,
// read-only mappings, adjacent mappings), then this process's own pages made with mmap and
// mprotect (what a bogus pointer handed to a node without an RDMA device looks like).
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <string>
#include <vector>

#include "components/host_mapping.h"

namespace caf_rdma {
namespace {

const char* const kFixture =
    "00400000-00452000 r-xp 00000000 08:02 173521      /usr/bin/dbus-daemon\n"
    "00651000-00652000 r--p 00051000 08:02 173521      /usr/bin/dbus-daemon\n"
    "00652000-00655000 rw-p 00052000 08:02 173521      /usr/bin/dbus-daemon\n"
    "00655000-00656000 rw-p 00000000 00:00 0\n"
    "00656000-00657000 ---p 00000000 00:00 0\n"
    "00657000-00658000 rw-p 00000000 00:00 0\n"
    "7ffc5a1e2000-7ffc5a203000 rw-p 00000000 00:00 0   [stack]\n"
    "ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0   [vsyscall]\n";

std::vector<HostMapping> fixture() {
  auto m = parse_host_mappings(kFixture);
  EXPECT_TRUE(m.ok()) << m.error().to_string();
  return m.ok() ? *m : std::vector<HostMapping>{};
}

TEST(HostMapping, ParsesEveryLineWithItsPermissions) {
  auto m = fixture();
  ASSERT_EQ(m.size(), 8u);
  EXPECT_EQ(m[0].start, 0x400000u);
  EXPECT_EQ(m[0].end, 0x452000u);
  EXPECT_TRUE(m[0].readable);
  EXPECT_FALSE(m[0].writable);
  EXPECT_TRUE(m[2].writable);
  EXPECT_FALSE(m[4].readable);
  EXPECT_EQ(m[7].start, 0xffffffffff600000u);
  EXPECT_FALSE(m[7].readable);
}

TEST(HostMapping, ALineThatIsNotAMappingIsNamed) {
  auto m = parse_host_mappings("00400000-00452000 r-xp 0 0 0\nhello world\n");
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.error().message().find("hello world"), std::string::npos) << m.error().message();
  EXPECT_FALSE(parse_host_mappings("00452000-00400000 r-xp 0 0 0\n").ok()) << "end before start";
  EXPECT_FALSE(parse_host_mappings("00400000-00452000\n").ok()) << "no permissions";
}

TEST(HostMapping, ARangeAcrossAdjacentWritableMappingsIsAccepted) {
  auto m = fixture();
  EXPECT_TRUE(check_mapped(m, 0x652000, 0x4000, true).ok()) << "two adjacent rw- mappings";
  EXPECT_TRUE(check_mapped(m, 0x654fff, 2, true).ok()) << "the last byte of one, first of next";
  EXPECT_TRUE(check_mapped(m, 0x7ffc5a1e2000, 0x21000, true).ok()) << "the whole stack";
}

TEST(HostMapping, AGapIsRefusedNamingItsFirstByte) {
  auto m = fixture();
  auto s = check_mapped(m, 0x451000, 0x2000, false);  // runs past 0x452000 into nothing
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(s.error().message().find("0x452000"), std::string::npos) << s.error().message();
  EXPECT_NE(s.error().message().find("not mapped"), std::string::npos) << s.error().message();
  EXPECT_FALSE(check_mapped(m, 0x1000, 16, false).ok()) << "below every mapping";
  EXPECT_FALSE(check_mapped(m, 0x7ffc5a203000, 1, false).ok()) << "one past the stack";
  EXPECT_FALSE(check_mapped({}, 0x400000, 1, false).ok()) << "no mappings at all";
}

TEST(HostMapping, AGuardPageInsideTheRangeIsRefused) {
  auto m = fixture();
  auto s = check_mapped(m, 0x655000, 0x3000, false);  // rw-, ---, rw-
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message().find("0x656000"), std::string::npos) << s.error().message();
  EXPECT_NE(s.error().message().find("without read access"), std::string::npos)
      << s.error().message();
}

TEST(HostMapping, ReadOnlyMemoryIsAcceptedForReadingOnly) {
  auto m = fixture();
  EXPECT_TRUE(check_mapped(m, 0x651000, 0x1000, false).ok());
  auto s = check_mapped(m, 0x651800, 0x1000, true);  // r--p then rw-p
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message().find("0x651800"), std::string::npos) << s.error().message();
  EXPECT_NE(s.error().message().find("without write access"), std::string::npos)
      << s.error().message();
}

TEST(HostMapping, ARangeWrappingTheAddressSpaceIsRefused) {
  auto m = fixture();
  EXPECT_FALSE(check_mapped(m, UINT64_MAX - 4, 16, false).ok());
}

// This process's own memory: pages made with mmap, one of them then protected or unmapped.
class OwnPages : public ::testing::Test {
protected:
  void SetUp() override {
    page_ = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
    void* p =
        ::mmap(nullptr, 4 * page_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(p, MAP_FAILED);
    base_ = static_cast<char*>(p);
  }
  void TearDown() override {
    if (base_)
      ::munmap(base_, 4 * page_);
  }
  uint64_t at(size_t page, size_t offset = 0) const {
    return reinterpret_cast<uint64_t>(base_ + page * page_ + offset);
  }

  size_t page_ = 0;
  char* base_ = nullptr;
};

TEST_F(OwnPages, MemoryOfThisProcessIsAcceptedWithItsAccess) {
  EXPECT_TRUE(check_host_range(at(0), 4 * page_, true).ok());
  EXPECT_TRUE(check_host_range(at(1, 7), page_, true).ok()) << "unaligned, across pages";
  std::vector<char> heap(1000);
  EXPECT_TRUE(check_host_range(reinterpret_cast<uint64_t>(heap.data()), 1000, true).ok());
  int on_stack = 0;
  EXPECT_TRUE(check_host_range(reinterpret_cast<uint64_t>(&on_stack), sizeof(on_stack), true).ok());
}

TEST_F(OwnPages, AProtectedPageIsRefusedAndAReadOnlyOneOnlyForWriting) {
  ASSERT_EQ(::mprotect(base_ + 2 * page_, page_, PROT_NONE), 0);
  auto s = check_host_range(at(1), 2 * page_, false);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message().find("without read access"), std::string::npos)
      << s.error().message();
  ASSERT_EQ(::mprotect(base_ + 2 * page_, page_, PROT_READ), 0);
  EXPECT_TRUE(check_host_range(at(1), 2 * page_, false).ok());
  s = check_host_range(at(1), 2 * page_, true);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message().find("without write access"), std::string::npos)
      << s.error().message();
}

TEST_F(OwnPages, AnUnmappedPageIsRefused) {
  ASSERT_EQ(::munmap(base_ + 3 * page_, page_), 0);
  auto s = check_host_range(at(2), 2 * page_, false);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message().find("not mapped"), std::string::npos) << s.error().message();
  EXPECT_TRUE(check_host_range(at(0), 3 * page_, true).ok());
  ::munmap(base_, 3 * page_);
  base_ = nullptr;
}

TEST(HostMapping, ABogusPointerIsRefused) {
  EXPECT_FALSE(check_host_range(8, 4096, false).ok()) << "the zero page is never mapped";
  EXPECT_FALSE(check_host_range(0xdead0000000000ull, 64, false).ok());
}

}  // namespace
}  // namespace caf_rdma
