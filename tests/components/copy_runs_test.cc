// A copy task's runs (components/detail/copy_task_child.h, killable_copy.h invariant 6): the
// child makes a job's copy in system calls of at most kKernelRun bytes and kRunIov ranges per
// side (a bulk or background child yielding between them). What a user relies on: a list of
// any shape arrives whole and nothing else is touched, whatever the class. The lists here cut
// calls everywhere a run can end: ranges longer than a run, more ranges than a call takes,
// ranges that merge on one side only (the two sides' arrays differ), a copy large enough to run
// in parts on several threads (cross_memory.h invariant 4). Copies within this process (its
// own pid), both directions, every byte checked.
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

}  // namespace
}  // namespace caf_rdma
