// CompletionPoller: one thread that drives `progress()` of a set of queue pairs, so callers
// (e.g. an actor) never block on a completion queue.
//
// Invariants:
//  1. While any registered queue pair has an op outstanding, the thread polls (yielding now and
//     then); after 200 us without a completion it naps 20 us between polls, so a long wait does
//     not take a CPU from the rest of the process (or from a software device such as rxe, which
//     needs it to make progress). When all are idle it sleeps until `wake()` (or 10 ms; 1 s
//     without queue pairs): submitters wake it, the timed wake-up is a safety net.
//  2. A queue pair removed with `remove` is no longer polled after `remove` returns, and stays
//     alive while a poll on it is running (shared ownership).
//  3. The destructor stops and joins the thread.
//  4. Queue pairs on a shared completion queue (RdmaQueuePair invariant 10) are polled through
//     it: one sweep polls each shared CQ once, whatever the number of its queue pairs.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "components/qp_endpoint.h"

namespace caf_rdma {

class CompletionPoller {
public:
  CompletionPoller();
  ~CompletionPoller();
  CompletionPoller(const CompletionPoller&) = delete;
  CompletionPoller& operator=(const CompletionPoller&) = delete;

  void add(std::shared_ptr<QpEndpoint> qp);
  void remove(const QpEndpoint* qp);
  /// Call after submitting work, so an idle poller starts polling at once.
  void wake();
  /// Completion queues a sweep polls (invariant 4): the shared ones once each, plus the CQs of
  /// the queue pairs that have their own.
  size_t sources() const;

private:
  void run();

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::shared_ptr<QpEndpoint>> qps_;
  uint64_t generation_ = 0;
  bool woken_ = false;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace caf_rdma
