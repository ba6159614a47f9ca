// ListStaging: a list's in-band bytes (stream_protocol.h, "CRL1") pass through a staging
// buffer on both sides of the stream channel; this cursor walks the list's ranges in table
// order and copies each block between them and the staging. No CAF.
//
// Invariants:
//  1. Blocks follow each other: the n-th byte of the staging stream is the n-th byte of the
//     list in table order, whatever the block sizes.
//  2. Only the ranges' memory and the staging are touched; the caller names where a range's
//     memory is (`where`), so the owner (its buffer) and the requester (its memory) share it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "components/stream_protocol.h"

namespace caf_rdma {

/// `where(entry)`: the first byte of a range's memory on this side.
template <class Where>
class ListStaging {
public:
  ListStaging(const ListEntry* entries, size_t count, Where where)
      : entries_(entries), count_(count), where_(where) {}

  /// Copies the list's next `n` bytes into `staging` (`to_staging`), or out of it into the
  /// ranges (invariant 1).
  void copy(uint8_t* staging, uint64_t n, bool to_staging) {
    uint64_t at = 0;
    while (at < n && index_ < count_) {
      const ListEntry& e = entries_[index_];
      const uint64_t k = std::min(e.length - into_, n - at);
      uint8_t* here = where_(e) + into_;
      if (to_staging)
        std::memcpy(staging + at, here, k);
      else
        std::memcpy(here, staging + at, k);
      at += k;
      into_ += k;
      if (into_ == e.length) {
        ++index_;
        into_ = 0;
      }
    }
  }

private:
  const ListEntry* entries_;
  size_t count_;
  Where where_;
  size_t index_ = 0;
  uint64_t into_ = 0;  ///< bytes of entries_[index_] behind
};

}  // namespace caf_rdma
