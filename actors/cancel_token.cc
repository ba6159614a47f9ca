// CancelToken (see cancel_token.h).
#include "actors/cancel_token.h"

#include <algorithm>
#include <condition_variable>
#include <mutex>

#include "components/stop_signal.h"

namespace caf_rdma {

struct CancelToken::State {
  /// Set under `mu`; its waker (a stream lane's socket shut down) runs there too, so the lock
  /// order is: this token's mu, the signal's, then the lane's own (components/stop_signal.h).
  StopSignal signal;
  std::mutex mu;
  std::condition_variable ended_cv;
  enum class Phase : uint8_t { kIdle, kRunning, kEnded } phase = Phase::kIdle;
  Status outcome;
  uint64_t landed = 0;
  uint64_t bytes = 0;
};

CancelToken::CancelToken() : state_(std::make_shared<State>()) {}

CancelResult CancelToken::cancel(std::chrono::milliseconds limit) const {
  // A day at most: now() + limit must not overflow.
  limit = std::min<std::chrono::milliseconds>(limit, std::chrono::hours(24));
  State& s = *state_;
  std::unique_lock<std::mutex> lock(s.mu);
  // Under the lock: a transfer that begins after this sees the request (invariant 3).
  s.signal.request();
  CancelResult r;
  if (s.phase == State::Phase::kIdle)
    return r;  // kNotStarted
  if (!s.ended_cv.wait_for(lock, limit, [&] { return s.phase == State::Phase::kEnded; })) {
    r.state = CancelResult::State::kStillRunning;
    return r;
  }
  const bool cancelled = !s.outcome.ok() && s.outcome.error().code() == ErrorCode::kCancelled;
  r.state = cancelled ? CancelResult::State::kCancelled : CancelResult::State::kFinished;
  r.status = s.outcome;
  r.landed = s.landed;
  r.bytes = s.bytes;
  return r;
}

bool CancelToken::cancel_requested() const {
  return state_->signal.requested();
}

CancelToken::Use::Use(const CancelToken& token) : state_(token.state_) {
  State& s = *state_;
  std::lock_guard<std::mutex> guard(s.mu);
  if (s.phase != State::Phase::kIdle) {
    refused_ = Error(ErrorCode::kInvalidArgument,
                     "this CancelToken was handed to another transfer already: a token serves "
                     "one transfer (make one per transfer)");
    return;
  }
  s.phase = State::Phase::kRunning;
  signal_ = &s.signal;
}

CancelToken::Use::~Use() {
  if (!refused_ && !ended_)
    end(Error(ErrorCode::kInternal, "the transfer ended without an answer (an exception)"), 0, 0);
}

bool CancelToken::Use::stopped() const {
  return stop_requested(signal_);
}

void CancelToken::Use::end(const Status& outcome, uint64_t landed, uint64_t bytes) {
  if (refused_ || ended_)
    return;
  ended_ = true;
  State& s = *state_;
  // Notified under the lock: a canceller woken by it cannot drop the state before.
  std::lock_guard<std::mutex> guard(s.mu);
  s.phase = State::Phase::kEnded;
  s.outcome = outcome;
  s.landed = landed;
  s.bytes = bytes;
  s.ended_cv.notify_all();
}

std::string CancelResult::to_string() const {
  // A list's answer counts ranges; a single op's, the bytes known in place (none, when stopped).
  const std::string in_place =
      landed > 0 ? std::to_string(landed) + " ranges (" + std::to_string(bytes) + " bytes) in place"
                 : std::to_string(bytes) + " bytes known in place";
  switch (state) {
    case State::kNotStarted:
      return "not started: the transfer it is handed to answers cancelled, moving nothing";
    case State::kCancelled:
      return "cancelled: " + in_place + "; " + status.error().to_string();
    case State::kFinished:
      return "finished: " + (status.ok() ? std::string("ok") : status.error().to_string());
    case State::kStillRunning:
      return "still running: not ended within the cancel's limit, nothing promised yet";
  }
  return "unknown";
}

}  // namespace caf_rdma
