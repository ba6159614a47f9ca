// IovWindows (see iov_windows.h).
#include "components/iov_windows.h"

#include <algorithm>

namespace caf_rdma {

namespace {

/// Appends [base, base + n) to `v`, extending its last entry when the two touch.
void append(std::vector<iovec>& v, uint8_t* base, uint64_t n) {
  if (!v.empty() && static_cast<uint8_t*>(v.back().iov_base) + v.back().iov_len == base)
    v.back().iov_len += n;
  else
    v.push_back(iovec{base, n});
}

}  // namespace

uint64_t IovWindows::fill(SpanCursor at, uint64_t max_bytes, size_t max_iov,
                          std::vector<iovec>& mine, std::vector<iovec>& theirs) const {
  mine.clear();
  theirs.clear();
  uint64_t bytes = 0;
  for (size_t i = at.index;
       i < count_ && bytes < max_bytes && mine.size() < max_iov && theirs.size() < max_iov; ++i) {
    const CopySpan& s = spans_[i];
    const uint64_t skip = i == at.index ? at.offset : 0;
    if (skip >= s.length)
      continue;
    const uint64_t n = std::min(s.length - skip, max_bytes - bytes);
    append(mine, s.local + skip, n);
    append(theirs, reinterpret_cast<uint8_t*>(s.remote + skip), n);
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
