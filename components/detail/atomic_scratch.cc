#include "components/detail/atomic_scratch.h"

namespace caf_rdma::detail {

Status AtomicScratch::ensure(RdmaDomain& domain) {
  if (registered())
    return {};
  auto words = std::make_unique<uint64_t[]>(kAtomicSlots);
  CAF_RDMA_ASSIGN_OR_RETURN(
      buffer_, domain.register_local(words.get(), uint64_t{kAtomicSlots} * sizeof(uint64_t)));
  words_ = std::move(words);
  for (int i = kAtomicSlots - 1; i >= 0; --i)
    free_.push_back(i);
  return {};
}

int AtomicScratch::acquire() {
  if (free_.empty())
    return -1;
  int slot = free_.back();
  free_.pop_back();
  return slot;
}

void AtomicScratch::release(int slot) {
  free_.push_back(slot);
}

uint64_t AtomicScratch::value(int slot) const {
  return words_[static_cast<size_t>(slot)];
}

ibv_sge AtomicScratch::sge(int slot) const {
  return ibv_sge{buffer_.addr() + static_cast<uint64_t>(slot) * sizeof(uint64_t), sizeof(uint64_t),
                 buffer_.lkey()};
}

}  // namespace caf_rdma::detail
