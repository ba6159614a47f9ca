// StopSignal: the request that one running transfer stop, made from another thread (a
// CancelToken's, actors/cancel_token.h). The transfer's steps look at its flag between pieces
// of work; a step that blocks in a system call (a socket's send or receive, an owner's answer)
// arms a waker, e.g. one that shuts its socket down, for as long as it blocks. No CAF.
//
// Invariants:
//  1. request() sets the flag (release), then runs the armed waker, if any, under the signal's
//     lock. A waker armed after the request runs at once, in the arming: a step that looks at
//     the flag, arms and then blocks is always woken, whichever came first.
//  2. Disarming (Armed's destructor) takes the same lock: once it returned, its waker never runs
//     again, so a waker may refer to its step's objects. A waker may take locks of its own; a
//     step never arms or disarms while it holds one of them (request() holds the signal's lock
//     while it runs the waker).
//  3. One waker at a time: a transfer's steps run one after another on one thread. A waker may
//     run twice (a request racing its arming): wakers are idempotent (shutting a socket down).
#pragma once

#include <atomic>
#include <functional>
#include <mutex>

namespace caf_rdma {

class StopSignal {
public:
  StopSignal() = default;
  StopSignal(const StopSignal&) = delete;
  StopSignal& operator=(const StopSignal&) = delete;

  /// Invariant 1: sets the flag, then wakes the step that blocks (if one is armed).
  void request();
  bool requested() const { return flag_.load(std::memory_order_acquire); }
  /// The flag, for steps that only poll (a queue pair's wait: components/qp_blocking.h).
  const std::atomic<bool>* flag() const { return &flag_; }

  /// A step's waker, armed from construction to destruction (invariants 1 and 2). A null
  /// signal arms nothing.
  class Armed {
  public:
    Armed(const StopSignal* signal, std::function<void()> waker);
    ~Armed();
    Armed(const Armed&) = delete;
    Armed& operator=(const Armed&) = delete;

  private:
    const StopSignal* signal_;
  };

private:
  std::atomic<bool> flag_{false};
  mutable std::mutex mu_;
  mutable std::function<void()> waker_;  ///< the armed step's, or empty
};

/// Whether `stop` (null: none) was requested: the one test every step makes.
inline bool stop_requested(const std::atomic<bool>* stop) {
  return stop != nullptr && stop->load(std::memory_order_acquire);
}
inline bool stop_requested(const StopSignal* stop) {
  return stop != nullptr && stop->requested();
}
/// The flag of `stop` (null: none), for a step that only polls.
inline const std::atomic<bool>* stop_flag(const StopSignal* stop) {
  return stop != nullptr ? stop->flag() : nullptr;
}

}  // namespace caf_rdma
