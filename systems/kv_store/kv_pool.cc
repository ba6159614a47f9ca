#include "systems/kv_store/kv_pool.h"

#include <algorithm>

namespace caf_rdma::kv {

KvPool::KvPool(uint64_t capacity, uint64_t alignment)
    : capacity_(capacity & ~(alignment - 1)), alignment_(alignment) {
  if (capacity_ > 0)
    free_.emplace(0, capacity_);
}

std::optional<uint64_t> KvPool::allocate(uint64_t size) {
  if (size == 0)
    return std::nullopt;
  uint64_t need = rounded(size);
  std::lock_guard<std::mutex> g(mutex_);
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    if (it->second < need)
      continue;
    uint64_t offset = it->first;
    uint64_t rest = it->second - need;
    free_.erase(it);
    if (rest > 0)
      free_.emplace(offset + need, rest);
    used_ += need;
    return offset;
  }
  return std::nullopt;
}

void KvPool::free(uint64_t offset, uint64_t size) {
  uint64_t n = rounded(size);
  std::lock_guard<std::mutex> g(mutex_);
  used_ -= n;
  auto next = free_.lower_bound(offset);
  if (next != free_.end() && offset + n == next->first) {
    n += next->second;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == offset) {
      prev->second += n;
      return;
    }
  }
  free_.emplace(offset, n);
}

uint64_t KvPool::used() const {
  std::lock_guard<std::mutex> g(mutex_);
  return used_;
}

uint64_t KvPool::largest_free() const {
  std::lock_guard<std::mutex> g(mutex_);
  uint64_t best = 0;
  for (const auto& [offset, size] : free_)
    best = std::max(best, size);
  return best;
}

}  // namespace caf_rdma::kv
