#include "components/qp_blocking.h"

#include <atomic>
#include <memory>
#include <mutex>
#include <thread>

#include "components/rdma_queue_pair.h"
#include "components/stop_signal.h"

namespace caf_rdma {

namespace {

constexpr uint32_t kSpinsBeforeYield = 512;

uint64_t op_bytes(const RdmaOp& op) {
  return detail::is_atomic(op.kind) ? 8 : op.local_length();
}

}  // namespace

// -- the calls --------------------------------------------------------------------------------

OpResult QpBlocking::execute(RdmaOp op, std::chrono::milliseconds timeout,
                             const std::atomic<bool>* stop) {
  // execute_batch for one op, without its per-op vectors and locks (the latency path).
  auto deadline = Clock::now() + timeout;
  if (Status refused = refuse_if_in_error(); !refused.ok())
    return OpResult{refused};
  if (stop_requested(stop))  // invariant 4: nothing posted
    return OpResult{Error(ErrorCode::kCancelled,
                          std::string(to_string(op.kind)) + " of " + std::to_string(op_bytes(op)) +
                              " bytes on " + state_.name + " cancelled before it was posted")};
  // Shared with the callback, which may outlive this call only if a completion was lost.
  struct Waiter {
    std::atomic<bool> finished{false};
    OpResult result;
  };
  auto waiter = std::make_shared<Waiter>();
  const OpKind kind = op.kind;
  const uint64_t bytes = op_bytes(op);
  uint64_t id = 0;
  Status st = qp_.submit_internal(
      std::move(op),
      [waiter](OpResult r) {
        waiter->result = std::move(r);
        waiter->finished.store(true, std::memory_order_release);
      },
      &id);
  if (!st.ok())
    return OpResult{st};
  bool finished_in_time = true;
  const Ended ended = wait_for(
      [&] { return waiter->finished.load(std::memory_order_acquire); }, deadline, timeout, stop,
      &id, 1, [&] { finished_in_time = waiter->finished.load(std::memory_order_acquire); });
  // wait_for returns once the op finished, or after the deadline or the stop: then
  // finished_in_time says whether the op had finished first (its own result stands).
  if (ended != Ended::kFinished && !finished_in_time) {
    OpResult late{ended == Ended::kStopped
                      ? Error(ErrorCode::kCancelled, stopped_message(kind, bytes))
                      : Error(ErrorCode::kTimeout, timeout_message(kind, bytes, timeout))};
    // A list's landed ranges, as its flushed completion said (RdmaQueuePair invariant 13).
    if (waiter->finished.load(std::memory_order_acquire))
      late.list_landed = waiter->result.list_landed;
    return late;
  }
  return std::move(waiter->result);
}

std::vector<OpResult> QpBlocking::execute_batch(std::vector<RdmaOp> ops,
                                                std::chrono::milliseconds timeout) {
  auto deadline = Clock::now() + timeout;
  if (ops.empty())
    return {};
  if (Status refused = refuse_if_in_error(); !refused.ok())
    return std::vector<OpResult>(ops.size(), OpResult{refused});
  // Shared with the callbacks, which may outlive this call only if a callback was lost.
  struct Shared {
    std::mutex mu;
    size_t remaining = 0;
    std::vector<OpResult> results;
    std::vector<bool> finished;
  };
  auto shared = std::make_shared<Shared>();
  shared->results.resize(ops.size());
  shared->finished.assign(ops.size(), false);
  // Kind and size of each op, for timeout messages (built only if one is needed).
  std::vector<std::pair<OpKind, uint64_t>> shapes(ops.size());
  std::vector<uint64_t> ids;
  ids.reserve(ops.size());
  for (size_t i = 0; i < ops.size(); ++i) {
    shapes[i] = {ops[i].kind, op_bytes(ops[i])};
    {
      std::lock_guard<std::mutex> g(shared->mu);
      ++shared->remaining;
    }
    uint64_t id = 0;
    Status st = qp_.submit_internal(
        std::move(ops[i]),
        [shared, i](OpResult r) {
          std::lock_guard<std::mutex> g(shared->mu);
          shared->results[i] = std::move(r);
          shared->finished[i] = true;
          --shared->remaining;
        },
        &id);
    if (st.ok()) {
      ids.push_back(id);
    } else {
      std::lock_guard<std::mutex> g(shared->mu);
      shared->results[i].status = st;
      shared->finished[i] = true;
      --shared->remaining;
    }
  }
  std::vector<bool> finished_in_time;
  const bool timed_out = wait_for(
                             [&] {
                               std::lock_guard<std::mutex> g(shared->mu);
                               return shared->remaining == 0;
                             },
                             deadline, timeout, nullptr, ids.data(), ids.size(),
                             [&] {
                               std::lock_guard<std::mutex> g(shared->mu);
                               finished_in_time = shared->finished;
                             }) != Ended::kFinished;
  std::lock_guard<std::mutex> g(shared->mu);
  if (timed_out)
    for (size_t i = 0; i < shared->results.size(); ++i)
      if (!finished_in_time[i])
        shared->results[i].status =
            Error(ErrorCode::kTimeout, timeout_message(shapes[i].first, shapes[i].second, timeout));
  return std::move(shared->results);
}

Status QpBlocking::refuse_if_in_error() const {
  std::lock_guard<std::mutex> guard(state_.mu);
  if (!state_.error)
    return {};
  return Error(ErrorCode::kInternal, state_.name + " is in ERR (" + state_.error_cause +
                                         ") and takes no more work: use a new queue pair");
}

// -- waiting and timeouts ---------------------------------------------------------------------

QpBlocking::Ended QpBlocking::wait_for(const std::function<bool()>& finished,
                                       Clock::time_point deadline,
                                       std::chrono::milliseconds timeout,
                                       const std::atomic<bool>* stop, const uint64_t* ids,
                                       size_t id_count, const std::function<void()>& at_deadline) {
  Ended ended = Ended::kFinished;
  bool timed_out = false;
  uint32_t idle_polls = 0;
  while (!finished()) {
    if (qp_.progress() > 0) {
      idle_polls = 0;
    } else if (++idle_polls >= kSpinsBeforeYield) {
      // Busy-poll first (a yield is a system call, slow to come back from); then be polite.
      idle_polls = 0;
      std::this_thread::yield();
    }
    // Invariant 4: a stop ends the wait as the deadline does.
    const bool stopped = !timed_out && stop_requested(stop);
    if (!timed_out && (stopped || Clock::now() > deadline)) {
      timed_out = true;
      ended = stopped ? Ended::kStopped : Ended::kDeadline;
      at_deadline();
      withdraw_after_timeout(
          stopped ? ErrorCode::kCancelled : ErrorCode::kTimeout,
          stopped ? std::string("an op was cancelled")
                  : "an op timed out after " + std::to_string(timeout.count()) + " ms",
          ids, id_count);
      deadline = Clock::now() + drain_timeout_ * 2;
    } else if (timed_out && Clock::now() > deadline) {
      break;  // defensive: never hang even if a completion were lost (invariant 3)
    }
  }
  return ended;
}

void QpBlocking::withdraw_after_timeout(ErrorCode code, const std::string& why, const uint64_t* ids,
                                        size_t id_count) {
  // Flush everything outstanding, then wait (bounded) for the flush to retire it.
  (void)qp_.abort(why);
  Status drained = drain(drain_timeout_);
  QpCompletions::Done done;
  {
    std::lock_guard<std::mutex> poll_guard(state_.poll_lock());
    std::lock_guard<std::mutex> guard(state_.mu);
    if (!drained.ok()) {
      // The device did not flush in time: destroying the QP is the only way to be sure.
      qp_.destroy_qp_locked();
      completions_.fail_all_locked(
          Error(ErrorCode::kTimeout, "QP destroyed after " + drained.error().message()), done);
    }
    // The call's ops that were only queued (never posted) are withdrawn too; other callers'
    // queued ops stay until the QP is destroyed.
    std::vector<uint64_t> queued;
    for (size_t i = 0; i < id_count; ++i) {
      auto it = state_.ops.find(ids[i]);
      if (it != state_.ops.end() && it->second->posted == 0) {
        it->second->aborted = true;
        if (!it->second->error)
          it->second->error = Error(code, "withdrawn after " + why);
        queued.push_back(ids[i]);
      }
    }
    for (uint64_t id : queued)
      completions_.finish_if_done_locked(id, done);
  }
  QpCompletions::run(done);
}

Status QpBlocking::drain(std::chrono::milliseconds timeout) {
  auto deadline = Clock::now() + timeout;
  while (true) {
    {
      std::lock_guard<std::mutex> guard(state_.mu);
      if (state_.send_in_flight.empty() && state_.recv_in_flight.empty())
        return {};
    }
    if (Clock::now() > deadline) {
      std::lock_guard<std::mutex> guard(state_.mu);
      return Error(ErrorCode::kTimeout,
                   state_.name + ": " + std::to_string(state_.send_in_flight.size()) +
                       " send and " + std::to_string(state_.recv_in_flight.size()) +
                       " receive work requests still outstanding after " +
                       std::to_string(timeout.count()) + " ms");
    }
    if (qp_.progress() == 0)
      std::this_thread::yield();
  }
}

std::string QpBlocking::timeout_message(OpKind kind, uint64_t bytes,
                                        std::chrono::milliseconds timeout) const {
  return std::string(to_string(kind)) + " of " + std::to_string(bytes) + " bytes on " +
         state_.name + " did not complete within " + std::to_string(timeout.count()) +
         " ms; the queue pair was moved to ERR and drained, so the NIC no longer accesses the "
         "buffers; it takes no more work (use a new queue pair)";
}

std::string QpBlocking::stopped_message(OpKind kind, uint64_t bytes) const {
  return std::string(to_string(kind)) + " of " + std::to_string(bytes) + " bytes on " +
         state_.name +
         " cancelled before it completed; the queue pair was moved to ERR and drained, so the "
         "NIC no longer accesses the buffers (some of its bytes may have landed, none lands "
         "later); it takes no more work (use a new queue pair)";
}

}  // namespace caf_rdma
