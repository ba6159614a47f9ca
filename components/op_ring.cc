// OpRing (see op_ring.h).
#include "components/op_ring.h"

#include <cstring>
#include <string>
#include <thread>

namespace caf_rdma {

namespace {

// The ring's words are shared with a producer this process may not control (a GPU kernel):
// plain memory, read and written with the compiler's atomic builtins.
uint64_t load_acquire(const uint64_t* p) {
  return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}
void store_release(uint64_t* p, uint64_t v) {
  __atomic_store_n(p, v, __ATOMIC_RELEASE);
}

std::string ring_state(const OpRing& r) {
  return "(capacity " + std::to_string(r.capacity()) + ", taken " + std::to_string(r.consumed()) +
         ", done " + std::to_string(r.done()) + ", failed " + std::to_string(r.failed()) + ")";
}

/// Waits until `ready()` or `timeout`, spinning briefly and then yielding the core.
template <class Ready>
bool wait_until(Ready ready, std::chrono::milliseconds timeout) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  for (uint32_t spins = 0; !ready(); ++spins) {
    if (spins >= 64)
      std::this_thread::yield();
    if ((spins & 1023) == 0 && std::chrono::steady_clock::now() >= until)
      return ready();
  }
  return true;
}

}  // namespace

Result<OpRing> OpRing::create(void* memory, uint64_t bytes, uint64_t capacity) {
  if (capacity < 2 || (capacity & (capacity - 1)) != 0)
    return Error(ErrorCode::kInvalidArgument,
                 "an op ring's capacity is a power of two of at "
                 "least 2, not " +
                     std::to_string(capacity));
  if (memory == nullptr || reinterpret_cast<uintptr_t>(memory) % alignof(OpRingHeader) != 0)
    return Error(ErrorCode::kInvalidArgument, "an op ring's memory is 64-byte aligned");
  if (capacity > (UINT64_MAX - sizeof(OpRingHeader)) / sizeof(OpRingSlot) ||
      bytes < op_ring_bytes(capacity))
    return Error(ErrorCode::kInvalidArgument, "an op ring of " + std::to_string(capacity) +
                                                  " slots needs " +
                                                  std::to_string(op_ring_bytes(capacity)) +
                                                  " bytes, not " + std::to_string(bytes));
  std::memset(memory, 0, op_ring_bytes(capacity));
  auto* h = static_cast<OpRingHeader*>(memory);
  h->capacity = capacity;
  store_release(&h->magic, kOpRingMagic);
  return OpRing(h, capacity);
}

Result<OpRing> OpRing::attach(void* memory, uint64_t bytes) {
  if (memory == nullptr || reinterpret_cast<uintptr_t>(memory) % alignof(OpRingHeader) != 0 ||
      bytes < sizeof(OpRingHeader))
    return Error(ErrorCode::kInvalidArgument,
                 "an op ring's memory is 64-byte aligned and holds its header (" +
                     std::to_string(sizeof(OpRingHeader)) + " bytes)");
  auto* h = static_cast<OpRingHeader*>(memory);
  if (load_acquire(&h->magic) != kOpRingMagic)
    return Error(ErrorCode::kInvalidArgument, "no op ring here (OpRing::create made none)");
  const uint64_t capacity = h->capacity;
  if (capacity < 2 || (capacity & (capacity - 1)) != 0 ||
      capacity > (UINT64_MAX - sizeof(OpRingHeader)) / sizeof(OpRingSlot) ||
      bytes < op_ring_bytes(capacity))
    return Error(ErrorCode::kInvalidArgument, "the op ring's header says " +
                                                  std::to_string(capacity) + " slots, which " +
                                                  std::to_string(bytes) + " bytes cannot hold");
  return OpRing(h, capacity);
}

std::optional<OpRingSlot> OpRingConsumer::take(uint64_t* ticket) {
  OpRingSlot& s = ring_.slots()[next_ & (ring_.capacity() - 1)];
  if (load_acquire(&s.seq) != next_ + 1)
    return std::nullopt;  // not published yet (invariant 1)
  OpRingSlot copy;
  std::memcpy(&copy, &s, sizeof(copy));
  *ticket = next_++;
  store_release(&ring_.header()->consumed, next_);  // its slot may be written again (invariant 2)
  return copy;
}

void OpRing::finish(uint64_t ticket, bool ok, ErrorCode code) const {
  if (!ok) {
    // The first to fail keeps its ticket and code, in one word (invariant 3).
    uint64_t none = 0;
    const uint64_t word = (ticket + 1) << 8 | static_cast<uint8_t>(code);
    __atomic_compare_exchange_n(&header_->first_failure, &none, word, false, __ATOMIC_RELEASE,
                                __ATOMIC_RELAXED);
  }
  __atomic_add_fetch(ok ? &header_->done : &header_->failed, 1, __ATOMIC_RELEASE);
}

uint64_t OpRing::consumed() const {
  return load_acquire(&header_->consumed);
}
uint64_t OpRing::done() const {
  return load_acquire(&header_->done);
}
uint64_t OpRing::failed() const {
  return load_acquire(&header_->failed);
}

std::optional<std::pair<uint64_t, ErrorCode>> OpRing::first_failure() const {
  const uint64_t w = load_acquire(&header_->first_failure);
  if (w == 0)
    return std::nullopt;
  return std::make_pair((w >> 8) - 1, static_cast<ErrorCode>(w & 0xff));
}

Result<uint64_t> OpRingProducer::publish(RingOpKind kind, uint32_t pair, uint64_t local_offset,
                                         uint64_t remote_offset, uint64_t length, uint64_t operand,
                                         std::chrono::milliseconds timeout) {
  const uint64_t cap = ring_.capacity();
  // Invariant 2: a ticket only with room for it, so giving up holds none.
  uint64_t t = reserve_->load(std::memory_order_relaxed);
  const bool got = wait_until(
      [&] {
        if (t >= ring_.consumed() + cap) {
          t = reserve_->load(std::memory_order_relaxed);
          return false;
        }
        return reserve_->compare_exchange_weak(t, t + 1, std::memory_order_relaxed);
      },
      timeout);
  if (!got)
    return Error(ErrorCode::kTimeout, "an op ring descriptor found no room within " +
                                          std::to_string(timeout.count()) +
                                          " ms: its consumer took too few " + ring_state(ring_) +
                                          "; nothing was published");
  OpRingSlot& s = ring_.slots()[t & (cap - 1)];
  s.kind = static_cast<uint32_t>(kind);
  s.pair = pair;
  s.local_offset = local_offset;
  s.remote_offset = remote_offset;
  s.length = length;
  s.operand = operand;
  store_release(&s.seq, t + 1);  // invariant 1: published last
  return t;
}

Status OpRingProducer::wait_ended(uint64_t count, std::chrono::milliseconds timeout) const {
  if (wait_until([&] { return ring_.done() + ring_.failed() >= count; }, timeout))
    return {};
  return Error(ErrorCode::kTimeout, "waited " + std::to_string(timeout.count()) + " ms for " +
                                        std::to_string(count) + " op ring descriptors to end " +
                                        ring_state(ring_));
}

}  // namespace caf_rdma
