// ListCursor: where a list's in-band bytes (stream_protocol.h, "CRL1") are, on either side of
// the stream channel: it walks the list's ranges in table order and hands out the next block
// of the list as pieces of memory for one vectored socket call (plain TCP: the kernel gathers
// and scatters them), or copies it to or from a staging buffer (TLS, whose records are sealed
// from one buffer). No CAF.
//
// Invariants:
//  1. Blocks follow each other: the n-th byte of the byte stream is the n-th byte of the list in
//     table order, whatever the block sizes and whichever of pieces() and copy() gave them.
//  2. Only the ranges' memory and the staging are touched, and copy() alone touches them; the
//     caller names where a range's memory is (`where`), so the owner (its buffer) and the
//     requester (its memory) share it.
#pragma once

#include <sys/uio.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "components/stream_protocol.h"

namespace caf_rdma {

/// `where(entry)`: the first byte of a range's memory on this side.
template <class Where>
class ListCursor {
public:
  ListCursor(const ListEntry* entries, size_t count, Where where)
      : entries_(entries), count_(count), where_(where) {}

  /// Copies the list's next `n` bytes into `staging` (`to_staging`), or out of it into the
  /// ranges (invariant 1).
  void copy(uint8_t* staging, uint64_t n, bool to_staging) {
    walk(n, [&](uint8_t* here, uint64_t at, uint64_t k) {
      if (to_staging)
        std::memcpy(staging + at, here, k);
      else
        std::memcpy(here, staging + at, k);
    });
  }

  /// The list's next `n` bytes as pieces of memory (into `out`, replaced), in order
  /// (invariant 1): one piece per range or part of one.
  void pieces(uint64_t n, std::vector<iovec>& out) {
    out.clear();
    out.reserve(count_ - index_);  // at most one piece per range left: one allocation
    walk(n, [&](uint8_t* here, uint64_t, uint64_t k) { out.push_back(iovec{here, k}); });
  }

private:
  /// Calls each(memory, bytes of the block before it, length) for the next `n` bytes' parts
  /// of ranges, in table order.
  template <class Each>
  void walk(uint64_t n, Each each) {
    uint64_t at = 0;
    while (at < n && index_ < count_) {
      const ListEntry& e = entries_[index_];
      const uint64_t k = std::min(e.length - into_, n - at);
      each(where_(e) + into_, at, k);
      at += k;
      into_ += k;
      if (into_ == e.length) {
        ++index_;
        into_ = 0;
      }
    }
  }

  const ListEntry* entries_;
  size_t count_;
  Where where_;
  size_t index_ = 0;
  uint64_t into_ = 0;  ///< bytes of entries_[index_] behind
};

}  // namespace caf_rdma
