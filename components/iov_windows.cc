// IovWindows (see iov_windows.h).
#include "components/iov_windows.h"

#include <algorithm>

namespace caf_rdma {

uint64_t IovWindows::fill(SpanCursor at, uint64_t max_bytes, size_t max_iov,
                          std::vector<iovec>& mine, std::vector<iovec>& theirs) const {
  mine.clear();
  theirs.clear();
  uint64_t bytes = 0;
  for (size_t i = at.index; i < count_ && bytes < max_bytes && mine.size() < max_iov; ++i) {
    const CopySpan& s = spans_[i];
    const uint64_t skip = i == at.index ? at.offset : 0;
    if (skip >= s.length)
      continue;
    const uint64_t n = std::min(s.length - skip, max_bytes - bytes);
    mine.push_back(iovec{s.local + skip, n});
    theirs.push_back(iovec{reinterpret_cast<void*>(s.remote + skip), n});
    bytes += n;
  }
  return bytes;
}

SpanCursor IovWindows::advance(SpanCursor at, uint64_t bytes) const {
  while (bytes > 0 && at.index < count_) {
    const uint64_t left = spans_[at.index].length - at.offset;
    if (bytes < left) {
      at.offset += bytes;
      return at;
    }
    bytes -= left;
    ++at.index;
    at.offset = 0;
  }
  while (at.index < count_ && at.offset >= spans_[at.index].length) {
    ++at.index;
    at.offset = 0;
  }
  return at;
}

}  // namespace caf_rdma
