#include "components/completion_router.h"

#include <algorithm>

namespace caf_rdma {

namespace {

constexpr int kPollBatch = 32;

void run(CompletedOps& done) {
  for (auto& [callback, result] : done)
    if (callback)
      callback(std::move(result));
  done.clear();
}

}  // namespace

Result<std::shared_ptr<CompletionRouter>> CompletionRouter::create(
    std::shared_ptr<DeviceContext> context, int entries) {
  if (entries < 4)
    return Error(ErrorCode::kInvalidArgument,
                 "a shared completion queue needs 4 or more "
                 "entries, not " +
                     std::to_string(entries));
  CAF_RDMA_ASSIGN_OR_RETURN(auto cq, CompletionQueue::create(std::move(context), entries, false));
  // Invariant 1: a quarter of the entries stays free for completions of destroyed QPs.
  auto granted = static_cast<uint64_t>(cq->entries());
  uint64_t credits = granted - granted / 4;
  return std::shared_ptr<CompletionRouter>(new CompletionRouter(std::move(cq), credits));
}

CompletionRouter::CompletionRouter(std::shared_ptr<CompletionQueue> cq, uint64_t credits)
    : cq_(std::move(cq)), credits_(credits), free_credits_(credits) {}

void CompletionRouter::attach(uint32_t qp_num, CompletionTarget* target) {
  if (targets_.insert_or_assign(qp_num, target).second)
    attached_.fetch_add(1, std::memory_order_relaxed);
}

void CompletionRouter::detach(uint32_t qp_num, const CompletionTarget* target) {
  auto it = targets_.find(qp_num);
  if (it != targets_.end() && it->second == target) {
    targets_.erase(it);
    attached_.fetch_sub(1, std::memory_order_relaxed);
  }
  std::lock_guard<std::mutex> guard(starved_mu_);
  starved_.erase(std::remove(starved_.begin(), starved_.end(), target), starved_.end());
  any_starved_.store(!starved_.empty(), std::memory_order_release);
}

uint32_t CompletionRouter::acquire(uint32_t want, bool resuming) {
  if (!resuming && any_starved_.load(std::memory_order_acquire))
    return 0;  // invariant 5: the waiting targets first
  uint64_t free = free_credits_.load(std::memory_order_relaxed);
  while (free > 0) {
    uint64_t take = std::min<uint64_t>(free, want);
    if (free_credits_.compare_exchange_weak(free, free - take, std::memory_order_relaxed))
      return static_cast<uint32_t>(take);
  }
  return 0;
}

void CompletionRouter::release(uint64_t count) {
  if (count > 0)
    free_credits_.fetch_add(count, std::memory_order_relaxed);
}

void CompletionRouter::park(uint64_t count) {
  parked_ += count;
  parked_count_.store(parked_, std::memory_order_relaxed);
}

void CompletionRouter::wait_for_credit(CompletionTarget* target) {
  std::lock_guard<std::mutex> guard(starved_mu_);
  credit_waits_.fetch_add(1, std::memory_order_relaxed);
  if (std::find(starved_.begin(), starved_.end(), target) == starved_.end())
    starved_.push_back(target);
  any_starved_.store(true, std::memory_order_release);
}

void CompletionRouter::resume_starved_locked(CompletedOps& done) {
  if (!any_starved_.load(std::memory_order_acquire) ||
      free_credits_.load(std::memory_order_relaxed) == 0)
    return;
  std::vector<CompletionTarget*> waiting;
  {
    std::lock_guard<std::mutex> guard(starved_mu_);
    waiting.swap(starved_);
  }
  // Each takes one batch in turn (any_starved_ stays set meanwhile, so a second batch is refused
  // and its target waits again, behind the others); one that finds no credit waits again too.
  size_t served = 0;
  for (; served < waiting.size() && free_credits_.load(std::memory_order_relaxed) > 0; ++served)
    waiting[served]->take_credit(done);
  // No credit left for the rest: they keep their places, ahead of those that just had a turn.
  std::lock_guard<std::mutex> guard(starved_mu_);
  starved_.insert(starved_.begin(), waiting.begin() + static_cast<std::ptrdiff_t>(served),
                  waiting.end());
  any_starved_.store(!starved_.empty(), std::memory_order_release);
}

int CompletionRouter::poll() {
  std::unique_lock<std::mutex> guard(poll_mu_, std::try_to_lock);
  if (!guard.owns_lock())
    return 0;
  // Credits parked before this poll: their completions, if any, are in the CQ now.
  const uint64_t parked = parked_;
  ibv_wc wcs[kPollBatch];
  auto n = cq_->poll(wcs, kPollBatch);
  if (n.ok() && *n < kPollBatch && parked > 0) {
    // The CQ is empty: those completions were taken (and dropped, or retired nothing).
    parked_ -= parked;
    parked_count_.store(parked_, std::memory_order_relaxed);
    release(parked);
  }
  CompletedOps done;
  if (!n.ok()) {
    for (auto& [qp_num, target] : targets_)
      target->take_poll_error(n.error(), done);
  } else if (*n > 0) {
    polls_with_completions_.fetch_add(1, std::memory_order_relaxed);
    completions_.fetch_add(static_cast<uint64_t>(*n), std::memory_order_relaxed);
    // Hand each run of completions of one QP over at once (RC completes each QP in order; runs
    // keep that order).
    int first = 0;
    while (first < *n) {
      int last = first + 1;
      while (last < *n && wcs[last].qp_num == wcs[first].qp_num)
        ++last;
      auto it = targets_.find(wcs[first].qp_num);
      if (it == targets_.end())
        unrouted_.fetch_add(static_cast<uint64_t>(last - first), std::memory_order_relaxed);
      else
        it->second->take_completions(wcs + first, last - first, done);
      first = last;
    }
  }
  resume_starved_locked(done);
  guard.unlock();
  run(done);
  return n.ok() ? *n : 0;
}

CompletionRouter::Stats CompletionRouter::stats() const {
  Stats s;
  s.polls_with_completions = polls_with_completions_.load(std::memory_order_relaxed);
  s.completions = completions_.load(std::memory_order_relaxed);
  s.unrouted = unrouted_.load(std::memory_order_relaxed);
  s.credit_waits = credit_waits_.load(std::memory_order_relaxed);
  s.credits = credits_;
  s.credits_free = free_credits_.load(std::memory_order_relaxed);
  s.credits_parked = parked_count_.load(std::memory_order_relaxed);
  s.attached = attached_.load(std::memory_order_relaxed);
  return s;
}

}  // namespace caf_rdma
