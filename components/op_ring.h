// OpRing: a ring of transfer descriptors that a producer writes and one consumer drains, laid out
// in plain memory both reach: a GPU kernel through host-mapped memory (the device side follows
// this layout), or host threads. The consumer is the node's ring proxy (actors/ring_proxy.h),
// which moves each descriptor on whatever path its buffers take and counts how it ended.
//
// Invariants:
//  1. Layout (shared with device code; little-endian, 64-bit words): an OpRingHeader, then
//     `capacity` OpRingSlots (a power of two); a producer's ticket t owns slot t % capacity.
//     A slot is published by storing seq = t + 1 after every other field of it (release; on a
//     GPU: the fields, a system-scope fence, then seq); the consumer reads its fields only after
//     it saw that seq (acquire), so it never reads a half-written descriptor.
//  2. Tickets come from one reservation counter all the ring's producers share (one ticket
//     source per ring: a GPU's producers use a counter in device memory, host producers a
//     host atomic, never both on one ring; no system-scope atomics over PCIe needed). A
//     producer takes ticket t only when t < consumed + capacity (a compare-and-swap from t to
//     t + 1 after it read `consumed`): the consumer has taken ticket t - capacity, so no
//     descriptor is overwritten before it was read, and a producer that gives up waiting for
//     room holds no ticket (the ring stays usable).
//  3. The ring has one consumer at a time, which starts at `consumed` (a new consumer of a ring
//     goes on where the last stopped: nothing is taken twice) and takes tickets in order, one at
//     a time, storing `consumed` (release) after it copied a slot out. Every ticket taken ends
//     exactly once, in `done` or in `failed` (release adds); the first to fail keeps its ticket
//     and error code in one word. A producer waits for
//     its work by comparing done + failed with the tickets it published: completions may end
//     out of order, the counters do not say which.
//  4. Every wait (a producer for room, a waiter for completions) has a deadline and says so
//     when it passes (`timeout`, naming the ring's state); nothing waits forever on a consumer
//     that went away.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>

#include "components/op_ring_layout.h"
#include "primitives/status.h"

namespace caf_rdma {

/// A view of a ring in memory someone else owns (host-mapped memory, or a test's buffer).
class OpRing {
public:
  /// Initialises `bytes` of `memory` (64-byte aligned, at least op_ring_bytes(capacity)) as an
  /// empty ring of `capacity` slots, a power of two of at least 2; an error names what is wrong.
  static Result<OpRing> create(void* memory, uint64_t bytes, uint64_t capacity);
  /// A view of a ring `create` initialised (checked: its magic and capacity fit `bytes`).
  static Result<OpRing> attach(void* memory, uint64_t bytes);

  uint64_t capacity() const { return capacity_; }
  OpRingHeader* header() const { return header_; }
  OpRingSlot* slots() const { return slots_; }

  /// Ticket `ticket` ended: well, or with `code` (invariant 3). Any thread (each ticket once).
  void finish(uint64_t ticket, bool ok, ErrorCode code = ErrorCode::kInternal) const;

  // -- counters, for anyone -------------------------------------------------------------------

  uint64_t consumed() const;
  uint64_t done() const;
  uint64_t failed() const;
  /// The first ticket to fail (the first to end so): its ticket and code; nothing when none did.
  std::optional<std::pair<uint64_t, ErrorCode>> first_failure() const;

private:
  OpRing(OpRingHeader* h, uint64_t capacity)
      : header_(h), slots_(reinterpret_cast<OpRingSlot*>(h + 1)), capacity_(capacity) {}

  OpRingHeader* header_;
  OpRingSlot* slots_;
  uint64_t capacity_;
};

/// The ring's one consumer (one thread at a time): takes the descriptors in ticket order.
class OpRingConsumer {
public:
  /// Goes on from the ring's `consumed` (invariant 3).
  explicit OpRingConsumer(OpRing ring) : ring_(ring), next_(ring.consumed()) {}

  /// The next published descriptor, copied out, and its ticket; nothing when the next ticket's
  /// slot is not published yet. Advances `consumed` (invariant 3).
  std::optional<OpRingSlot> take(uint64_t* ticket);
  const OpRing& ring() const { return ring_; }

private:
  OpRing ring_;
  uint64_t next_;  ///< the next ticket
};

/// A producer on the host (a thread standing in for a kernel, or host code that drives a ring
/// of its own): what the device side does, with host atomics. Any number of threads may use
/// one, and its reservation counter may be shared with other host producers of the ring, never
/// with a GPU's (invariant 2).
class OpRingProducer {
public:
  /// Produces into `ring` with tickets from `reserve` (shared by every producer of the ring).
  OpRingProducer(OpRing ring, std::atomic<uint64_t>* reserve) : ring_(ring), reserve_(reserve) {}

  /// Publishes one descriptor (its seq is set here); waits for room up to `timeout`
  /// (invariant 4). Returns its ticket.
  Result<uint64_t> publish(RingOpKind kind, uint32_t pair, uint64_t local_offset,
                           uint64_t remote_offset, uint64_t length, uint64_t operand,
                           std::chrono::milliseconds timeout);
  /// Waits until at least `count` tickets ended (done + failed) or `timeout` passed.
  Status wait_ended(uint64_t count, std::chrono::milliseconds timeout) const;

private:
  OpRing ring_;
  std::atomic<uint64_t>* reserve_;
};

}  // namespace caf_rdma
