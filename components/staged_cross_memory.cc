// Staged cross-memory copies (see staged_cross_memory.h).
#include "components/staged_cross_memory.h"

#include <algorithm>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

#include "components/bounce_buffer.h"
#include "components/cross_memory.h"

namespace caf_rdma {
namespace {

/// Invariant 2: this thread's staging buffer (both halves), and the DeviceMemory that made it.
struct ThreadStaging {
  std::unique_ptr<BounceBuffer> buffer;
  const DeviceMemory* made_by = nullptr;
};

ThreadStaging& thread_staging() {
  thread_local ThreadStaging staging;
  return staging;
}

}  // namespace

Status staged_cross_ready(const StagedMemory& memory) {
  ThreadStaging& staging = thread_staging();
  if (staging.buffer && staging.made_by == memory.device.get())
    return {};
  staging.buffer.reset();  // unlocked by the DeviceMemory that locked it
  staging.made_by = nullptr;
  auto made = BounceBuffer::allocate(2 * kStagedCrossPiece, memory.device, memory.gpu);
  if (!made.ok())
    return made.error().with_context("the staging buffer of a cross-memory copy of GPU " +
                                     std::to_string(memory.gpu) + " memory");
  staging.buffer = std::move(*made);
  staging.made_by = memory.device.get();
  return {};
}

namespace {

/// Invariant 3: one thread that runs one GPU copy at a time beside its creator's work; joined
/// when it is destroyed. wait() follows each start().
class GpuCopyHelper {
public:
  GpuCopyHelper() : thread_([this] { run(); }) {}
  ~GpuCopyHelper() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      quit_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  GpuCopyHelper(const GpuCopyHelper&) = delete;
  GpuCopyHelper& operator=(const GpuCopyHelper&) = delete;

  void start(std::function<Status()> copy) {
    std::lock_guard<std::mutex> lock(mu_);
    copy_ = std::move(copy);
    result_.reset();
    cv_.notify_all();
  }
  Status wait() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return result_.has_value(); });
    return *result_;
  }

private:
  void run() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      cv_.wait(lock, [this] { return quit_ || copy_ != nullptr; });
      if (copy_ == nullptr)
        return;
      std::function<Status()> copy = std::move(copy_);
      copy_ = nullptr;
      lock.unlock();
      Status st = copy();
      lock.lock();
      result_ = std::move(st);
      cv_.notify_all();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::function<Status()> copy_;
  std::optional<Status> result_;
  bool quit_ = false;
  std::thread thread_;  // last: it starts once the rest is made
};

}  // namespace

Status staged_cross_memory_copy(pid_t pid, const StagedMemory& memory, uint64_t gpu_addr,
                                uint64_t remote_addr, uint64_t n, bool to_remote, Deadline deadline,
                                const std::string& subject, bool* refused,
                                const Withdrawal& withdrawal,
                                const std::function<bool()>& requester_gone, Priority priority) {
  *refused = false;
  CAF_RDMA_RETURN_IF_ERROR(staged_cross_ready(memory));
  uint8_t* const staging = thread_staging().buffer->data();
  uint8_t* const half[2] = {staging, staging + kStagedCrossPiece};
  const uint64_t pieces = (n + kStagedCrossPiece - 1) / kStagedCrossPiece;
  auto at = [](uint64_t k) { return k * kStagedCrossPiece; };
  auto length = [&](uint64_t k) { return std::min(kStagedCrossPiece, n - at(k)); };
  auto gpu_copy = [&](uint64_t k) -> Status {
    uint8_t* h = half[k % 2];
    Status st = to_remote
                    ? memory.device->copy_to_host(h, gpu_addr + at(k), length(k), memory.gpu)
                    : memory.device->copy_to_device(gpu_addr + at(k), h, length(k), memory.gpu);
    if (!st.ok())
      return st.error().with_context(subject + ": copying " + std::to_string(length(k)) +
                                     " bytes " + (to_remote ? "out of" : "into") + " GPU " +
                                     std::to_string(memory.gpu) + " memory at byte " +
                                     std::to_string(at(k)) + " of a cross-memory copy");
    return st;
  };
  // Piece k between its half and the requester; `landed`: the bytes of the range that reached
  // their destination before it (invariant 4's answer when it is withdrawn).
  auto remote_copy = [&](uint64_t k, uint64_t landed) -> Status {
    if (k > 0 && std::chrono::steady_clock::now() >= deadline)
      return Error(ErrorCode::kTimeout, subject + ": the deadline passed after " +
                                            std::to_string(landed) + " of " + std::to_string(n) +
                                            " bytes of a cross-memory copy of GPU memory");
    bool piece_refused = false;
    Status st =
        cross_memory_copy(pid, half[k % 2], remote_addr + at(k), length(k), to_remote, deadline,
                          subject, &piece_refused, withdrawal, requester_gone, priority);
    *refused = piece_refused && k == 0;  // invariant 5
    if (ended_by_withdrawal(st))
      return released_midway_error(landed, n).with_context(subject);
    if (!st.ok() && k > 0)
      return st.error().with_context("piece at byte " + std::to_string(at(k)));
    return st;
  };
  std::optional<GpuCopyHelper> helper;
  if (pieces > 1)
    helper.emplace();
  if (to_remote) {
    // Out of the GPU: piece k+1 is copied out while piece k goes to the requester.
    if (withdrawn(withdrawal))  // invariant 4: no piece starts
      return released_midway_error(0, n).with_context(subject);
    CAF_RDMA_RETURN_IF_ERROR(gpu_copy(0));
    for (uint64_t k = 0; k < pieces; ++k) {
      const bool next = k + 1 < pieces && !withdrawn(withdrawal);
      if (next)
        helper->start([&gpu_copy, k] { return gpu_copy(k + 1); });
      Status sent = remote_copy(k, at(k));
      Status copied = next ? helper->wait() : Status{};
      CAF_RDMA_RETURN_IF_ERROR(sent);
      CAF_RDMA_RETURN_IF_ERROR(copied);
      if (k + 1 < pieces && !next)
        return released_midway_error(at(k + 1), n).with_context(subject);
    }
    return {};
  }
  // Into the GPU: piece k is copied in while piece k+1 comes from the requester.
  CAF_RDMA_RETURN_IF_ERROR(remote_copy(0, 0));
  for (uint64_t k = 0; k < pieces; ++k) {
    if (withdrawn(withdrawal))  // invariant 4: a piece received is not copied in
      return released_midway_error(at(k), n).with_context(subject);
    if (k + 1 == pieces)
      return gpu_copy(k);
    helper->start([&gpu_copy, k] { return gpu_copy(k); });
    Status got = remote_copy(k + 1, at(k));
    Status copied = helper->wait();
    CAF_RDMA_RETURN_IF_ERROR(copied);
    if (ended_by_withdrawal(got))
      return released_midway_error(at(k + 1), n).with_context(subject);
    CAF_RDMA_RETURN_IF_ERROR(got);
  }
  return {};
}

}  // namespace caf_rdma
