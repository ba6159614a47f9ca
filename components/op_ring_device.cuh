// The device side of an OpRing (components/op_ring.h): what a CUDA kernel calls to start
// transfers itself. The ring's header and slots are host-mapped memory (cudaHostAlloc with
// cudaHostAllocMapped, or cuMemHostAlloc with CU_MEMHOSTALLOC_DEVICEMAP: the device pointer of
// that memory goes here); the reservation counter is device memory, zeroed before the first
// kernel, shared by every producer of the ring and by no host producer (op_ring.h invariant 2:
// one ticket source per ring; no system-scope atomics over PCIe are needed). The node's RingProxy
// (actors/ring_proxy.h) drains the ring.
//
//   __global__ void k(caf_rdma::OpRingDevice ring, ...) {
//     caf_rdma::op_ring_put(ring, 0, my_offset, their_offset, 8);
//     ...
//     if (threadIdx.x == 0) caf_rdma::op_ring_wait_ended(ring, expected, 1000000000ull);
//   }
//
// Invariants (those of op_ring.h, device side):
//  1. A descriptor's fields are stored, then a system-scope fence, then its seq: the proxy
//     never reads a half-written descriptor (op_ring.h invariant 1).
//  2. A producer takes a ticket only once the proxy took the one a capacity before it (so one
//     that gives up holds none: op_ring.h invariant 2), and every wait here ends by its deadline
//     (nanoseconds on the GPU's global timer), returning what it found: a kernel never spins for
//     ever on a proxy that went away.
#pragma once

#include "components/op_ring_layout.h"

namespace caf_rdma {

/// Nanoseconds on the GPU's global timer.
__device__ inline unsigned long long op_ring_now() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

/// A counter of the host-mapped header, read with system-scope acquire (PTX ld.acquire.sys):
/// what the host wrote before it is seen after it.
__device__ inline unsigned long long op_ring_load(const uint64_t* p) {
  unsigned long long v;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}

/// Publishes one descriptor; its ticket, or ~0ull when no room came within `timeout_ns`
/// (invariant 2: a ticket is taken only with room for it, so giving up holds none).
__device__ inline unsigned long long op_ring_publish(const OpRingDevice& r, RingOpKind kind,
                                                     uint32_t pair, uint64_t local_offset,
                                                     uint64_t remote_offset, uint64_t length,
                                                     uint64_t operand,
                                                     unsigned long long timeout_ns) {
  const unsigned long long start = op_ring_now();
  unsigned long long t = *reinterpret_cast<volatile unsigned long long*>(r.reserve);
  for (;;) {
    if (t < op_ring_load(&r.header->consumed) + r.capacity) {
      const unsigned long long seen = atomicCAS(r.reserve, t, t + 1);
      if (seen == t)
        break;  // ticket t is ours, and its slot is free
      t = seen;
      continue;
    }
    if (op_ring_now() - start > timeout_ns)
      return ~0ull;
    __nanosleep(256);
    t = *reinterpret_cast<volatile unsigned long long*>(r.reserve);
  }
  OpRingSlot* s = reinterpret_cast<OpRingSlot*>(r.header + 1) + (t & (r.capacity - 1));
  s->kind = static_cast<uint32_t>(kind);
  s->pair = pair;
  s->local_offset = local_offset;
  s->remote_offset = remote_offset;
  s->length = length;
  s->operand = operand;
  __threadfence_system();  // invariant 1: the fields before the seq, as the host sees them
  *reinterpret_cast<volatile unsigned long long*>(&s->seq) = t + 1;
  return t;
}

/// A put of [local_offset, +length) of pair `pair`'s local buffer to its remote buffer.
__device__ inline unsigned long long op_ring_put(const OpRingDevice& r, uint32_t pair,
                                                 uint64_t local_offset, uint64_t remote_offset,
                                                 uint64_t length,
                                                 unsigned long long timeout_ns = 1000000000ull) {
  return op_ring_publish(r, RingOpKind::kPut, pair, local_offset, remote_offset, length, 0,
                         timeout_ns);
}

/// A get of the remote range into the local one.
__device__ inline unsigned long long op_ring_get(const OpRingDevice& r, uint32_t pair,
                                                 uint64_t local_offset, uint64_t remote_offset,
                                                 uint64_t length,
                                                 unsigned long long timeout_ns = 1000000000ull) {
  return op_ring_publish(r, RingOpKind::kGet, pair, local_offset, remote_offset, length, 0,
                         timeout_ns);
}

/// A fetch-add of `add` on the remote word at remote_offset; its old value lands in the 8 bytes
/// at local_offset of the pair's local buffer.
__device__ inline unsigned long long op_ring_fetch_add(
    const OpRingDevice& r, uint32_t pair, uint64_t local_offset, uint64_t remote_offset,
    uint64_t add, unsigned long long timeout_ns = 1000000000ull) {
  return op_ring_publish(r, RingOpKind::kFetchAdd, pair, local_offset, remote_offset, 8, add,
                         timeout_ns);
}

/// Waits until at least `count` descriptors ended (done + failed), or `timeout_ns` passed;
/// whether they did. The counters say how many failed (op_ring.h invariant 3).
__device__ inline bool op_ring_wait_ended(const OpRingDevice& r, unsigned long long count,
                                          unsigned long long timeout_ns) {
  const unsigned long long start = op_ring_now();
  while (op_ring_load(&r.header->done) + op_ring_load(&r.header->failed) < count) {
    if (op_ring_now() - start > timeout_ns)
      return false;
    __nanosleep(256);
  }
  __threadfence_system();  // what the ended descriptors brought is read after the counters
  return true;
}

}  // namespace caf_rdma
