// HostMemory (components/host_memory.h): the library's own host memory is zeroed, page-aligned,
// 2 MiB-aligned from 2 MiB, writable to its last byte, and unmapped when it goes unless it was
// leaked; size 0 is refused by name. Single-threaded, so /proc/self/maps is read right after
// each change with nothing else mapping in between.
#include "components/host_memory.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "components/host_mapping.h"

namespace caf_rdma {
namespace {

uint64_t address(const HostMemory& m) {
  return reinterpret_cast<uint64_t>(m.data());
}

TEST(HostMemoryTest, MemoryIsZeroedAlignedAndWritableToItsLastByte) {
  const auto page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  for (uint64_t size : {uint64_t{1}, page, HostMemory::kHugePage - 1, HostMemory::kHugePage,
                        HostMemory::kHugePage + 1, uint64_t{64} << 20}) {
    auto m = HostMemory::allocate(size);
    ASSERT_TRUE(m.ok()) << size << ": " << m.error().to_string();
    ASSERT_EQ(m->size(), size);
    EXPECT_EQ(address(*m) % page, 0u) << size;
    if (size >= HostMemory::kHugePage)
      EXPECT_EQ(address(*m) % HostMemory::kHugePage, 0u) << size;
    else
      EXPECT_FALSE(m->huge_pages()) << size << ": advised below one huge page";
    EXPECT_TRUE(std::all_of(m->data(), m->data() + size, [](uint8_t b) { return b == 0; })) << size;
    std::memset(m->data(), 0xa5, size);
    EXPECT_TRUE(std::all_of(m->data(), m->data() + size, [](uint8_t b) { return b == 0xa5; }))
        << size;
    EXPECT_TRUE(check_host_range(address(*m), size, true).ok()) << size;
  }
}

TEST(HostMemoryTest, SizeZeroIsRefusedByName) {
  auto m = HostMemory::allocate(0);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(m.error().message().find("size 0"), std::string::npos) << m.error().message();
}

// Invariant 3: unmapped when it goes, kept when leaked; a move hands the mapping over.
TEST(HostMemoryTest, TheMappingGoesWithItsOwnerUnlessLeaked) {
  constexpr uint64_t kSize = 3 << 20;
  uint64_t gone = 0, kept = 0;
  {
    auto m = HostMemory::allocate(kSize);
    ASSERT_TRUE(m.ok());
    HostMemory moved = std::move(*m);
    EXPECT_EQ(m->data(), nullptr);
    EXPECT_EQ(m->size(), 0u);
    gone = address(moved);
    EXPECT_TRUE(check_host_range(gone, kSize, true).ok());
  }
  EXPECT_FALSE(check_host_range(gone, kSize, false).ok()) << "still mapped after it went";
  {
    auto m = HostMemory::allocate(kSize);
    ASSERT_TRUE(m.ok());
    kept = address(*m);
    std::memset(m->data(), 7, kSize);
    m->leak();
    EXPECT_EQ(m->data(), nullptr);
  }
  ASSERT_TRUE(check_host_range(kept, kSize, true).ok()) << "a leaked mapping was unmapped";
  const auto* bytes = reinterpret_cast<const uint8_t*>(kept);
  EXPECT_TRUE(std::all_of(bytes, bytes + kSize, [](uint8_t b) { return b == 7; }));
}

}  // namespace
}  // namespace caf_rdma
