// RingMemory: 64-byte aligned memory for an OpRing of a given capacity (what cudaHostAlloc gives
// a GPU producer), for the ring's tests (tests/components/op_ring_test.cc,
// tests/actors/ring_proxy_test.cc).
#pragma once

#include <cstdint>
#include <cstdlib>
#include <memory>

#include "components/op_ring_layout.h"

namespace caf_rdma {

struct RingMemory {
  explicit RingMemory(uint64_t capacity) : bytes(op_ring_bytes(capacity)) {
    mem.reset(static_cast<uint8_t*>(std::aligned_alloc(64, bytes)));
  }
  struct Free {
    void operator()(uint8_t* p) const { std::free(p); }
  };
  uint64_t bytes;
  std::unique_ptr<uint8_t, Free> mem;
};

}  // namespace caf_rdma
