#include "components/completion_poller.h"

#include <algorithm>
#include <chrono>

namespace caf_rdma {

namespace {

constexpr uint32_t kSpinsBeforeYield = 256;
// Outstanding work but no completion for this long: nap between polls instead of spinning.
constexpr auto kSpinBudget = std::chrono::microseconds(200);
constexpr auto kBusyNap = std::chrono::microseconds(20);
constexpr auto kIdleWait = std::chrono::milliseconds(10);  // idle QPs: safety net
constexpr auto kIdleWaitEmpty = std::chrono::seconds(1);   // no QPs: add() wakes us

}  // namespace

CompletionPoller::CompletionPoller() : thread_([this] { run(); }) {}

CompletionPoller::~CompletionPoller() {
  {
    std::lock_guard<std::mutex> guard(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void CompletionPoller::add(std::shared_ptr<QpEndpoint> qp) {
  {
    std::lock_guard<std::mutex> guard(mu_);
    qps_.push_back(std::move(qp));
    ++generation_;
    woken_ = true;
  }
  cv_.notify_all();
}

void CompletionPoller::remove(const QpEndpoint* qp) {
  std::lock_guard<std::mutex> guard(mu_);
  qps_.erase(std::remove_if(qps_.begin(), qps_.end(),
                            [qp](const std::shared_ptr<QpEndpoint>& p) { return p.get() == qp; }),
             qps_.end());
  ++generation_;
}

size_t CompletionPoller::sources() const {
  std::lock_guard<std::mutex> guard(mu_);
  std::vector<const CompletionRouter*> routers;
  size_t own = 0;
  for (const auto& qp : qps_) {
    const CompletionRouter* router = qp->router().get();
    if (router == nullptr)
      ++own;
    else if (std::find(routers.begin(), routers.end(), router) == routers.end())
      routers.push_back(router);
  }
  return own + routers.size();
}

void CompletionPoller::wake() {
  {
    std::lock_guard<std::mutex> guard(mu_);
    woken_ = true;
  }
  cv_.notify_all();
}

void CompletionPoller::run() {
  // What one sweep polls: each QP with a CQ of its own, and each shared CQ once, however many
  // of the QPs share it (invariant 4).
  std::vector<std::shared_ptr<QpEndpoint>> local;
  std::vector<std::shared_ptr<CompletionRouter>> routers;
  uint64_t seen = ~uint64_t{0};
  uint32_t idle_polls = 0;
  std::chrono::steady_clock::time_point spin_start{};
  while (true) {
    {
      std::unique_lock<std::mutex> guard(mu_);
      if (stop_)
        return;
      if (seen != generation_) {
        local.clear();
        routers.clear();
        for (const auto& qp : qps_) {
          const auto& router = qp->router();
          if (!router)
            local.push_back(qp);
          else if (std::find(routers.begin(), routers.end(), router) == routers.end())
            routers.push_back(router);
        }
        seen = generation_;
      }
      woken_ = false;
    }
    int handled = 0;
    bool busy = false;
    for (auto& qp : local) {
      handled += qp->progress();
      busy = busy || !qp->idle();
    }
    for (auto& router : routers) {
      handled += router->poll();
      busy = busy || !router->idle();
    }
    if (handled > 0) {
      idle_polls = 0;
      spin_start = std::chrono::steady_clock::time_point{};
      continue;
    }
    if (busy) {
      // Busy-poll; yield (a system call) only now and then. A long wait (large transfers, a slow
      // peer) sleeps in short naps instead, leaving the CPU to the rest of the process and to
      // software devices (rxe) that need it to make progress.
      if (++idle_polls >= kSpinsBeforeYield) {
        idle_polls = 0;
        auto now = std::chrono::steady_clock::now();
        if (spin_start == std::chrono::steady_clock::time_point{})
          spin_start = now;
        if (now - spin_start > kSpinBudget)
          std::this_thread::sleep_for(kBusyNap);
        else
          std::this_thread::yield();
      }
      continue;
    }
    spin_start = std::chrono::steady_clock::time_point{};
    // Idle: drop our references (removed QPs may be destroyed), then sleep until woken. Work
    // is submitted with a wake(); the timed wake-up is only a safety net, and rare, because each
    // wake-up of an idle thread takes CPU from the threads that do work (direct lanes poll in
    // their caller's thread; rxe runs in the kernel on the same few CPUs).
    bool none = local.empty() && routers.empty();
    local.clear();
    routers.clear();
    seen = ~uint64_t{0};
    std::unique_lock<std::mutex> guard(mu_);
    cv_.wait_for(guard, none ? kIdleWaitEmpty : kIdleWait, [this] { return woken_ || stop_; });
  }
}

}  // namespace caf_rdma
