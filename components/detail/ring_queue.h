// RingQueue: a first-in first-out queue in one array that grows only when it is full, so a
// queue that keeps its length (the work requests a queue pair has posted) allocates nothing
// once warm, unlike std::deque, which allocates and frees a block every few dozen elements.
//
// Invariants:
//  1. Elements leave in the order they came (pop_front), or the newest first (pop_back).
//  2. Storage is allocated only when an element is added to a full queue (doubled then).
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

namespace caf_rdma::detail {

template <class T>
class RingQueue {
public:
  bool empty() const { return size_ == 0; }
  size_t size() const { return size_; }
  /// The oldest element (the queue is not empty).
  T& front() { return slots_[head_]; }
  const T& front() const { return slots_[head_]; }

  void push_back(T value) {
    if (size_ == slots_.size())
      grow();
    slots_[(head_ + size_) % slots_.size()] = std::move(value);
    ++size_;
  }
  void pop_front() {
    head_ = (head_ + 1) % slots_.size();
    --size_;
  }
  void pop_back() { --size_; }
  void clear() {
    head_ = 0;
    size_ = 0;
  }

private:
  /// Invariant 2: twice the room, the elements moved to its start in order.
  void grow() {
    std::vector<T> bigger(slots_.empty() ? 16 : slots_.size() * 2);
    for (size_t i = 0; i < size_; ++i)
      bigger[i] = std::move(slots_[(head_ + i) % slots_.size()]);
    slots_ = std::move(bigger);
    head_ = 0;
  }

  std::vector<T> slots_;
  size_t head_ = 0;
  size_t size_ = 0;
};

}  // namespace caf_rdma::detail
