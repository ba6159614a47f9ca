// dmabuf_span: the page-aligned export for a GPU registration, for unaligned sub-ranges of an
// allocation, ranges that cross pages, 4 KiB / 64 KiB / 2 MiB pages and hostile sizes. Pure
// arithmetic: no GPU needed (the real-GPU path is tests/gpu).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <utility>

#include "components/dmabuf_span.h"

namespace caf_rdma {
namespace {

// The invariants of dmabuf_span.h, for any valid input.
void expect_covers(uint64_t addr, uint64_t size, uint64_t page) {
  SCOPED_TRACE("addr " + std::to_string(addr) + " size " + std::to_string(size) + " page " +
               std::to_string(page));
  auto s = dmabuf_span(addr, size, page);
  ASSERT_TRUE(s.ok()) << s.error().to_string();
  EXPECT_EQ(s->start % page, 0u);
  EXPECT_EQ(s->length % page, 0u);
  EXPECT_LE(s->start, addr);
  EXPECT_EQ(s->offset, addr - s->start);
  EXPECT_LT(s->offset, page) << "no page exported before the range";
  EXPECT_GE(s->start + s->length, addr + size);
  EXPECT_LT(s->start + s->length - (addr + size), page) << "no page exported after the range";
}

TEST(DmabufSpan, AnUnalignedSmallAllocationExportsOnlyItsPage) {
  // A 512-byte allocation 256 bytes into a page (what cudaMalloc packs for small sizes).
  const uint64_t base = 0x7f0000200100;
  auto s = dmabuf_span(base, 512, 4096);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->start, 0x7f0000200000u);
  EXPECT_EQ(s->length, 4096u);
  EXPECT_EQ(s->offset, 0x100u);
}

TEST(DmabufSpan, ASubRangeCrossingPagesExportsEveryPageItTouches) {
  // 10 bytes straddling a 64 KiB page boundary: two pages.
  auto s = dmabuf_span(0x10000 - 4, 10, 0x10000);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->start, 0u);
  EXPECT_EQ(s->length, 0x20000u);
  EXPECT_EQ(s->offset, 0x10000u - 4);
  // An aligned range exports exactly itself.
  auto a = dmabuf_span(0x200000, 0x400000, 0x200000);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->start, 0x200000u);
  EXPECT_EQ(a->length, 0x400000u);
  EXPECT_EQ(a->offset, 0u);
}

TEST(DmabufSpan, InvariantsHoldAcrossPageSizesAndOffsets) {
  for (uint64_t page : {uint64_t{4096}, uint64_t{65536}, uint64_t{2} << 20})
    for (uint64_t base : {uint64_t{0x7f0000000000}, uint64_t{0x7f0000000100},
                          uint64_t{0x7f00001fff00}, uint64_t{0x7f0000000fff}})
      for (uint64_t size :
           {uint64_t{1}, uint64_t{255}, uint64_t{4096}, uint64_t{65537}, uint64_t{3} << 20})
        expect_covers(base, size, page);
}

TEST(DmabufSpan, BadInputIsAClearError) {
  auto zero = dmabuf_span(4096, 0, 4096);
  ASSERT_FALSE(zero.ok());
  EXPECT_EQ(zero.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(zero.error().message().find("0 bytes"), std::string::npos) << zero.error().message();
  for (uint64_t page : {uint64_t{0}, uint64_t{3}, uint64_t{4097}}) {
    auto bad = dmabuf_span(4096, 16, page);
    ASSERT_FALSE(bad.ok()) << page;
    EXPECT_EQ(bad.error().code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(bad.error().message().find("page size " + std::to_string(page)), std::string::npos);
  }
  // Wrapping around the address space, by the range or by its last page.
  for (auto [addr, size] : {std::pair<uint64_t, uint64_t>{UINT64_MAX - 10, 100},
                            std::pair<uint64_t, uint64_t>{UINT64_MAX - 4095, 16},
                            std::pair<uint64_t, uint64_t>{1, UINT64_MAX}}) {
    auto wrap = dmabuf_span(addr, size, 4096);
    ASSERT_FALSE(wrap.ok()) << addr << " + " << size;
    EXPECT_EQ(wrap.error().code(), ErrorCode::kOutOfBounds);
    EXPECT_NE(wrap.error().message().find("address space"), std::string::npos);
  }
  // The highest range that fits: the last byte below the last page.
  expect_covers(UINT64_MAX - 8191, 4096, 4096);
}

}  // namespace
}  // namespace caf_rdma
