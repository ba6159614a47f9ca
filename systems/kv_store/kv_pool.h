// KvPool: first-fit allocator of blocks inside the server's one registered memory pool (offsets
// only; the memory and its registration belong to KvServer). Free neighbours coalesce.
// Thread-safe: the store actor allocates, and a block is freed by its last holder, which may be
// the same-host GET listener's thread (kv_index.h invariant 2).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>

namespace caf_rdma::kv {

class KvPool {
public:
  /// Blocks start at multiples of `alignment` (a power of two).
  explicit KvPool(uint64_t capacity, uint64_t alignment = 64);

  /// Offset of a free block of at least `size` bytes (size > 0), or nullopt when none is free.
  std::optional<uint64_t> allocate(uint64_t size);
  /// Returns the block at `offset` allocated with `size`.
  void free(uint64_t offset, uint64_t size);

  uint64_t capacity() const { return capacity_; }
  uint64_t used() const;
  uint64_t largest_free() const;
  /// Bytes a value of `size` takes in the pool (rounded up to the alignment).
  uint64_t rounded(uint64_t size) const { return (size + alignment_ - 1) & ~(alignment_ - 1); }

private:
  uint64_t capacity_;
  uint64_t alignment_;
  mutable std::mutex mutex_;
  uint64_t used_ = 0;
  std::map<uint64_t, uint64_t> free_;  // offset -> size
};

/// One value's block; returns itself to the pool when the last holder (the index, or a GET
/// still writing from it) lets go, so a replaced or deleted value is never overwritten while
/// it is being read.
class KvBlock {
public:
  KvBlock(std::shared_ptr<KvPool> pool, uint64_t offset, uint64_t length)
      : pool_(std::move(pool)), offset_(offset), length_(length) {}
  ~KvBlock() {
    if (length_ > 0)
      pool_->free(offset_, length_);
  }
  KvBlock(const KvBlock&) = delete;
  KvBlock& operator=(const KvBlock&) = delete;

  uint64_t offset() const { return offset_; }
  uint64_t length() const { return length_; }

private:
  std::shared_ptr<KvPool> pool_;
  uint64_t offset_;
  uint64_t length_;
};

}  // namespace caf_rdma::kv
