// The memory layout of an OpRing (components/op_ring.h, invariant 1), in one place for host and
// device code: plain structs and constants, no library headers beyond <stdint.h>, so CUDA C++
// (components/op_ring_device.cuh, nvcc -std=c++17) includes it as it is.
#pragma once

#include <stdint.h>

namespace caf_rdma {

/// What a descriptor asks (the consumer's table of buffer pairs names the buffers).
enum class RingOpKind : uint32_t {
  kPut = 1,       ///< write [local_offset, +length) of the pair's local buffer to its remote one
  kGet = 2,       ///< read the remote range into the local one
  kFetchAdd = 3,  ///< add `operand` to the remote 8-byte word; its old value lands locally
};

/// One descriptor (invariant 1). 64 bytes: one cache line, one PCIe write burst.
struct alignas(64) OpRingSlot {
  uint64_t seq;   ///< ticket + 1 once published; anything else: not (yet) this ticket's
  uint32_t kind;  ///< RingOpKind
  uint32_t pair;  ///< index in the consumer's table of (local, remote) buffers
  uint64_t local_offset;
  uint64_t remote_offset;
  uint64_t length;   ///< bytes (8 for a fetch-add)
  uint64_t operand;  ///< fetch-add: the addend
  uint64_t reserved[2];
};
static_assert(sizeof(OpRingSlot) == 64, "a slot is one cache line (device code relies on it)");

/// The ring's header (invariant 1), each counter on its own cache line.
struct alignas(64) OpRingHeader {
  uint64_t magic;     ///< kOpRingMagic once initialised
  uint64_t capacity;  ///< slots, a power of two
  uint64_t pad0[6];
  uint64_t consumed;  ///< tickets the consumer took (written by the consumer)
  uint64_t pad1[7];
  uint64_t done;  ///< tickets that ended well
  uint64_t pad2[7];
  uint64_t failed;  ///< tickets that ended in an error
  /// The first ticket to end in an error (the first to end so, not the lowest): (ticket + 1)
  /// << 8 | its ErrorCode, in one word (0: none).
  uint64_t first_failure;
  uint64_t pad3[6];
};
static_assert(sizeof(OpRingHeader) == 256, "the header is four cache lines");

inline constexpr uint64_t kOpRingMagic = 0x63616672696e6731ull;  // "cafring1"

/// Bytes of a ring of `capacity` slots (header included).
constexpr uint64_t op_ring_bytes(uint64_t capacity) {
  return sizeof(OpRingHeader) + capacity * sizeof(OpRingSlot);
}

/// A ring as device code sees it (a kernel's argument, made by the host: the same layout on
/// both sides). components/op_ring_device.cuh takes it.
struct OpRingDevice {
  OpRingHeader* header;         ///< device pointer of the host-mapped header (slots follow it)
  unsigned long long* reserve;  ///< device memory, zeroed first: the producers' ticket counter
  unsigned long long capacity;  ///< header->capacity, a power of two
};

}  // namespace caf_rdma
