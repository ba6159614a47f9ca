// StopSignal (see stop_signal.h).
#include "components/stop_signal.h"

#include <utility>

namespace caf_rdma {

void StopSignal::request() {
  flag_.store(true, std::memory_order_release);
  std::lock_guard<std::mutex> lock(mu_);
  if (waker_)
    waker_();
}

StopSignal::Armed::Armed(const StopSignal* signal, std::function<void()> waker) : signal_(signal) {
  if (signal_ == nullptr)
    return;
  std::lock_guard<std::mutex> lock(signal_->mu_);
  signal_->waker_ = std::move(waker);
  if (signal_->requested())  // invariant 1: requested before the arming
    signal_->waker_();
}

StopSignal::Armed::~Armed() {
  if (signal_ == nullptr)
    return;
  std::lock_guard<std::mutex> lock(signal_->mu_);
  signal_->waker_ = nullptr;
}

}  // namespace caf_rdma
