// A copy task's runs (components/detail/copy_task_child.h, killable_copy.h invariant 6): the
// child makes a job's copy in system calls of at most kKernelRun bytes and kRunIov ranges per
// side (a bulk or background child yielding between them). What a user relies on: a list of
// any shape arrives whole and nothing else is touched, whatever the class. The lists here cut
// calls everywhere a run can end: ranges longer than a run, more ranges than a call takes,
// ranges that merge on one side only (the two sides' arrays differ), a copy large enough to run
// in parts on several threads (cross_memory.h invariant 4). Copies within this process (its
// own pid), both directions, every byte checked.
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "components/cross_memory.h"
#include "components/detail/copy_task_child.h"

namespace caf_rdma {
namespace {

struct Layout {
  std::vector<CopySpan> spans;
  uint64_t bytes = 0;
};

/// The lengths of `count` ranges: the first 24 around a run's and a page's, then (in a longer
/// list) one past kCrossMemoryParallelMin and tiny ones.
std::vector<uint64_t> lengths_of(size_t count) {
  const uint64_t around[] = {1,    7,    detail::kKernelRun + 5, 4096, 100, 64 << 10, 3,
                             4095, 4097, detail::kKernelRun - 1, 2,    512};
  const uint64_t tiny[] = {1, 7, 100, 3, 2, 512, 33};
  std::vector<uint64_t> length(count);
  for (size_t i = 0; i < count; ++i)
    length[i] = i < 24    ? around[i % std::size(around)]
                : i == 24 ? kCrossMemoryParallelMin + 4099
                          : tiny[i % std::size(tiny)];
  return length;
}

/// Bytes either side of a list of `length` needs (each range and a byte after it).
uint64_t extent(const std::vector<uint64_t>& length) {
  uint64_t n = 1;
  for (uint64_t l : length)
    n += l + 1;
  return n;
}

/// Ranges of `length`: on this side back to back for the first half (they merge into one
/// entry), a byte apart after; on the other side in the reverse order, a byte apart (never
/// merged).
Layout layout(uint8_t* local, uint8_t* remote, const std::vector<uint64_t>& length) {
  const size_t count = length.size();
  Layout out;
  out.spans.resize(count);
  uint64_t at = 0;
  for (size_t i = 0; i < count; ++i) {
    out.spans[i].local = local + at;
    out.spans[i].length = length[i];
    at += length[i] + (i < count / 2 ? 0 : 1);
    out.bytes += length[i];
  }
  at = 0;
  for (size_t k = count; k-- > 0;) {
    out.spans[k].remote = reinterpret_cast<uint64_t>(remote + at);
    at += length[k] + 1;
  }
  return out;
}

TEST(CopyRuns, ListsOfEveryShapeArriveWholeInEveryClassAndNothingElseIsTouched) {
  struct Shape {
    size_t count;
    const char* what;
  };
  // 12 ranges: 2 cross a run; 2500: several windows of kMaxIov ranges, runs cut at kRunIov
  // ranges, past kCrossMemoryParallelMin (parts on several threads).
  const Shape shapes[] = {{12, "12 ranges"}, {2500, "2500 ranges, in parts"}};
  for (const Shape& shape : shapes) {
    for (Priority p : {Priority::kLatency, Priority::kBulk, Priority::kBackground}) {
      for (bool to_remote : {false, true}) {
        SCOPED_TRACE(std::string(shape.what) + ", " + priority_name(p) +
                     (to_remote ? ", into the other side" : ", out of the other side"));
        const std::vector<uint64_t> length = lengths_of(shape.count);
        std::vector<uint8_t> local(extent(length)), remote(extent(length));
        Layout l = layout(local.data(), remote.data(), length);
        if (shape.count > 12) {
          ASSERT_GT(l.bytes, kCrossMemoryParallelMin) << "the list would run in one part";
        }
        std::vector<uint8_t>& source = to_remote ? local : remote;
        std::vector<uint8_t>& target = to_remote ? remote : local;
        for (size_t i = 0; i < source.size(); ++i)
          source[i] = static_cast<uint8_t>((i * 131 + 7) % 251);
        std::fill(target.begin(), target.end(), 0xEE);
        bool refused = false;
        Status st =
            cross_memory_copy_list(::getpid(), l.spans.data(), l.spans.size(), to_remote,
                                   std::chrono::steady_clock::now() + std::chrono::seconds(30),
                                   "the test's list", &refused, nullptr, {}, p);
        ASSERT_TRUE(st.ok()) << st.error().message();
        // Every range's bytes, then every byte no range names: as they were.
        std::vector<bool> named(target.size(), false);
        for (const CopySpan& s : l.spans) {
          uint8_t* theirs = reinterpret_cast<uint8_t*>(s.remote);
          const uint8_t* from = to_remote ? s.local : theirs;
          const uint8_t* to = to_remote ? theirs : s.local;
          ASSERT_EQ(std::memcmp(from, to, s.length), 0)
              << "a range of " << s.length << " bytes did not arrive whole";
          for (uint64_t b = 0; b < s.length; ++b)
            named[static_cast<size_t>(to - target.data()) + b] = true;
        }
        for (size_t i = 0; i < target.size(); ++i) {
          if (!named[i])
            ASSERT_EQ(target[i], 0xEE) << "byte " << i << ", named by no range, was written";
        }
      }
    }
  }
}

TEST(CopyRuns, EachRunStaysWithinItsBytesAndRangesCoversTheJobInOrderAndSkipsEmptyRanges) {
  // This side: an empty range, 10 bytes, 300 empty ranges, 300 KiB, 400 ranges of 1 byte, 5
  // bytes; the other side: the same bytes as 2 ranges (one of them past a run) and an empty
  // one between.
  std::vector<uint8_t> a(10 + (300 << 10) + 400 + 5), b(a.size());
  std::vector<iovec> mine{{a.data(), 0}, {a.data(), 10}};
  for (int i = 0; i < 300; ++i)
    mine.push_back({a.data() + 10, 0});
  mine.push_back({a.data() + 10, 300 << 10});
  uint64_t at = 10 + (300 << 10);
  for (int i = 0; i < 400; ++i, ++at)
    mine.push_back({a.data() + at, 1});
  mine.push_back({a.data() + at, 5});
  const std::vector<iovec> theirs{{b.data(), 7}, {b.data() + 7, 0}, {b.data() + 7, b.size() - 7}};
  detail::IovCursor m{mine.data(), mine.size()}, t{theirs.data(), theirs.size()};
  iovec mv[detail::kRunIov], tv[detail::kRunIov];
  uint64_t a_at = 0, b_at = 0, runs = 0;
  for (;;) {
    unsigned long mk = 0, tk = 0;
    const uint64_t bytes = detail::next_run(m, t, mv, &mk, tv, &tk);
    if (bytes == 0)
      break;
    ++runs;
    ASSERT_LE(bytes, detail::kKernelRun) << "run " << runs;
    ASSERT_LE(mk, detail::kRunIov);
    ASSERT_LE(tk, detail::kRunIov);
    uint64_t ms = 0, ts = 0;
    // Each side's entries continue the job where the last run ended, none empty.
    for (unsigned long i = 0; i < mk; ++i) {
      ASSERT_GT(mv[i].iov_len, 0u) << "an empty entry in run " << runs;
      ASSERT_EQ(static_cast<uint8_t*>(mv[i].iov_base), a.data() + a_at) << "run " << runs;
      a_at += mv[i].iov_len;
      ms += mv[i].iov_len;
    }
    for (unsigned long i = 0; i < tk; ++i) {
      ASSERT_GT(tv[i].iov_len, 0u) << "an empty entry in run " << runs;
      ASSERT_EQ(static_cast<uint8_t*>(tv[i].iov_base), b.data() + b_at) << "run " << runs;
      b_at += tv[i].iov_len;
      ts += tv[i].iov_len;
    }
    ASSERT_EQ(ms, bytes);
    ASSERT_EQ(ts, bytes);
  }
  EXPECT_EQ(a_at, a.size()) << "the runs did not cover the job";
  EXPECT_EQ(b_at, b.size());
  EXPECT_GE(runs, 3u) << "300 KiB and 400 ranges in fewer than 3 runs";
}

TEST(CopyRuns, ACopyThatMeetsAnUnmappedPageMovesTheBytesBeforeItThenSaysWhy) {
  const uint64_t kPage = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  const uint64_t kBefore = 2 * detail::kKernelRun + 3 * kPage;  // past two runs
  const uint64_t kLen = kBefore + 4 * kPage;
  for (Priority p : {Priority::kLatency, Priority::kBulk}) {
    SCOPED_TRACE(priority_name(p));
    void* area = ::mmap(nullptr, kLen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(area, MAP_FAILED);
    auto* theirs = static_cast<uint8_t*>(area);
    for (uint64_t i = 0; i < kLen; ++i)
      theirs[i] = static_cast<uint8_t>((i * 131 + 7) % 251);
    ASSERT_EQ(::munmap(theirs + kBefore, kPage), 0);  // the hole
    std::vector<uint8_t> mine(kLen, 0xEE);
    const CopySpan span{mine.data(), reinterpret_cast<uint64_t>(theirs), kLen};
    bool refused = false;
    Status st = cross_memory_copy_list(::getpid(), &span, 1, false,
                                       std::chrono::steady_clock::now() + std::chrono::seconds(30),
                                       "buffer 9 offset 0", &refused, nullptr, {}, p);
    ASSERT_FALSE(st.ok()) << "a copy over an unmapped page succeeded";
    EXPECT_FALSE(refused) << "bytes moved, yet it says the kernel refused before any";
    EXPECT_EQ(st.error().code(), ErrorCode::kInvalidArgument) << st.error().message();
    EXPECT_NE(st.error().message().find("buffer 9 offset 0"), std::string::npos)
        << st.error().message();
    for (uint64_t i = 0; i < kBefore; ++i)
      ASSERT_EQ(mine[i], theirs[i]) << "byte " << i << ", before the hole, did not arrive";
    for (uint64_t i = kBefore; i < kLen; ++i)
      ASSERT_EQ(mine[i], 0xEE) << "byte " << i << ", at or past the hole, was written";
    ::munmap(theirs, kBefore);
    ::munmap(theirs + kBefore + kPage, kLen - kBefore - kPage);
  }
}

}  // namespace
}  // namespace caf_rdma
